"""Kafka's security options, as Spark users write them, for every Python client.

Users move a query from ``format("kafka")`` keeping the Java client's options
(Spark's Kafka guide, Databricks, EMR/MSK and Confluent Cloud all document them):
``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``, ``kafka.ssl.key.password``,
``kafka.ssl.endpoint.identification.algorithm``. The kafka-python spellings that
worked before (``kafka.ssl.cafile``, ``kafka.ssl.certfile``, ``kafka.ssl.keyfile``,
``kafka.ssl.password``, ``kafka.ssl.check.hostname``, ``kafka.sasl.plain.*``) keep
working. Both are parsed here into one :class:`Security` value, and each client's
settings are derived from it, so the driver (kafka-python) and the executors
(librdkafka, or kafka-python) authenticate the same way by construction.

Rules, checked at query start with the option named in every error:

* a security setting that would not be used (a truststore on PLAINTEXT, credentials
  without SASL) is an error, not silently ignored: the user believes it protects them;
* SASL mechanisms PLAIN, SCRAM-SHA-256/512 and GSSAPI (Kerberos, see ``_kerberos``)
  work; OAUTHBEARER fails with an error saying so, as does a JAAS login module that
  does not match the mechanism;
* hostname verification is on unless ``ssl.endpoint.identification.algorithm`` is
  empty, as in Java;
* no secret value ever appears in an error or a repr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ...._exceptions import ConfigError
from ..._options import parse_bool
from ...kerberos._settings import KerberosSettings
from ._kerberos import check_keytab, kafka_python_settings, parse_krb5_jaas
from ._keystores import PemFiles, Store, StoreType, pem_files

__all__ = ["Security", "parse_security"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
               "SCRAM-SHA-512": "ScramLoginModule", "GSSAPI": "Krb5LoginModule"}
_NOT_YET = {"OAUTHBEARER": "OAUTHBEARER is not supported by barrier-kafka yet"}
# Java's Kerberos relogin tuning: MIT Kerberos renews from the keytab on its own, so
# these are accepted with GSSAPI and have no effect (docs/secured-kafka.md).
_KERBEROS_TUNING = ("sasl.kerberos.min.time.before.relogin", "sasl.kerberos.ticket.renew.jitter",
                    "sasl.kerberos.ticket.renew.window.factor")
# Java-only TLS knobs: accepted at the values OpenSSL's defaults already honour
# (TLS 1.2 or 1.3 negotiated, standard key and trust managers); anything else is refused.
_JAVA_TLS_DEFAULTS = {
    "ssl.protocol": {"TLS", "TLSV1.2", "TLSV1.3"},
    "ssl.enabled.protocols": {"TLSV1.2", "TLSV1.3", "TLSV1.2,TLSV1.3", "TLSV1.3,TLSV1.2"},
    "ssl.keymanager.algorithm": {"SUNX509", "PKIX"},
    "ssl.trustmanager.algorithm": {"PKIX", "SUNX509"},
}
_JAAS_RE = re.compile(r'^\s*(\S+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$',
                      re.DOTALL)
_JAAS_OPTION_RE = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')

# Every dotted name (after ``kafka.``) this module owns.
OWNED = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "sasl.kerberos.service.name", "sasl.kerberos.name", "sasl.kerberos.kinit.cmd",
    *_KERBEROS_TUNING,
    "sasl.plain.username", "sasl.plain.password",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.endpoint.identification.algorithm",
    "ssl.cafile", "ssl.certfile", "ssl.keyfile", "ssl.password", "ssl.check.hostname",
    *_JAVA_TLS_DEFAULTS,
})


@dataclass(frozen=True)
class Security:
    """How every client of one query connects: protocol, SASL login, TLS material."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    truststore: Store | None = None
    keystore: Store | None = None
    key_password: str | None = field(default=None, repr=False)
    # kafka-python spelling: a PEM certificate and key in two files, passed as they are.
    certfile: str | None = None
    keyfile: str | None = None
    check_hostname: bool = True
    kerberos: KerberosSettings | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def pem(self) -> PemFiles:
        """PEM files for this process (stores converted once; see ``_keystores``)."""
        files = pem_files(self.truststore, self.keystore, self.key_password)
        if self.certfile is not None:
            return PemFiles(files.cafile, self.certfile, self.keyfile, self.key_password)
        return files

    def kafka_python(self) -> dict[str, Any]:
        """kafka-python keyword arguments (driver; executors with kafka-python)."""
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.kerberos is not None:
            out.update(kafka_python_settings(self.kerberos))
        elif self.sasl:
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        if self.tls:
            pem = self.pem()
            out["ssl_check_hostname"] = self.check_hostname
            out.update({name: value for name, value in (
                ("ssl_cafile", pem.cafile), ("ssl_certfile", pem.certfile),
                ("ssl_keyfile", pem.keyfile), ("ssl_password", pem.key_password)) if value is not None})
        return out

    def librdkafka(self) -> dict[str, Any]:
        """librdkafka settings (executors: the compiled reader and confluent-kafka).

        Never asked for with GSSAPI: option parsing sends those queries to kafka-python
        (``_kerberos.librdkafka_gssapi`` says why).
        """
        if self.kerberos is not None:
            raise AssertionError("GSSAPI runs on kafka-python; no librdkafka settings")
        out: dict[str, Any] = {"security.protocol": self.protocol}
        if self.sasl:
            out.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                        "sasl.password": self.password})
        if self.tls:
            pem = self.pem()
            out["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else "none"
            out.update({name: value for name, value in (
                ("ssl.ca.location", pem.cafile), ("ssl.certificate.location", pem.certfile),
                ("ssl.key.location", pem.keyfile), ("ssl.key.password", pem.key_password)) if value is not None})
        return out


def _jaas_fields(raw: str, mechanism: str, *, defaulted: bool = False) -> dict[str, str]:
    """The option fields of a JAAS line whose login module fits ``mechanism`` (values
    unescaped); errors never quote the line. ``defaulted``: the mechanism was not set
    (Java's default, GSSAPI), which the error then says."""
    key = "kafka.sasl.jaas.config"
    match = _JAAS_RE.match(raw)
    if match is None:
        form = ('useKeyTab=true keyTab="..." principal="..."' if mechanism == "GSSAPI"
                else 'username="..." password="..."')
        raise ConfigError(f"option {key!r} is not a JAAS line of the form '<LoginModule class> "
                          f"required {form};'", option=key)
    module = match.group(1).rsplit(".", 1)[-1]
    expected = _MECHANISMS[mechanism]
    if module != expected:
        where = ("com.sun.security.auth.module." if expected == "Krb5LoginModule"
                 else "org.apache.kafka.common.security.*.")
        unset = " (unset: Java's default; set kafka.sasl.mechanism)" if defaulted else ""
        raise ConfigError(f"option {key!r} names {module}, but kafka.sasl.mechanism={mechanism}"
                          f"{unset} needs {where}{expected}", option=key)
    unescape = lambda s: re.sub(r"\\(.)", r"\1", s)  # noqa: E731
    return {m.group(1): unescape(m.group(2)) if m.group(2) is not None else m.group(3)
            for m in _JAAS_OPTION_RE.finditer(match.group(3))}


def _jaas(raw: str, mechanism: str) -> tuple[str, str]:
    """(username, password) from a Plain/Scram JAAS line; errors never quote the line."""
    key = "kafka.sasl.jaas.config"
    fields = _jaas_fields(raw, mechanism)
    if not fields.get("username") or "password" not in fields:
        raise ConfigError(f'option {key!r} must give username="..." and password="..."',
                          option=key)
    return fields["username"], fields["password"]


def _store_type(key: str, raw: str | None, default: StoreType) -> StoreType:
    if raw is None or not raw.strip():
        return default
    try:
        return StoreType(raw.strip().upper())
    except ValueError:
        raise ConfigError(f"option {key!r} must be JKS, PKCS12 or PEM, got {raw!r}",
                          option=key) from None


def _truststore(opts: Mapping[str, str]) -> Store | None:
    p = "ssl.truststore."
    location, inline = opts.get(p + "location"), opts.get(p + "certificates")
    if opts.get("ssl.cafile") is not None:
        if location is not None or inline is not None:
            raise ConfigError("set either 'kafka.ssl.truststore.location' (Java's name) or "
                              "'kafka.ssl.cafile' (kafka-python's), not both",
                              option="kafka.ssl.cafile")
        return Store("kafka.ssl.cafile", "kafka.ssl.cafile", StoreType.PEM,
                     location=opts["ssl.cafile"])
    if location is None and inline is None:
        for other in ("password", "type"):
            if opts.get(p + other) is not None:
                raise ConfigError(f"option 'kafka.{p}{other}' is set without "
                                  f"'kafka.{p}location'", option=f"kafka.{p}location")
        return None
    kind = _store_type(f"kafka.{p}type", opts.get(p + "type"),
                       StoreType.PEM if inline is not None else StoreType.JKS)
    option = f"kafka.{p}certificates" if inline is not None else f"kafka.{p}location"
    if inline is not None and (location is not None or kind is not StoreType.PEM):
        raise ConfigError(f"option 'kafka.{p}certificates' needs type PEM and no location",
                          option=option)
    if kind is not StoreType.PEM and not opts.get(p + "password"):
        raise ConfigError(f"option 'kafka.{p}password' is required for a {kind.value} "
                          f"truststore", option=f"kafka.{p}password")
    return Store(option, f"kafka.{p}password", kind, location=location, inline=inline,
                 password=opts.get(p + "password"))


def _keystore(opts: Mapping[str, str]) -> Store | None:
    p = "ssl.keystore."
    location = opts.get(p + "location")
    chain, key = opts.get(p + "certificate.chain"), opts.get(p + "key")
    if location is None and chain is None and key is None:
        for other in ("password", "type"):
            if opts.get(p + other) is not None:
                raise ConfigError(f"option 'kafka.{p}{other}' is set without "
                                  f"'kafka.{p}location'", option=f"kafka.{p}location")
        return None
    if opts.get("ssl.certfile") is not None:
        raise ConfigError("set either 'kafka.ssl.keystore.*' (Java's names) or "
                          "'kafka.ssl.certfile'/'kafka.ssl.keyfile' (kafka-python's), not both",
                          option="kafka.ssl.certfile")
    if location is None:
        if chain is None or key is None:
            raise ConfigError("inline PEM keystores need both 'kafka.ssl.keystore.certificate."
                              "chain' and 'kafka.ssl.keystore.key'",
                              option="kafka.ssl.keystore.key")
        return Store("kafka.ssl.keystore.key", "kafka.ssl.key.password", StoreType.PEM,
                     inline=chain + "\n" + key)
    kind = _store_type(f"kafka.{p}type", opts.get(p + "type"), StoreType.JKS)
    if kind is not StoreType.PEM and not opts.get(p + "password"):
        raise ConfigError(f"option 'kafka.{p}password' is required for a {kind.value} "
                          f"keystore", option=f"kafka.{p}password")
    return Store(f"kafka.{p}location", f"kafka.{p}password", kind, location=location,
                 password=opts.get(p + "password"))


def parse_security(passthrough: MutableMapping[str, str]) -> Security:
    """Take the security options out of ``passthrough`` (``kafka.``-prefixed, a private
    copy) and return them as one validated :class:`Security`.

    Called at query start on the driver: stores are opened here once, so a wrong store
    password or an unreadable file fails ``load()`` naming the option.
    """
    opts = {key[len("kafka."):]: passthrough.pop(key) for key in list(passthrough)
            if key[len("kafka."):] in OWNED}
    for name, allowed in _JAVA_TLS_DEFAULTS.items():
        value = opts.get(name)
        if value is not None and value.replace(" ", "").upper() not in allowed:
            raise ConfigError(
                f"option 'kafka.{name}'={value!r} cannot be honoured: barrier-kafka's clients "
                f"use OpenSSL, which negotiates TLS 1.2 or 1.3 with its standard key and "
                f"trust managers; read with format('kafka') if the cluster needs this",
                option=f"kafka.{name}")
    protocol = opts.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"option 'kafka.security.protocol' must be one of "
                          f"{', '.join(_PROTOCOLS)}, got {protocol!r}",
                          option="kafka.security.protocol")
    sasl = protocol.startswith("SASL_")
    tls = protocol.endswith("SSL")
    username = password = mechanism = kerberos = None
    if sasl:
        # Java's default mechanism is GSSAPI; say so rather than guess another one.
        mechanism = opts.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism in _NOT_YET:
            raise ConfigError(f"option 'kafka.sasl.mechanism' is {mechanism}: "
                              f"{_NOT_YET[mechanism]}; use GSSAPI, SCRAM-SHA-512, "
                              f"SCRAM-SHA-256 or PLAIN", option="kafka.sasl.mechanism")
        if mechanism not in _MECHANISMS:
            raise ConfigError(f"option 'kafka.sasl.mechanism' must be PLAIN, SCRAM-SHA-256, "
                              f"SCRAM-SHA-512 or GSSAPI, got {mechanism!r}",
                              option="kafka.sasl.mechanism")
        if mechanism == "GSSAPI":
            kerberos = _kerberos(opts, explicit="sasl.mechanism" in opts)
        elif "sasl.jaas.config" in opts:
            if "sasl.plain.username" in opts or "sasl.plain.password" in opts:
                raise ConfigError("set either 'kafka.sasl.jaas.config' (Java's name) or "
                                  "'kafka.sasl.plain.username'/'password' (kafka-python's), "
                                  "not both", option="kafka.sasl.jaas.config")
            username, password = _jaas(opts["sasl.jaas.config"], mechanism)
        else:
            username, password = opts.get("sasl.plain.username"), opts.get("sasl.plain.password")
            if not username or password is None:
                raise ConfigError(f"kafka.security.protocol={protocol} needs credentials: set "
                                  f"'kafka.sasl.jaas.config' (as for Spark's Kafka source)",
                                  option="kafka.sasl.jaas.config")
    if mechanism != "GSSAPI":
        unused: list[str] = [k for k in ("sasl.mechanism", "sasl.jaas.config", "sasl.plain.username",
                                         "sasl.plain.password") if k in opts and not sasl]
        unused += [k for k in ("sasl.kerberos.service.name", "sasl.kerberos.name",
                               "sasl.kerberos.kinit.cmd", *_KERBEROS_TUNING) if k in opts]
        if unused and not sasl:
            raise ConfigError(f"option 'kafka.{unused[0]}' is set, but kafka.security.protocol="
                              f"{protocol} does not use SASL, so it would be ignored; set "
                              f"kafka.security.protocol to SASL_SSL or SASL_PLAINTEXT",
                              option=f"kafka.{unused[0]}")
        if unused:
            raise ConfigError(f"option 'kafka.{unused[0]}' is a Kerberos setting, but "
                              f"kafka.sasl.mechanism is {mechanism}, so it would be ignored; "
                              f"set kafka.sasl.mechanism=GSSAPI to log in with Kerberos",
                              option=f"kafka.{unused[0]}")
    tls_set = [k for k in opts if k.startswith("ssl.")]
    if tls_set and not tls:
        raise ConfigError(f"option 'kafka.{sorted(tls_set)[0]}' is set, but kafka.security."
                          f"protocol={protocol} does not use TLS, so it would be ignored; set "
                          f"kafka.security.protocol to SSL or SASL_SSL",
                          option=f"kafka.{sorted(tls_set)[0]}")
    truststore, keystore = _truststore(opts), _keystore(opts)
    certfile, keyfile = opts.get("ssl.certfile"), opts.get("ssl.keyfile")
    if keyfile is not None and certfile is None:
        raise ConfigError("option 'kafka.ssl.keyfile' needs 'kafka.ssl.certfile'",
                          option="kafka.ssl.certfile")
    key_password = opts.get("ssl.key.password", opts.get("ssl.password"))
    if "ssl.key.password" in opts and "ssl.password" in opts:
        raise ConfigError("set either 'kafka.ssl.key.password' or 'kafka.ssl.password', not "
                          "both", option="kafka.ssl.password")
    check = _hostname_check(opts)
    security = Security(protocol=protocol, mechanism=mechanism, username=username,
                        password=password, truststore=truststore, keystore=keystore,
                        key_password=key_password, certfile=certfile, keyfile=keyfile,
                        check_hostname=check, kerberos=kerberos)
    if tls:
        security.pem()  # open the stores now: wrong passwords fail at query start
    return security


def _hostname_check(opts: Mapping[str, str]) -> bool:
    java, python = opts.get("ssl.endpoint.identification.algorithm"), opts.get("ssl.check.hostname")
    if java is not None and python is not None:
        raise ConfigError("set either 'kafka.ssl.endpoint.identification.algorithm' or "
                          "'kafka.ssl.check.hostname', not both",
                          option="kafka.ssl.check.hostname")
    if python is not None:
        return parse_bool("kafka.ssl.check.hostname", python)
    if java is None or java.strip().lower() == "https":
        return True
    if not java.strip():
        return False
    raise ConfigError("option 'kafka.ssl.endpoint.identification.algorithm' must be https "
                      f"(verify the broker's host name, the default) or empty (don't), got "
                      f"{java!r}", option="kafka.ssl.endpoint.identification.algorithm")


def _kerberos(opts: Mapping[str, str], *, explicit: bool) -> KerberosSettings:
    """GSSAPI: the Krb5LoginModule line and the service name, checked at query start
    (the keytab must be readable here; executors check again where they log in)."""
    key = "kafka.sasl.jaas.config"
    for name, fix in (("sasl.kerberos.name", "set 'kafka.sasl.kerberos.service.name'"),
                      ("sasl.kerberos.kinit.cmd", "barrier-kafka logs in without kinit (from "
                       "the keytab, or the ticket cache with useTicketCache=true)"),
                      ("sasl.plain.username", "give the principal in 'kafka.sasl.jaas.config'"),
                      ("sasl.plain.password", "GSSAPI logs in with a keytab or ticket cache")):
        if name in opts:
            raise ConfigError(f"option 'kafka.{name}' does not apply to GSSAPI: {fix}",
                              option=f"kafka.{name}")
    if "sasl.jaas.config" not in opts:
        unset = "" if explicit else " (kafka.sasl.mechanism is unset: Java's default is GSSAPI)"
        raise ConfigError(f"GSSAPI{unset} needs 'kafka.sasl.jaas.config' with "
                          f"com.sun.security.auth.module.Krb5LoginModule required "
                          f'useKeyTab=true keyTab="..." principal="...";', option=key)
    kerberos = parse_krb5_jaas(_jaas_fields(opts["sasl.jaas.config"], "GSSAPI",
                                            defaulted=not explicit),
                               opts.get("sasl.kerberos.service.name"))
    check_keytab(kerberos)
    return kerberos
