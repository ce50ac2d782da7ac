"""Options of the ``barrier-hbase`` sink and reader: declared once, parsed once.

The specs below are the options contract (the docs/options.md table is generated from them
with :func:`sparkbarrier.connectors._options.options_table`). :func:`parse_sink_options`
turns Spark's case-insensitive string map into a frozen :class:`HBaseSinkOptions`;
an unknown key is an error that lists the valid keys.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._exceptions import ConfigError
from ...barrier import DeliveryGuarantee
from .._options import (
    OptionSpec,
    OptionValues,
    enum_choices,
    enum_parser,
    parse_bool,
    parse_int,
    parse_non_negative_int,
    parse_nonempty,
    parse_optional_port,
    parse_options,
    parse_port,
    parse_positive_int,
    parse_positive_size,
    parse_stripped,
    parse_timestamp_ms,
)
from ..checkpointed._options import DELIVERY_GUARANTEE, RENAMED_SINK_OPTIONS
from ._gateways import Gateway, parse_gateways
from ._sasl import KerberosSettings, parse_qops
from ._tls import TlsSettings

__all__ = [
    "CONNECTION_OPTION_SPECS",
    "DEFAULT_COMMIT_TABLE",
    "KERBEROS_OPTION_SPECS",
    "READ_OPTION_SPECS",
    "SINK_OPTION_SPECS",
    "SPARK_SINK_KEYS",
    "DeliveryGuarantee",
    "HBaseConnectionOptions",
    "HBaseReadOptions",
    "HBaseSinkOptions",
    "ThriftAuthentication",
    "ThriftProtocol",
    "ThriftTransport",
    "parse_columns",
    "parse_connection_options",
    "parse_read_options",
    "parse_sink_options",
]

DEFAULT_COMMIT_TABLE = "sparkbarrier_commits"
# Keys Spark itself puts into a sink's option map.
# The checkpointed-sink adapter's own options (``checkpoint.*``) are the adapter's to check.
SPARK_SINK_KEYS: tuple[str, ...] = ("path", "checkpointLocation", "queryName", "checkpoint.state.location",
               "checkpoint.state.allowMismatch")


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

_CONNECTION_SPECS: tuple[OptionSpec, ...] = (
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
        "optional HBase Thrift2 gateway port: alone, it enables Thrift2 on the `hbase.thrift.host` hosts; "
        "with `hbase.thrift2.host`, the port of its entries that name none. Thrift2 lets the sink check and "
        "set `KEEP_DELETED_CELLS` (Thrift1 cannot), which makes committed and as-of reads exact",
        type_name="int",
    ),
    OptionSpec(
        "hbase.thrift2.host", parse_stripped, "",
        "optional Thrift2 gateway list like `hbase.thrift.host`; set alone (every entry with its port, "
        "`h1:9095,h2:9095`), it enables Thrift2; an entry without a port uses `hbase.thrift2.port`. "
        "Unset: the Thrift1 hosts at `hbase.thrift2.port`, or no Thrift2 when that is unset too",
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
    OptionSpec("table", parse_nonempty, None, "HBase table to write / read", required=True),
    OptionSpec(
        "column.family", parse_nonempty, "d",
        "family of every data column not listed in `columns` (sink only)",
    ),
    OptionSpec(
        "columns", parse_stripped, "",
        "optional mapping `col=family:qualifier,...`; unlisted data columns map to "
        "`column.family:<col>` (sink only)",
    ),
    OptionSpec("sink.id", parse_stripped, "",
               "namespace of this sink in the commit table; default `query-<query id>`, which "
               "changes with a new checkpoint dir: set it to resume with `starting_offsets_from_sink`"),
    OptionSpec(
        "commit.table", parse_nonempty, DEFAULT_COMMIT_TABLE,
        "HBase table holding one commit record per `sink.id` (created if missing)",
    ),
)

def parse_history_retain(key: str, raw: str) -> int:
    """0 (keep every commit) or at least 2: a replay may need the commit before the last one."""
    value = parse_int(key, raw, minimum=0)
    if value == 1:
        raise ConfigError(f"option {key!r} is 1; use 0 (keep every commit) or at least 2: the sink recognises a "
                          "replay of the batch before the last commit from its history", option=key)
    return value


GATEWAY_OPTION_SPECS: tuple[OptionSpec, ...] = tuple(s for s in _CONNECTION_SPECS if s.key.startswith("hbase."))
"""The gateway options (list, failover, TLS): the table of ``docs/hbase-gateways.md``."""

CONNECTION_OPTION_SPECS: tuple[OptionSpec, ...] = GATEWAY_OPTION_SPECS + KERBEROS_OPTION_SPECS
"""Every ``hbase.*`` option: how to reach the gateways. The sink, the reader, ``read_committed``,
``lineage``, ``sink_status`` and the CLI (``--hbase-option``) all parse these same specs."""

SINK_OPTION_SPECS: tuple[OptionSpec, ...] = _CONNECTION_SPECS + KERBEROS_OPTION_SPECS + (
    OptionSpec("rowkey", parse_nonempty, None, "name of the column holding the row key", required=True),
    OptionSpec(
        "op.column", parse_stripped, "",
        "optional string column: `upsert` (or null) writes the row, `delete` removes "
        "the row's cells in the mapped families",
    ),
    OptionSpec(
        "sink.ignore-null-value", parse_bool, True,
        "true: a null leaves the cell untouched; false: a null deletes the cell",
        type_name="bool",
    ),
    OptionSpec(
        "create.table", parse_bool, False,
        "create the table at query start if missing (else a missing table is an error)",
        type_name="bool",
    ),
    OptionSpec(
        "sink.buffer-flush.max-rows", parse_positive_int, 1000,
        "most rows in one write call to HBase (a task nets its rows per key and writes each key once)",
        type_name="int",
    ),
    OptionSpec(
        "sink.buffer-flush.max-size", parse_positive_size, 2 * 1024 * 1024,
        "most bytes of values in one write call to HBase (e.g. `2mb`)", type_name="size",
    ),
    OptionSpec(
        "commit.history.retain", parse_history_retain, 0,
        "how many history rows (commits before the newest) the sink keeps for as-of reads, lineage and "
        "a batch series' older batches; 0 keeps every one. Older rows are deleted as new batches are "
        "placed; 0 or at least 2 (a replay is recognised from the commit before the newest)",
        type_name="int",
    ),
    OptionSpec(
        "sink.buffer.max-memory", parse_positive_size, 256 * 1024 * 1024,
        "netted rows a write task holds in memory before it spills them, sorted, to the executor's "
        "local temporary directory (e.g. `64mb`): bounds a task's memory whatever its number of keys",
        type_name="size",
    ),
    DELIVERY_GUARANTEE,  # the adapter's spec: one declaration, one name
)

# The sink's column mapping. The reader takes the mapping from the commit record (the one
# the sink wrote with), so these would change nothing there: it refuses them.
_MAPPING_KEYS = ("column.family", "columns")

READ_OPTION_SPECS: tuple[OptionSpec, ...] = tuple(
    s for s in _CONNECTION_SPECS if s.key not in _MAPPING_KEYS) + KERBEROS_OPTION_SPECS + (
    OptionSpec("as.of.batch", parse_non_negative_int, None,
               "read the table as the sink had committed it after this Spark batch id", type_name="long"),
    OptionSpec("as.of.timestamp", parse_timestamp_ms, None,
               "read the table as of the last commit at or before this time (epoch ms or ISO-8601)",
               type_name="timestamp"),
    OptionSpec("filter.pushdown", parse_bool, False,
               "push filters on a string/binary row key into the region scans; needs "
               "`spark.sql.python.filterPushdown.enabled=true`", type_name="bool"),
)


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


@dataclass(frozen=True)
class _SharedOptions(HBaseConnectionOptions):
    """The fields the sink and the reader both parse from the connection specs."""

    table: str
    sink_id: str | None
    commit_table: str


@dataclass(frozen=True)
class HBaseSinkOptions(_SharedOptions):
    """Parsed sink options. Picklable; built on the driver and shipped to executors."""

    rowkey: str
    column_family: str
    columns: tuple[tuple[str, str, str], ...]
    op_column: str | None
    ignore_null_value: bool
    create_table: bool
    max_rows: int
    max_size: int
    guarantee: DeliveryGuarantee
    max_memory: int = 256 * 1024 * 1024
    history_retain: int = 0

    @property
    def exactly_once(self) -> bool:
        return self.guarantee is DeliveryGuarantee.EXACTLY_ONCE

    def explicit_mapping(self) -> dict[str, tuple[str, str]]:
        return {col: (fam, qual) for col, fam, qual in self.columns}


def parse_columns(raw: str) -> tuple[tuple[str, str, str], ...]:
    """``"a=f:q, b=g:b"`` → ``(("a", "f", "q"), ("b", "g", "b"))``."""
    out: list[tuple[str, str, str]] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        col, eq, target = item.partition("=")
        fam, colon, qual = target.partition(":")
        if not eq or not colon or not col.strip() or not fam.strip() or not qual.strip():
            raise ConfigError(
                f"option 'columns' entries look like 'col=family:qualifier', got {item!r}",
                option="columns",
            )
        out.append((col.strip(), fam.strip(), qual.strip()))
    seen = [c for c, _, _ in out]
    if len(seen) != len(set(seen)):
        raise ConfigError("option 'columns' maps a column twice", option="columns")
    return tuple(out)


def _fields(options: HBaseConnectionOptions) -> dict[str, Any]:
    """``options``' fields by name, to build a subclass of its type from it.

    The sink's and the reader's options extend :class:`HBaseConnectionOptions`; their
    fields are declared once, in the dataclasses, and copied from an instance that was
    built (and type-checked) with explicit keywords, rather than declared again in a
    TypedDict for ``**`` to be typed.
    """
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def _shared_fields(v: OptionValues) -> dict[str, Any]:
    """The :class:`_SharedOptions` fields from parsed values (see :func:`_fields`)."""
    return _fields(_SharedOptions(**_fields(_connection(v)), table=v.text("table"),
                                  sink_id=v.text("sink.id") or None, commit_table=v.text("commit.table")))


def _connection(v: OptionValues) -> HBaseConnectionOptions:
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
    return _connection(v)


def parse_sink_options(raw: Mapping[str, str]) -> HBaseSinkOptions:
    """Validate Spark's option map for the sink (driver, at query start)."""
    v, _ = parse_options(raw, SINK_OPTION_SPECS, source_name="barrier-hbase sink", ignored=SPARK_SINK_KEYS,
                         renamed=RENAMED_SINK_OPTIONS)
    return HBaseSinkOptions(
        **_shared_fields(v),
        rowkey=v.text("rowkey"),
        column_family=v.text("column.family"),
        columns=parse_columns(v.text("columns")),
        op_column=v.text("op.column") or None,
        ignore_null_value=v.flag("sink.ignore-null-value"),
        create_table=v.flag("create.table"),
        max_rows=v.integer("sink.buffer-flush.max-rows"),
        max_size=v.integer("sink.buffer-flush.max-size"),
        guarantee=v.choice("delivery.guarantee", DeliveryGuarantee),
        max_memory=v.integer("sink.buffer.max-memory"),
        history_retain=v.integer("commit.history.retain"),
    )


@dataclass(frozen=True)
class HBaseReadOptions(_SharedOptions):
    """Parsed batch-reader options. Picklable.

    No ``column.family`` or ``columns``: the view's columns and their cells come from the
    commit record, so :func:`parse_read_options` refuses them rather than ignore them.
    """

    as_of_batch: int | None
    as_of_ms: int | None
    filter_pushdown: bool


def parse_read_options(raw: Mapping[str, str]) -> HBaseReadOptions:
    """Validate the batch reader's options (driver, and again on executors).

    ``column.family`` and ``columns`` get an error of their own, naming the option: they
    are the sink's, and the view's columns come from the commit record.
    """
    for key in raw:
        if key.lower() in _MAPPING_KEYS:
            raise ConfigError(
                f"option {key!r} is the barrier-hbase sink's, not the reader's: the reader reads every column "
                "the sink committed, mapped as the commit record says; choose columns with select()", option=key)
    v, _ = parse_options(raw, READ_OPTION_SPECS, source_name="barrier-hbase reader", ignored=SPARK_SINK_KEYS)
    return HBaseReadOptions(
        **_shared_fields(v),
        as_of_batch=v.optional_integer("as.of.batch"),
        as_of_ms=v.optional_integer("as.of.timestamp"),
        filter_pushdown=v.flag("filter.pushdown"),
    )
