"""How to reach HBase's gateways: the ``hbase.*`` options, declared once, parsed once.

Every caller that connects (the sink, the reader, the status and lineage readers, the CLI)
parses these same specs into one :class:`HBaseConnectionOptions`; the sink's and the
reader's own options (``..._options``) extend them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ...._exceptions import ConfigError
from ..._options import (
    OptionSpec,
    OptionValues,
    enum_choices,
    enum_parser,
    parse_bool,
    parse_non_negative_int,
    parse_nonempty,
    parse_optional_port,
    parse_options,
    parse_port,
    parse_positive_int,
    parse_stripped,
)
from ._gateways import Gateway, parse_gateways
from ._sasl import KerberosSettings, parse_qops
from ._tls import TlsSettings

__all__ = [
    "CONNECTION_OPTION_SPECS",
    "GATEWAY_OPTION_SPECS",
    "KERBEROS_OPTION_SPECS",
    "HBaseConnectionOptions",
    "ThriftAuthentication",
    "ThriftProtocol",
    "ThriftTransport",
    "connection_from_values",
    "parse_connection_options",
]


class ThriftTransport(str, enum.Enum):
    BUFFERED = "buffered"
    FRAMED = "framed"


class ThriftProtocol(str, enum.Enum):
    BINARY = "binary"
    COMPACT = "compact"


class ThriftAuthentication(str, enum.Enum):
    NONE = "none"
    KERBEROS = "kerberos"


KERBEROS_OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "hbase.thrift.authentication", enum_parser(ThriftAuthentication), ThriftAuthentication.NONE,
        "`kerberos`: SASL/GSSAPI to every Thrift1 and Thrift2 gateway (gateways with "
        "`hbase.thrift.security.qop` set); SASL frames the messages, so `hbase.thrift.transport` "
        "must stay `buffered`",
        choices=enum_choices(ThriftAuthentication),
    ),
    OptionSpec("hbase.thrift.kerberos.client.principal", parse_stripped, "",
               "the job's own principal, e.g. `etl@EXAMPLE.COM` (not the gateway's: that is "
               "HBase's `hbase.thrift.kerberos.principal`); empty: the ticket cache's principal"),
    OptionSpec("hbase.thrift.kerberos.client.keytab", parse_stripped, "",
               "keytab of the client principal, readable at this path on the driver and every "
               "executor (`spark-submit --files` + the file name); empty: use the ticket cache "
               "(`kinit`), which is not renewed"),
    OptionSpec("hbase.thrift.kerberos.service", parse_nonempty, "hbase",
               "primary of the gateways' service principal; the instance is the host name each "
               "gateway is reached by (`hbase/<host>@REALM`)"),
    OptionSpec("hbase.thrift.security.qop", parse_stripped, "auth-conf,auth-int,auth",
               "SASL layers the client accepts, strongest used if the gateway offers it: `auth`, "
               "`auth-int` (signed), `auth-conf` (encrypted); HBase's names `authentication`, "
               "`integrity`, `privacy` too"),
)
"""Kerberos options (the table of ``docs/hbase-kerberos.md``; not in docs/options.md)."""

GATEWAY_OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("hbase.thrift.host", parse_nonempty, "localhost",
               "HBase Thrift1 gateway host, or a list `h1:9090,h2:9090,h3` of gateways of one HBase "
               "(an entry without a port uses `hbase.thrift.port`): tasks and read partitions spread "
               "over them by partition and fail over to the next one"),
    OptionSpec("hbase.thrift.port", parse_port, 9090, "HBase Thrift1 gateway port", type_name="int"),
    OptionSpec(
        "hbase.thrift.transport", enum_parser(ThriftTransport), ThriftTransport.BUFFERED,
        "Thrift transport of the server", choices=enum_choices(ThriftTransport),
    ),
    OptionSpec(
        "hbase.thrift.protocol", enum_parser(ThriftProtocol), ThriftProtocol.BINARY,
        "Thrift protocol of the server", choices=enum_choices(ThriftProtocol),
    ),
    OptionSpec(
        "hbase.thrift2.port", parse_optional_port, None,
        "HBase Thrift2 gateway port: alone, it enables Thrift2 on the `hbase.thrift.host` hosts; "
        "with `hbase.thrift2.host`, the port of its entries that name none. Thrift2 lets the sink delete "
        "exact versions and check and set `KEEP_DELETED_CELLS` (Thrift1 cannot)",
        type_name="int",
    ),
    OptionSpec(
        "hbase.thrift2.host", parse_stripped, "",
        "Thrift2 gateway list like `hbase.thrift.host`; set alone (every entry with its port, "
        "`h1:9095,h2:9095`), it enables Thrift2; an entry without a port uses `hbase.thrift2.port`. "
        "Unset: the Thrift1 hosts at `hbase.thrift2.port`, or no Thrift2 when that is unset too. The sink's "
        "exactly-once mode needs Thrift2 and refuses to start without it",
    ),
    OptionSpec(
        "hbase.thrift.failover.rounds", parse_positive_int, 3,
        "passes over all gateways before a call fails with an error naming them "
        "(the first pass starts with a fresh socket to the current gateway)", type_name="int",
    ),
    OptionSpec(
        "hbase.thrift.failover.backoff", parse_non_negative_int, 1000,
        "milliseconds to wait between two passes over the gateways", type_name="int",
    ),
    OptionSpec(
        "hbase.thrift.timeout", parse_positive_int, 60_000,
        "socket timeout in milliseconds for every Thrift call", type_name="int",
    ),
    OptionSpec(
        "hbase.thrift.tls", parse_bool, False,
        "connect to the gateways (Thrift1 and Thrift2) over TLS; HBase offers TLS only in its "
        "HTTP mode (`hbase.regionserver.thrift.http=true`, `hbase.thrift.ssl.enabled=true`), so "
        "this speaks Thrift over HTTPS and `hbase.thrift.transport` does not apply",
        type_name="bool",
    ),
    OptionSpec("hbase.thrift.tls.ca", parse_stripped, "",
               "PEM file of the CA(s) that signed the gateways' certificates; default: the system trust store"),
    OptionSpec("hbase.thrift.tls.cert", parse_stripped, "",
               "optional PEM client certificate (HBase 2.6's gateways do not ask for one; a TLS proxy may)"),
    OptionSpec("hbase.thrift.tls.key", parse_stripped, "",
               "PEM private key of `hbase.thrift.tls.cert` (unencrypted; protect the file), if not in that file"),
    OptionSpec("hbase.thrift.tls.verify-hostname", parse_bool, True,
               "check that the gateway's certificate names the host connected to", type_name="bool"),
)
"""The gateway options (list, failover, TLS): the table of ``docs/hbase-gateways.md``."""


CONNECTION_OPTION_SPECS: tuple[OptionSpec, ...] = GATEWAY_OPTION_SPECS + KERBEROS_OPTION_SPECS
"""Every ``hbase.*`` option: how to reach the gateways. The sink, the reader, ``read_committed``,
``lineage``, ``sink_status`` and the CLI (``--hbase-option``) all parse these same specs."""


@dataclass(frozen=True)
class HBaseConnectionOptions:
    """How to reach the gateways (:data:`CONNECTION_OPTION_SPECS`), parsed. Picklable.

    One type for every caller, so TLS, Kerberos, the gateway list and failover mean the
    same in the sink, the reader, the status and lineage readers and the CLI.
    """

    host: str  # the first gateway (kept for single-gateway callers)
    port: int
    thrift2_port: int | None
    gateways: tuple[Gateway, ...]
    thrift2_gateways: tuple[Gateway, ...]
    failover_rounds: int
    failover_backoff_ms: int
    tls: TlsSettings | None
    kerberos: KerberosSettings | None
    transport: ThriftTransport
    protocol: ThriftProtocol
    timeout_ms: int


def connection_from_values(v: OptionValues) -> HBaseConnectionOptions:
    """The :class:`HBaseConnectionOptions` from parsed values."""
    gateways = parse_gateways(v.text("hbase.thrift.host"), v.integer("hbase.thrift.port"))
    thrift2_port = v.optional_integer("hbase.thrift2.port")
    thrift2_host = v.text("hbase.thrift2.host")
    if thrift2_host:
        thrift2 = parse_gateways(thrift2_host, thrift2_port, option="hbase.thrift2.host")
    elif thrift2_port is not None:
        thrift2 = tuple(dict.fromkeys(Gateway(g.host, thrift2_port) for g in gateways))
    else:
        thrift2 = ()
    return HBaseConnectionOptions(
        host=gateways[0].host, port=gateways[0].port, thrift2_port=thrift2[0].port if thrift2 else None,
        gateways=gateways, thrift2_gateways=thrift2,
        failover_rounds=v.integer("hbase.thrift.failover.rounds"),
        failover_backoff_ms=v.integer("hbase.thrift.failover.backoff"), tls=_tls(v), kerberos=_kerberos(v),
        transport=v.choice("hbase.thrift.transport", ThriftTransport),
        protocol=v.choice("hbase.thrift.protocol", ThriftProtocol),
        timeout_ms=v.integer("hbase.thrift.timeout"))


def _tls(v: OptionValues) -> TlsSettings | None:
    ca, cert, key = (v.text(k) for k in ("hbase.thrift.tls.ca", "hbase.thrift.tls.cert", "hbase.thrift.tls.key"))
    set_ = [k for k, value in (("hbase.thrift.tls.ca", ca), ("hbase.thrift.tls.cert", cert),
                               ("hbase.thrift.tls.key", key)) if value]
    if not v.flag("hbase.thrift.tls"):
        if set_:
            raise ConfigError(f"option {set_[0]!r} needs 'hbase.thrift.tls' = true", option=set_[0])
        return None
    if key and not cert:
        raise ConfigError("option 'hbase.thrift.tls.key' needs 'hbase.thrift.tls.cert'", option="hbase.thrift.tls.key")
    return TlsSettings(ca_file=ca or None, cert_file=cert or None, key_file=key or None,
                       verify_hostname=v.flag("hbase.thrift.tls.verify-hostname"))


def _kerberos(v: OptionValues) -> KerberosSettings | None:
    """Kerberos settings, or None; settings that would be ignored are errors, not silence."""
    principal = v.text("hbase.thrift.kerberos.client.principal")
    keytab = v.text("hbase.thrift.kerberos.client.keytab")
    if v.choice("hbase.thrift.authentication", ThriftAuthentication) is not ThriftAuthentication.KERBEROS:
        set_ = [k for k, value in (("hbase.thrift.kerberos.client.principal", principal),
                                   ("hbase.thrift.kerberos.client.keytab", keytab)) if value]
        if set_:
            raise ConfigError(f"option {set_[0]!r} needs 'hbase.thrift.authentication' = kerberos", option=set_[0])
        return None
    if v.flag("hbase.thrift.tls"):
        raise ConfigError("'hbase.thrift.authentication' = kerberos cannot be combined with 'hbase.thrift.tls': "
                          "HBase serves TLS only in HTTP mode, where Kerberos is SPNEGO, which this sink does not "
                          "speak; use the gateways' SASL qop auth-conf for encryption instead",
                          option="hbase.thrift.authentication")
    if v.choice("hbase.thrift.transport", ThriftTransport) is ThriftTransport.FRAMED:
        raise ConfigError("'hbase.thrift.transport' = framed does not apply with 'hbase.thrift.authentication' = "
                          "kerberos: the SASL layer frames every message itself (HBase's gateways wrap the "
                          "transport in SASL); leave hbase.thrift.transport unset", option="hbase.thrift.transport")
    if keytab and not principal:
        raise ConfigError("option 'hbase.thrift.kerberos.client.keytab' needs "
                          "'hbase.thrift.kerberos.client.principal' (the principal to log in as from it)",
                          option="hbase.thrift.kerberos.client.principal")
    return KerberosSettings(principal=principal or None, keytab=keytab or None,
                            service=v.text("hbase.thrift.kerberos.service"),
                            qops=parse_qops(v.text("hbase.thrift.security.qop")))


def parse_connection_options(raw: Mapping[str, str], *,
                             source_name: str = "HBase connection") -> HBaseConnectionOptions:
    """Validate ``hbase.*`` options for a connection made outside a query (reader, CLI).

    The same specs and checks as the sink's: an unknown key is an error listing the valid ones.
    """
    v, _ = parse_options(raw, CONNECTION_OPTION_SPECS, source_name=source_name)
    return connection_from_values(v)
