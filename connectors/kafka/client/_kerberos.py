"""Kafka over SASL/GSSAPI (Kerberos): Java's options -> one login, for kafka-python.

Users write what Spark's Kafka source takes (``kafka.sasl.mechanism=GSSAPI``,
``kafka.sasl.kerberos.service.name``, and a ``Krb5LoginModule`` line in
``kafka.sasl.jaas.config``). :func:`parse_krb5_jaas` turns the JAAS fields into the
:class:`~..kerberos._settings.KerberosSettings` both hops use (nothing secret in it: a
keytab *path* and a principal).

Why kafka-python runs every GSSAPI connection (driver and executors): the librdkafka
in the confluent-kafka wheel, which the compiled reader links too, is built without
GSSAPI, and librdkafka's own Kerberos login runs ``kinit`` into the process's
default ticket cache, so two principals in one process would overwrite each other
(docs/kerberos-devstack.md). See :func:`librdkafka_gssapi` for the check.

The login itself is the one both hops share (:mod:`..kerberos._login`): a keytab login
into a private ``MEMORY:`` ticket cache of the process, renewed from the keytab; the
ticket cache with ``useTicketCache=true`` (tried first when a keytab is given too, as
Java does); never the process's default cache or environment changed, so queries with
different principals share the long-lived driver. This module binds it to Kafka's
option names (:data:`LOGIN_OPTIONS`: every login error names ``kafka.sasl.jaas.config``,
an unknown service principal ``kafka.sasl.kerberos.service.name`` and the broker's host).

How kafka-python gets them: it builds its SASL mechanism from the client's settings
and hands ``sasl_kerberos_name`` through unchanged. :func:`kafka_python_settings`
puts a :class:`KerberosLogin` there, and :class:`_QueryGSSAPI` (registered for
``GSSAPI`` in place of kafka-python's own class) uses its credentials; for any
other ``sasl_kerberos_name`` it *is* kafka-python's class, so other code in the
process that uses kafka-python's GSSAPI behaves exactly as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from ...._exceptions import ConfigError
from ...kerberos import _login as _shared
from ...kerberos._settings import KerberosSettings, LoginOptions, OptionName

if TYPE_CHECKING:
    import gssapi

__all__ = ["LOGIN_OPTIONS", "KerberosLogin", "check_keytab", "credentials",
           "install_gssapi_mechanism", "kafka_python_settings", "librdkafka_gssapi", "parse_krb5_jaas"]

log = logging.getLogger(__name__)

JAAS = "kafka.sasl.jaas.config"
SERVICE = "kafka.sasl.kerberos.service.name"
_BOOLS = ("useKeyTab", "useTicketCache", "storeKey", "doNotPrompt", "renewTGT",
          "refreshKrb5Config", "isInitiator", "debug")
_TEXTS = ("keyTab", "principal", "ticketCache", "serviceName")
# Java's password-prompt options: a job has no one to type a password.
_PASSWORD = ("useFirstPass", "tryFirstPass", "storePass", "clearPass")

LOGIN_OPTIONS = LoginOptions(
    peer="the Kafka brokers", peer_one="the broker",
    principal=OptionName(JAAS, "principal="),
    keytab=OptionName(JAAS, "keyTab="),
    service=OptionName(SERVICE),
    service_fix=("Kerberos names a broker by the host the client connects to: put the host name of the "
                 "brokers' principals in kafka.bootstrap.servers (not an IP address or alias), and check "
                 f"{SERVICE!r} (the brokers' principals are <service>/<host>@<REALM>)"),
    enabled=OptionName("kafka.sasl.mechanism"), enabled_value="GSSAPI",
    keytab_login=f'{JAAS!r} = ...Krb5LoginModule required useKeyTab=true keyTab="..." '
                 f'principal="...";',
    keytab_word="keyTab")
"""Kafka's names for the shared login's errors: every part of the login is in the JAAS line."""


def _bool(name: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low not in ("true", "false"):
        raise ConfigError(f"option {JAAS!r}: {name} must be true or false, got {raw!r}",
                          option=JAAS)
    return low == "true"


def parse_krb5_jaas(fields: Mapping[str, str], service_name: str | None) -> KerberosSettings:
    """The :class:`~..kerberos._settings.KerberosSettings` from the fields of a ``Krb5LoginModule`` JAAS line and
    ``kafka.sasl.kerberos.service.name``; raises :class:`ConfigError` naming the option.

    Java's rules where they apply: ``serviceName`` in the JAAS line stands in for the
    service-name option; ``storeKey``, ``doNotPrompt``, ``renewTGT`` and
    ``refreshKrb5Config`` are accepted (a client never needs its key stored, nothing is
    ever prompted, MIT renews from the keytab, krb5.conf is read afresh). A login Java
    would have to prompt for, or a keytab or cache that would be ignored, is an error.
    """
    unknown = sorted(set(fields) - set(_BOOLS) - set(_TEXTS) - set(_PASSWORD))
    if unknown:
        raise ConfigError(f"option {JAAS!r}: Krb5LoginModule has no option {unknown[0]!r}; "
                          f"known: {', '.join(sorted(_BOOLS + _TEXTS))}", option=JAAS)
    password = [k for k in _PASSWORD if k in fields]
    if password:
        raise ConfigError(f"option {JAAS!r}: {password[0]} asks for a password login, which "
                          f"a job cannot answer; use useKeyTab=true keyTab=\"...\" "
                          f"principal=\"...\" or useTicketCache=true", option=JAAS)
    flags = {k: _bool(k, fields[k]) for k in _BOOLS if k in fields}
    if flags.get("isInitiator") is False:
        raise ConfigError(f"option {JAAS!r}: isInitiator=false cannot log in to Kafka as a "
                          f"client; remove it", option=JAAS)
    use_keytab, use_cache = flags.get("useKeyTab", False), flags.get("useTicketCache", False)
    keytab, principal = fields.get("keyTab"), fields.get("principal")
    ticket_cache = fields.get("ticketCache")
    if keytab is not None and not use_keytab:
        raise ConfigError(f"option {JAAS!r} gives keyTab but not useKeyTab=true, so Java "
                          f"would ignore the keytab; add useKeyTab=true", option=JAAS)
    if ticket_cache is not None and not use_cache:
        raise ConfigError(f"option {JAAS!r} gives ticketCache but not useTicketCache=true, "
                          f"so Java would ignore it; add useTicketCache=true", option=JAAS)
    if use_keytab and (not keytab or not principal):
        raise ConfigError(f'option {JAAS!r}: useKeyTab=true needs keyTab="<path>" and '
                          f'principal="<name>@<REALM>"', option=JAAS)
    if not use_keytab and not use_cache:
        raise ConfigError(f'option {JAAS!r}: Krb5LoginModule needs useKeyTab=true with '
                          f'keyTab="..." and principal="...", or useTicketCache=true (after '
                          f'kinit); without either Java would prompt for a password',
                          option=JAAS)
    service = (service_name or "").strip() or (fields.get("serviceName") or "").strip()
    if not service:
        raise ConfigError(f"option {SERVICE!r} is required with GSSAPI (as in Java): the "
                          f"Kerberos service name of the brokers, usually 'kafka' (their "
                          f"principal is kafka/<broker host>@<REALM>)", option=SERVICE)
    return KerberosSettings(service=service, principal=principal,
                            keytab=keytab if use_keytab else None, use_ticket_cache=use_cache,
                            ticket_cache=ticket_cache)


def check_keytab(kerberos: KerberosSettings) -> None:
    """:func:`..kerberos._login.check_keytab` naming ``kafka.sasl.jaas.config``."""
    _shared.check_keytab(kerberos, LOGIN_OPTIONS)


def credentials(kerberos: KerberosSettings) -> gssapi.Credentials:
    """``gssapi.Credentials`` for initiating contexts as this query's principal.

    Called for every connection (cheap: the keytab login is cached per process and
    renewed near its end; see :mod:`..kerberos._login`). Raises :class:`KerberosError`
    naming ``kafka.sasl.jaas.config``.
    """
    return _shared.credentials(kerberos, LOGIN_OPTIONS)


class KerberosLogin:
    """kafka-python's ``sasl_kerberos_name`` for a query: carries its :class:`KerberosSettings`.

    Created per client from the options' settings. ``str()`` is only the
    service name, so kafka-python's config log shows nothing more. Unpickled (client
    settings shipped to another process) it registers the mechanism there too, which
    it needs to be used at all.
    """

    def __init__(self, kerberos: KerberosSettings) -> None:
        self.kerberos = kerberos

    def __reduce__(self) -> tuple[Callable[[KerberosSettings], KerberosLogin], tuple[KerberosSettings]]:
        return _login, (self.kerberos,)

    def __str__(self) -> str:
        return self.kerberos.service

    def __repr__(self) -> str:
        return f"KerberosLogin(service={self.kerberos.service!r}, " \
               f"principal={self.kerberos.principal!r})"


@cache
def install_gssapi_mechanism() -> None:
    """Register :class:`_QueryGSSAPI` as kafka-python's GSSAPI mechanism (once per process)."""
    from kafka.net.sasl import get_sasl_mechanism, register_sasl_mechanism

    upstream = get_sasl_mechanism("GSSAPI")

    class _QueryGSSAPI(upstream):  # type: ignore[misc, valid-type]  # a base chosen at run time
        """kafka-python's GSSAPI client, with the query's credentials when
        ``sasl_kerberos_name`` is a :class:`KerberosLogin`; upstream otherwise."""

        def __init__(self, **config: Any) -> None:
            login = config.get("sasl_kerberos_name")
            if not isinstance(login, KerberosLogin):
                super().__init__(**config)
                return
            host = config.get("sasl_kerberos_domain_name") or config.get("host", "")
            self._is_done = False
            self._is_authenticated = False
            # As upstream with sasl_kerberos_service_name: also the authorization id.
            self.auth_id = f"{login.kerberos.service}@{host}"
            # A refused service ticket is a KerberosError naming the option, as at query start.
            self._client_ctx, self._next_token = _shared.security_context(login.kerberos, host, LOGIN_OPTIONS)

    register_sasl_mechanism("GSSAPI", _QueryGSSAPI, overwrite=True)


def _login(kerberos: KerberosSettings) -> KerberosLogin:
    install_gssapi_mechanism()
    return KerberosLogin(kerberos)


def kafka_python_settings(kerberos: KerberosSettings) -> dict[str, Any]:
    """kafka-python keyword arguments for a GSSAPI login (with the protocol's own)."""
    install_gssapi_mechanism()
    return {"sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": kerberos.service,
            "sasl_kerberos_name": KerberosLogin(kerberos)}


@cache
def librdkafka_gssapi() -> str:
    """Why the executors cannot read GSSAPI with librdkafka here (always a reason).

    Read once per process from librdkafka's ``builtin.features`` (no client is created,
    so no ``kinit`` runs). Even a build with ``sasl_gssapi`` is not used: its login
    runs ``kinit`` into the process's default ticket cache (shared by every query of
    the process) and is untested here, so barrier-kafka does not hand it Kerberos
    settings.
    """
    import confluent_kafka

    version = confluent_kafka.libversion()[0]
    features = _builtin_features()
    if features is not None and "sasl_gssapi" not in features.split(","):
        return (f"the librdkafka {version} of confluent-kafka {confluent_kafka.version()[0]} "
                f"(which the compiled reader links too) is built without GSSAPI "
                f"(builtin.features: {features})")
    return (f"barrier-kafka does not hand Kerberos logins to librdkafka {version} (its "
            f"login runs kinit into the process's one default ticket cache)")


def _builtin_features() -> str | None:
    """``builtin.features`` of the librdkafka confluent-kafka loaded, through ctypes."""
    import ctypes

    import confluent_kafka.cimpl  # noqa: F401 -- loads the library

    path = None
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            for line in maps:
                if "librdkafka" in line and ".so" in line:
                    path = line.split()[-1]
                    break
    except OSError:
        return None
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.POINTER(ctypes.c_size_t)]
        lib.rd_kafka_conf_destroy.argtypes = [ctypes.c_void_p]
        conf = lib.rd_kafka_conf_new()
        size = ctypes.c_size_t(512)
        buf = ctypes.create_string_buffer(512)
        ok = lib.rd_kafka_conf_get(conf, b"builtin.features", buf, ctypes.byref(size)) == 0
        lib.rd_kafka_conf_destroy(conf)
    except (OSError, AttributeError):
        return None
    return buf.value.decode() if ok else None
