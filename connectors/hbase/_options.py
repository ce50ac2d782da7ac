"""Options of the ``barrier-hbase`` sink and reader: declared once, parsed once.

How to reach the gateways (the ``hbase.*`` options) is the client's
(:mod:`.client._options`); the sink's and the reader's options extend it here.

The specs below are the options contract (the docs/options.md table is generated from them
with :func:`sparkbarrier.connectors._options.options_table`). :func:`parse_sink_options`
turns Spark's case-insensitive string map into a frozen :class:`HBaseSinkOptions`;
an unknown key is an error that lists the valid keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._exceptions import ConfigError
from ...barrier import DeliveryGuarantee
from .._options import (
    OptionSpec,
    OptionValues,
    parse_bool,
    parse_int,
    parse_non_negative_int,
    parse_nonempty,
    parse_options,
    parse_positive_int,
    parse_positive_size,
    parse_size,
    parse_stripped,
    parse_timestamp_ms,
)
from ..checkpointed._options import DELIVERY_GUARANTEE, RENAMED_SINK_OPTIONS
from .client._options import (
    GATEWAY_OPTION_SPECS,
    KERBEROS_OPTION_SPECS,
    HBaseConnectionOptions,
    connection_from_values,
)

__all__ = [
    "DEFAULT_COMMIT_TABLE",
    "MIN_BUFFER_MEMORY",
    "READ_OPTION_SPECS",
    "SINK_OPTION_SPECS",
    "SPARK_SINK_KEYS",
    "DeliveryGuarantee",
    "HBaseReadOptions",
    "HBaseSinkOptions",
    "parse_columns",
    "parse_read_options",
    "parse_sink_options",
]

DEFAULT_COMMIT_TABLE = "sparkbarrier_commits"
# Keys Spark itself puts into a sink's option map.
# The checkpointed-sink adapter's own options (``checkpoint.*``) are the adapter's to check.
SPARK_SINK_KEYS: tuple[str, ...] = ("path", "checkpointLocation", "queryName", "checkpoint.state.location",
               "checkpoint.state.allowMismatch")


_CONNECTION_SPECS: tuple[OptionSpec, ...] = (
    *GATEWAY_OPTION_SPECS,
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


# sink.max-write-tasks: each write task of a batch whose keys are not hash-partitioned by the
# row key (``sink._keyed``: by a Spark shuffle or a topic's producer) owns 8 ms of cell
# timestamps (``sink._timestamps``; keyed tasks share the first blocks), so
# the batch's span is up to 8 ms times this plus the keyed blocks; past the limit a batch could stamp cells
# over two minutes ahead of the clock, which HBase's timestamp slop refuses.
MAX_WRITE_TASKS_DEFAULT = 512
MAX_WRITE_TASKS_LIMIT = 16_384


def parse_max_write_tasks(key: str, raw: str) -> int:
    value = parse_int(key, raw, minimum=1)
    if value > MAX_WRITE_TASKS_LIMIT:
        raise ConfigError(
            f"option {key!r} is {value}; at most {MAX_WRITE_TASKS_LIMIT}: each write task whose keys are not "
            f"hash-partitioned by the row key takes 8 ms of cell timestamps per batch, so {value} tasks could stamp "
            f"cells up to {value * 8 // 1000} s ahead of the clock; coalesce() the stream before the sink",
            option=key)
    return value


# The smallest sink.buffer.max-memory accepted. Below a few MiB the bound saves nothing worth
# having (a Python worker with pyarrow is ~40 MiB before its first row) and costs disk: a
# task spills a run per max-memory of netted input and every merge pass rewrites them all,
# while the merge's chunks (max-memory / 64: 64 KiB at 4 MiB) shrink to small reads. The
# issue's 1 byte spilled one run per key.
MIN_BUFFER_MEMORY = 4 * 1024 * 1024


def parse_buffer_memory(key: str, raw: str) -> int:
    """A size of at least :data:`MIN_BUFFER_MEMORY` (the error names the option and the smallest value)."""
    value = parse_size(key, raw)
    if value < MIN_BUFFER_MEMORY:
        raise ConfigError(f"option {key!r} is {raw.strip()!r} ({value} bytes); the smallest accepted value is "
                          f"'4mb' ({MIN_BUFFER_MEMORY} bytes): a smaller bound saves less memory than the Python "
                          "worker's own and multiplies the task's spilled runs and merge passes", option=key)
    return value


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
        "sink.max-write-tasks", parse_max_write_tasks, MAX_WRITE_TASKS_DEFAULT,
        "most write tasks (Spark partitions reaching the sink) in one batch; each task whose keys are not "
        "hash-partitioned by the row key (by a Spark shuffle, or by the producer of a topic read without one) "
        "takes 8 ms of cell timestamps per batch (keyed tasks share 8 ms, or 16 ms per split with minPartitions), "
        "so a batch's cells span up to 8 ms times this plus the keyed blocks, and batches of such tasks that come "
        "faster than that move the timestamps ahead of the clock. Checked by each task before it writes anything; "
        f"at most {MAX_WRITE_TASKS_LIMIT}",
        type_name="int",
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
        "sink.buffer.max-memory", parse_buffer_memory, 256 * 1024 * 1024,
        "memory a write task's netted rows may take (as Python holds them) before they spill, sorted, to "
        "the executor's local temporary directory, and what the merge of the spills reads at once (e.g. "
        "`64mb`; at least `4mb`): a task's memory is this plus a fixed overhead (docs/hbase-sink.md, memory)",
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
    max_tasks: int = MAX_WRITE_TASKS_DEFAULT

    @property
    def exactly_once(self) -> bool:
        return self.guarantee is DeliveryGuarantee.EXACTLY_ONCE

    def explicit_mapping(self) -> dict[str, tuple[str, str]]:
        return {col: (fam, qual) for col, fam, qual in self.columns}

    def write_shape(self) -> dict[str, str]:
        """The options that decide which cells a batch writes and deletes, by option key.

        Recorded with every attempt (``AttemptRecord.writes``): the replay that removes an
        abandoned attempt removes its noted puts from the sink's columns *as the replay
        maps them*, and its delete markers stay, so a replay is exact only under the same
        values (``_attempts.check_writes``). No secret is among them.
        """
        return {"table": self.table, "rowkey": self.rowkey, "op.column": self.op_column or "",
                "column.family": self.column_family,
                "columns": ",".join(f"{c}={f}:{q}" for c, f, q in self.columns),
                "sink.ignore-null-value": "true" if self.ignore_null_value else "false"}


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
    return _fields(_SharedOptions(**_fields(connection_from_values(v)), table=v.text("table"),
                                  sink_id=v.text("sink.id") or None, commit_table=v.text("commit.table")))


def parse_sink_options(raw: Mapping[str, str]) -> HBaseSinkOptions:
    """Validate Spark's option map for the sink (driver, at query start)."""
    v, _ = parse_options(raw, SINK_OPTION_SPECS, source_name="barrier-hbase sink", ignored=SPARK_SINK_KEYS,
                         renamed=RENAMED_SINK_OPTIONS)
    opts = HBaseSinkOptions(
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
        max_tasks=v.integer("sink.max-write-tasks"),
    )
    if opts.exactly_once and not opts.thrift2_gateways:
        # Thrift1 has no exact-version delete: the puts of a try Spark did not commit, or of an
        # abandoned attempt, could not be removed apart from the committed ones, and it cannot
        # read KEEP_DELETED_CELLS either (docs/hbase-guarantees.md, what the argument rests on).
        raise ConfigError(
            "barrier-hbase: delivery.guarantee=exactly-once needs a Thrift2 gateway: the sink removes the puts "
            "of tries Spark did not commit, and of attempts a restart abandoned, with exact-version deletes, "
            "and checks the table's KEEP_DELETED_CELLS, and Thrift1 can do neither. Set option "
            "'hbase.thrift2.host' (HBase's `hbase thrift2` server, e.g. host:9095; or 'hbase.thrift2.port' "
            "for one on the Thrift1 hosts), or set delivery.guarantee=at-least-once (a replay may then add "
            "versions)", option="hbase.thrift2.host")
    return opts


@dataclass(frozen=True)
class HBaseReadOptions(_SharedOptions):
    """Parsed batch-reader options. Picklable.

    No ``column.family`` or ``columns``: the view's columns and their cells come from the
    commit record, so :func:`parse_read_options` refuses them rather than ignore them.
    """

    as_of_batch: int | None
    as_of_ms: int | None
    filter_pushdown: bool


# What only the sink reads (how it writes: create.table, op.column, buffers, ...): the reader
# takes these keys and ignores them, so one options dict serves the sink and the reader
# (issue 59). The mapping keys are refused all the same (below): they would mislead.
_SINK_ONLY_KEYS: tuple[str, ...] = tuple(
    s.key for s in SINK_OPTION_SPECS if s.key not in {r.key for r in READ_OPTION_SPECS} and s.key not in _MAPPING_KEYS)


def parse_read_options(raw: Mapping[str, str]) -> HBaseReadOptions:
    """Validate the batch reader's options (driver, and again on executors).

    ``column.family`` and ``columns`` get an error of their own, naming the option: they
    are the sink's, and the view's columns come from the commit record. The sink's other
    keys (``create.table``, ``op.column``, ...) are taken and ignored: one dict serves both.
    """
    for key in raw:
        if key.lower() in _MAPPING_KEYS:
            raise ConfigError(
                f"option {key!r} is the barrier-hbase sink's, not the reader's: the reader reads every column "
                "the sink committed, mapped as the commit record says; choose columns with select()", option=key)
    v, _ = parse_options(raw, READ_OPTION_SPECS, source_name="barrier-hbase reader",
                         ignored=SPARK_SINK_KEYS + _SINK_ONLY_KEYS)
    return HBaseReadOptions(
        **_shared_fields(v),
        as_of_batch=v.optional_integer("as.of.batch"),
        as_of_ms=v.optional_integer("as.of.timestamp"),
        filter_pushdown=v.flag("filter.pushdown"),
    )
