"""One Kerberos login for both hops: the credentials and the security context.

Beside it: the one settings type and each hop's option names
(:mod:`._settings`), the one error map (:mod:`._errors`).

One floor below ``connectors/kafka`` (GSSAPI to the brokers, through kafka-python) and
``connectors/hbase`` (SASL/GSSAPI to the Thrift gateways). Each hop keeps only what is
its own -- the Kafka package parses Java's ``Krb5LoginModule`` line and plugs into
kafka-python's mechanism, the HBase package frames SASL -- and both log in here, so a
fix to the login, its renewal or its error messages reaches both.

Credentials (:func:`credentials`) come from the ``gssapi`` package's credential-store
extension (``gss_acquire_cred_from``). With a keytab: ``client_keytab`` plus a
``MEMORY:`` ticket cache private to this process, principal and keytab; MIT Kerberos
logs in from the keytab when the cache holds no valid ticket, and :func:`credentials`
asks again when the ticket nears its end, so a query outlives any ticket lifetime.
Without a keytab (or with ``use_ticket_cache`` first, as Java's ``useTicketCache=true
useKeyTab=true``): the ticket cache named, else the process's default (``KRB5CCNAME``,
filled by ``kinit``), read and never written. The process's default cache and the
environment are never changed, so two principals work side by side in one process (a
long-lived driver running queries of several users).

Why a memory cache and not a file: Spark ends Python workers with ``os._exit``, so no
exit handler runs and files would pile up (each holding a ticket-granting ticket); a
memory cache never touches the disk and dies with the process. Nothing needs a file:
every process that opens a connection (driver, each Python worker, kafka-python's
network thread inside them) calls :func:`credentials` itself, and threads of one
process share the memory cache. The cache name carries the process id: a worker forked
from a process that had logged in logs in again under its own name instead of sharing
a copied handle.

Errors: every refusal goes through the one map, :func:`._errors.kerberos_error`
(by gssapi's status codes), with the hop's :class:`~._settings.LoginOptions`, so
the message and ``option`` name the option the user set on that hop
(``kafka.sasl.jaas.config`` for Kafka, ``hbase.thrift.kerberos.client.*`` for HBase).
:func:`security_context` is the one place a context with ``<service>@<host>`` starts
(the preflight, kafka-python's mechanism and the HBase SASL client all call it), so a
refused service ticket maps the same way on every path. Keytab contents never leave
MIT's library; only the path appears in messages.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import TYPE_CHECKING

from ..._exceptions import ConfigError, KerberosError
from ._errors import kerberos_error
from ._settings import KerberosSettings, LoginOptions

if TYPE_CHECKING:
    import gssapi

__all__ = ["check_keytab", "credentials", "require_gssapi", "security_context", "ticket_cache"]

# A keytab file starts with its format version (MIT: 0x0502; 0x0501 is the old one).
_KEYTAB_MAGIC = (b"\x05\x01", b"\x05\x02")
# Log in afresh when the ticket has less left than this (MIT would at expiry anyway).
_RENEW_BEFORE_S = 60


def require_gssapi(options: LoginOptions) -> None:
    """The ``gssapi`` package is an extra (it builds against MIT krb5): say how to get it."""
    try:
        import gssapi  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"{options.enabled} = {options.enabled_value} needs the gssapi package on the driver and "
            f"every executor ({exc}): pip install 'sparkbarrier[kerberos]' (builds against MIT Kerberos' libkrb5-dev)",
            option=options.enabled.key) from None


def check_keytab(settings: KerberosSettings, options: LoginOptions) -> None:
    """Raise :class:`KerberosError` naming the keytab option when this machine cannot read
    the keytab, or it is not one (only its two-byte format header is read, never logged).

    Called where the login starts (query start, and each process's first login: an
    executor without the shipped keytab says so instead of MIT's "No key table entry").
    """
    if settings.keytab is None:
        return
    try:
        with open(settings.keytab, "rb") as handle:
            head = handle.read(2)
    except OSError as exc:
        raise KerberosError(
            f"option {options.keytab.key!r}: cannot read {options.keytab_word} {settings.keytab!r} "
            f"({exc.strerror}); the file must exist at that path on the driver and on every executor: "
            f"ship it with `spark-submit --files <keytab>` and give its file name, or put it at the "
            f"same path on every node", option=options.keytab.key) from None
    if head not in _KEYTAB_MAGIC:
        raise KerberosError(f"option {options.keytab.key!r}: {settings.keytab!r} is not a Kerberos keytab "
                            f"file (create one with ktutil or kadmin ktadd)", option=options.keytab.key)


def ticket_cache(settings: KerberosSettings) -> str:
    """The private ``MEMORY:`` cache of a keytab login in this process (never the default)."""
    tag = hashlib.sha256(f"{settings.principal}\0{settings.keytab}".encode()).hexdigest()[:16]
    return f"MEMORY:sparkbarrier-{os.getpid()}-{tag}"


_lock = threading.Lock()
_keytab_creds: dict[tuple[int, str | None, str | None], gssapi.Credentials] = {}


def _after_fork_in_child() -> None:
    """A forked worker starts with a free lock (another thread of the parent may have held
    it at the fork); the parent's logins stay in the map but under the parent's pid."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def credentials(settings: KerberosSettings, options: LoginOptions) -> gssapi.Credentials:
    """``gssapi.Credentials`` for initiating contexts as ``settings``' principal; forces the login.

    Called at query start (so a stale keytab or an unknown principal fails there, not
    inside the first request) and for every connection: a keytab login is cached per
    process and reused while its ticket has more than a minute left, then renewed from
    the keytab; a ticket cache is read afresh each time (``kinit`` may have refilled it).
    Thread-safe. Raises :class:`KerberosError` (a refused login, through the one map
    :func:`._errors.kerberos_error`; an
    unreadable keytab) or :class:`ConfigError` (no gssapi package).
    """
    require_gssapi(options)
    import gssapi

    name = (gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
            if settings.principal else None)
    if settings.keytab is None or settings.use_ticket_cache:
        store: dict[bytes | str, bytes | str] | None = (
            {"ccache": settings.ticket_cache} if settings.ticket_cache else None)
        try:
            return _resolved(gssapi.Credentials(name=name, usage="initiate", store=store))
        except gssapi.exceptions.GSSError as exc:
            if settings.keytab is None:
                raise kerberos_error(settings, exc, options) from None
        # Java: useTicketCache first, then the keytab when the cache holds no valid ticket
    pid = os.getpid()
    key = (pid, settings.principal, settings.keytab)
    with _lock:
        creds = _keytab_creds.get(key)
        try:
            if creds is not None and (creds.lifetime is None or creds.lifetime > _RENEW_BEFORE_S):
                return creds
        except gssapi.exceptions.GSSError:
            pass  # expired: acquire afresh below, which logs in from the keytab
        check_keytab(settings, options)  # an executor without the shipped keytab says so
        try:
            creds = _resolved(gssapi.Credentials(name=name, usage="initiate", store={
                "client_keytab": settings.keytab, "ccache": ticket_cache(settings)}))
        except gssapi.exceptions.GSSError as exc:
            raise kerberos_error(settings, exc, options) from None
        for stale in [k for k in _keytab_creds if k[0] != pid]:  # a forked worker's inheritance
            del _keytab_creds[stale]
        _keytab_creds[key] = creds
        return creds


def _resolved(creds: gssapi.Credentials) -> gssapi.Credentials:
    """``creds`` once MIT has resolved them: reading ``lifetime`` makes it log in from the
    keytab (or read the cache) now, and raises for a cache whose ticket has run out."""
    import gssapi

    lifetime = creds.lifetime
    if lifetime is not None and lifetime <= 0:  # None: a ticket without an end
        raise gssapi.exceptions.ExpiredCredentialsError(0x000B0000, 0)
    return creds


def security_context(settings: KerberosSettings, host: str, options: LoginOptions, *, flags: int | None = None,
                     gateway: str | None = None) -> tuple[gssapi.SecurityContext, bytes]:
    """Start a GSS context as ``settings``' principal with ``<service>@<host>``: (context, first token).

    The one place both hops build the service's name and the context: the Kafka preflight
    (driver, query start), kafka-python's mechanism (every broker connection) and the HBase
    SASL client (every gateway connection). The first step asks the KDC for the service
    ticket, so a refused one fails here, mapped by :func:`._errors.kerberos_error`
    (an unknown ``<service>/<host>`` names the hop's service option and the host).
    ``flags``: the GSS requirement flags (None: gssapi's defaults, mutual authentication).
    The name is canonicalised for the Kerberos mechanism as kafka-python's own mechanism
    does; the context imports it the same way otherwise, so HBase sees no difference.
    """
    import gssapi

    creds = credentials(settings, options)
    try:
        name = gssapi.Name(f"{settings.service}@{host}", gssapi.NameType.hostbased_service
                           ).canonicalize(gssapi.MechType.kerberos)
        context = gssapi.SecurityContext(name=name, creds=creds, usage="initiate", flags=flags)
        token = context.step()
    except gssapi.exceptions.GSSError as exc:
        raise kerberos_error(settings, exc, options, host=host, gateway=gateway) from None
    return context, token or b""
