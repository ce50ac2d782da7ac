"""One Kerberos login for both hops: who logs in and how, the credentials, the errors.

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

Errors: :func:`login_error` is the one map from a refused login (``gssapi`` errors) to
:class:`KerberosError`. The map is shared, the words are the hop's: each passes its
:class:`LoginOptions`, so the message and ``option`` name the option the user set on
that hop (``kafka.sasl.jaas.config`` for Kafka, ``hbase.thrift.kerberos.client.*`` for
HBase). Keytab contents never leave MIT's library; only the path appears in messages.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from .._exceptions import ConfigError, KerberosError

__all__ = ["Login", "LoginOptions", "OptionName", "check_keytab", "credentials", "gss_reason",
           "login_error", "require_gssapi", "ticket_cache"]

# A keytab file starts with its format version (MIT: 0x0502; 0x0501 is the old one).
_KEYTAB_MAGIC = (b"\x05\x01", b"\x05\x02")
# Log in afresh when the ticket has less left than this (MIT would at expiry anyway).
_RENEW_BEFORE_S = 60
# MIT Kerberos error codes (krb5_err.et): ERROR_TABLE_BASE_krb5 + offset, as unsigned.
_BASE = 2529638912
_C_PRINCIPAL_UNKNOWN = _BASE + 6
_PREAUTH_FAILED = _BASE + 24
_MAJOR = re.compile(r"^Major \(\d+\): ")
_MINOR = re.compile(r",? ?Minor \((\d+)\): (.*)$", re.DOTALL)


@dataclass(frozen=True)
class Login:
    """Who logs in and how. Picklable; nothing secret inside (a principal and paths).

    ``keytab``: log in from this keytab (read on every machine whose client logs in,
    driver and executors). Without one, the ticket cache: ``ticket_cache`` (an MIT cache
    name such as ``FILE:/path``) or the process's default. ``use_ticket_cache`` with a
    keytab tries the ticket cache first and the keytab when it holds no valid ticket
    (Java's order). ``principal`` None: whoever the ticket cache holds.
    """

    principal: str | None = None
    keytab: str | None = None
    ticket_cache: str | None = None
    use_ticket_cache: bool = False

    @property
    def who(self) -> str:
        """The principal as messages name it."""
        return self.principal or "the ticket cache's principal"


@dataclass(frozen=True)
class OptionName:
    """An option as an error names it: ``key`` is the error's ``option``; ``part`` the field
    inside it, for options that hold several (the JAAS line's ``principal=``)."""

    key: str
    part: str = ""

    def __str__(self) -> str:
        return f"{self.part} in {self.key!r}" if self.part else repr(self.key)


@dataclass(frozen=True)
class LoginOptions:
    """How one hop names its login, so the shared error map names that hop's own fix.

    ``peer``: what the login is for, in messages ("the Kafka brokers"). ``enabled`` set to
    ``enabled_value`` asks for Kerberos (named when the ``gssapi`` package is missing).
    ``keytab_login``: how to switch this hop to a keytab login. ``keytab_word``: what the
    hop's option calls the keytab (Java's JAAS line says ``keyTab``).
    """

    peer: str
    principal: OptionName
    keytab: OptionName
    enabled: OptionName
    enabled_value: str
    keytab_login: str
    keytab_word: str = "keytab"


def require_gssapi(options: LoginOptions) -> None:
    """The ``gssapi`` package is an extra (it builds against MIT krb5): say how to get it."""
    try:
        import gssapi  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"{options.enabled} = {options.enabled_value} needs the gssapi package on the driver and "
            f"every executor ({exc}): pip install 'sparkbarrier[kerberos]' (builds against MIT Kerberos' libkrb5-dev)",
            option=options.enabled.key) from None


def check_keytab(login: Login, options: LoginOptions) -> None:
    """Raise :class:`KerberosError` naming the keytab option when this machine cannot read
    the keytab, or it is not one (only its two-byte format header is read, never logged).

    Called where the login starts (query start, and each process's first login: an
    executor without the shipped keytab says so instead of MIT's "No key table entry").
    """
    if login.keytab is None:
        return
    try:
        with open(login.keytab, "rb") as handle:
            head = handle.read(2)
    except OSError as exc:
        raise KerberosError(
            f"option {options.keytab.key!r}: cannot read {options.keytab_word} {login.keytab!r} "
            f"({exc.strerror}); the file must exist at that path on the driver and on every executor: "
            f"ship it with `spark-submit --files <keytab>` and give its file name, or put it at the "
            f"same path on every node", option=options.keytab.key) from None
    if head not in _KEYTAB_MAGIC:
        raise KerberosError(f"option {options.keytab.key!r}: {login.keytab!r} is not a Kerberos keytab "
                            f"file (create one with ktutil or kadmin ktadd)", option=options.keytab.key)


def ticket_cache(login: Login) -> str:
    """The private ``MEMORY:`` cache of a keytab login in this process (never the default)."""
    tag = hashlib.sha256(f"{login.principal}\0{login.keytab}".encode()).hexdigest()[:16]
    return f"MEMORY:sparkbarrier-{os.getpid()}-{tag}"


_lock = threading.Lock()
_keytab_creds: dict[tuple[int, str | None, str | None], Any] = {}


def _after_fork_in_child() -> None:
    """A forked worker starts with a free lock (another thread of the parent may have held
    it at the fork); the parent's logins stay in the map but under the parent's pid."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def credentials(login: Login, options: LoginOptions) -> Any:
    """``gssapi.Credentials`` for initiating contexts as ``login``; forces the login.

    Called at query start (so a stale keytab or an unknown principal fails there, not
    inside the first request) and for every connection: a keytab login is cached per
    process and reused while its ticket has more than a minute left, then renewed from
    the keytab; a ticket cache is read afresh each time (``kinit`` may have refilled it).
    Thread-safe. Raises :class:`KerberosError` (a refused login: :func:`login_error`; an
    unreadable keytab) or :class:`ConfigError` (no gssapi package).
    """
    require_gssapi(options)
    import gssapi

    name = (gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
            if login.principal else None)
    if login.keytab is None or login.use_ticket_cache:
        store: dict[bytes | str, bytes | str] | None = (
            {"ccache": login.ticket_cache} if login.ticket_cache else None)
        try:
            return _resolved(gssapi.Credentials(name=name, usage="initiate", store=store))
        except gssapi.exceptions.GSSError as exc:
            if login.keytab is None:
                raise login_error(login, exc, options) from None
        # Java: useTicketCache first, then the keytab when the cache holds no valid ticket
    pid = os.getpid()
    key = (pid, login.principal, login.keytab)
    with _lock:
        creds = _keytab_creds.get(key)
        try:
            if creds is not None and (creds.lifetime is None or creds.lifetime > _RENEW_BEFORE_S):
                return creds
        except gssapi.exceptions.GSSError:
            pass  # expired: acquire afresh below, which logs in from the keytab
        check_keytab(login, options)  # an executor without the shipped keytab says so
        try:
            creds = _resolved(gssapi.Credentials(name=name, usage="initiate", store={
                "client_keytab": login.keytab, "ccache": ticket_cache(login)}))
        except gssapi.exceptions.GSSError as exc:
            raise login_error(login, exc, options) from None
        for stale in [k for k in _keytab_creds if k[0] != pid]:  # a forked worker's inheritance
            del _keytab_creds[stale]
        _keytab_creds[key] = creds
        return creds


def _resolved(creds: Any) -> Any:
    """``creds`` once MIT has resolved them: reading ``lifetime`` makes it log in from the
    keytab (or read the cache) now, and raises for a cache whose ticket has run out."""
    import gssapi

    lifetime = creds.lifetime
    if lifetime is not None and lifetime <= 0:  # None: a ticket without an end
        raise gssapi.exceptions.ExpiredCredentialsError(0x000B0000, 0)
    return creds


def gss_reason(exc: BaseException) -> str:
    """MIT's reason from a GSSError, on one line: the minor (mechanism) message when there is
    one (it says what went wrong: "Preauthentication failed"), else the major one ("The
    referenced credential has expired"); any other exception's text as it is."""
    gen = getattr(exc, "gen_message", None)
    text = str(exc)
    if callable(gen):
        try:
            text = str(gen())
        except (TypeError, ValueError, AttributeError, UnicodeError):  # formatting only: use str()
            pass
    found = _MINOR.search(text)
    if found and found.group(1) != "0":
        text = found.group(2)
    elif found:
        text = _MAJOR.sub("", text[:found.start()])
    return " ".join(text.split())


def login_error(login: Login, exc: BaseException, options: LoginOptions) -> KerberosError:
    """The one map from a refused login to :class:`KerberosError`, naming ``options``' fix."""
    code, reason = getattr(exc, "min_code", None), gss_reason(exc)
    who, keytab = login.who, options.keytab
    if "Cannot contact any KDC" in reason or "Cannot find KDC" in reason:
        config = os.environ.get("KRB5_CONFIG", "/etc/krb5.conf")
        return KerberosError(
            f"no KDC answered for the Kerberos login of {who} to {options.peer} ({reason}); check the "
            f"realm's kdc entries in {config} (KRB5_CONFIG; on executors spark.executorEnv.KRB5_CONFIG) "
            f"and that the KDC is reachable", option=keytab.key)
    if code == _C_PRINCIPAL_UNKNOWN or "not found in Kerberos database" in reason:
        return KerberosError(
            f"the KDC does not know the principal {who} ({reason}); check {options.principal} "
            f"(with its @REALM) and that the principal exists", option=options.principal.key)
    if (code == _PREAUTH_FAILED or "Preauthentication failed" in reason or "Key version" in reason
            or "No key table entry" in reason):
        return KerberosError(
            f"the KDC refused the Kerberos login of {who} ({reason}): the keytab {login.keytab!r} "
            f"holds an old key (the principal's key changed since it was exported) or another "
            f"principal's; export a current keytab for {who} (kadmin ktadd, ipa-getkeytab), give it in "
            f"{keytab} and check {options.principal}", option=keytab.key)
    if login.keytab is None:
        cache = login.ticket_cache or os.environ.get("KRB5CCNAME", "the default ticket cache")
        return KerberosError(
            f"no valid Kerberos ticket for {who} in {cache} to reach {options.peer} ({reason}); run "
            f"`kinit` as the job's user before the query, where the clients run (a ticket cache is not "
            f"renewed: when it runs out, run kinit again), or log in with a keytab: "
            f"{options.keytab_login}", option=keytab.key)
    return KerberosError(
        f"the Kerberos login of {who} with keytab {login.keytab!r} to {options.peer} failed ({reason}); "
        f"check {options.principal}, {keytab} and KRB5_CONFIG (the realm's KDC)", option=keytab.key)

