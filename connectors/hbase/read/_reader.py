"""Committed and as-of views: what a sink had committed at a checkpoint, nothing it had not.

A view is one commit record (the last one, or one from the sink's history picked by
Spark batch id or by time). Per cell it returns the newest version with a timestamp
below the record's ``read_bound`` (``scan(timestamp=read_bound)``: HBase's time range
``[0, read_bound)``), outside every recorded *gap* (an attempt that was replaced and
never committed; a cell found in a gap is replaced by its newest older version).
Deletes are HBase delete markers, which HBase applies itself.

Exactness needs ``KEEP_DELETED_CELLS=TRUE`` on the families: then a delete marker newer
than the bound (an in-flight batch's, or a later checkpoint's) does not hide the
versions below it from a time-range read, and major compactions keep deleted cells.
Without it the views are exact only while no newer delete touches the rows read
(the sink warns at query start, see ``_admin``).

Used by ``spark.read.format("barrier-hbase")`` (one Spark partition per region and
pushed-down row-key range) and by :func:`read_committed`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from ...._exceptions import ConfigError, SinkError
from .._codec import decode_column
from .._options import DEFAULT_COMMIT_TABLE
from ..client._connection import HBaseConnection, connection_options
from ..client._sasl import KerberosSettings
from ..client._thrift_types import Thrift1Connection, Thrift1Table
from ..client._tls import TlsSettings
from ..sink._commit_table import CommitRecord, list_sinks, read_history, read_state
from ._key_ranges import FULL, KeyRange

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = [
    "committed_schema",
    "find_commit",
    "iter_committed",
    "read_committed",
    "region_ranges",
    "view_record",
]

_VERSIONS = 100
_SCAN_BATCH = 1000


def find_commit(conn: HBaseConnection, commit_table: str, table: str, sink_id: str | None) -> CommitRecord:
    """The commit record to read under: ``sink_id``'s, or the only sink writing ``table``."""
    if sink_id:
        record = read_state(conn, commit_table, sink_id).commit
        if record is None:
            raise SinkError(f"sink {sink_id!r} has committed nothing yet (commit table {commit_table!r})")
        return record
    records = [r for r in list_sinks(conn, commit_table) if r.table == table]
    if len(records) != 1:
        ids = sorted(r.sink_id for r in records)
        raise ConfigError(
            f"table {table!r} has {len(records)} committed sinks {ids}; set option 'sink.id'",
            option="sink.id")
    return records[0]


def view_record(conn: HBaseConnection, commit_table: str, latest: CommitRecord, *,
                as_of_batch: int | None = None, as_of_ms: int | None = None) -> CommitRecord:
    """The record a view reads under: ``latest``, or the one committed for a batch / by a time."""
    if as_of_batch is None and as_of_ms is None:
        return latest
    if as_of_batch is not None and as_of_ms is not None:
        raise ConfigError("set at most one of 'as.of.batch' and 'as.of.timestamp'", option="as.of.batch")
    history = read_history(conn, commit_table, latest.sink_id)
    if as_of_batch is not None:
        found = [r for r in history if r.batch_id == as_of_batch and r.query_id == latest.query_id]
        found = found or [r for r in history if r.batch_id == as_of_batch]
        if not found:
            batches = [r.batch_id for r in history]
            raise ConfigError(f"sink {latest.sink_id!r} committed no batch {as_of_batch}; committed batches: "
                              f"{_span(batches)}", option="as.of.batch")
        return found[-1]
    before = [r for r in history if r.committed_at_ms <= int(as_of_ms or 0)]
    if not before:
        first = history[0].committed_at_ms if history else None
        raise ConfigError(f"sink {latest.sink_id!r} had committed nothing at {as_of_ms} ms; its first commit "
                          f"is at {first} ms", option="as.of.timestamp")
    return before[-1]


def _span(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]} ({len(ids)})" if ids else "none"


def committed_schema(record: CommitRecord) -> StructType:
    """The Spark schema of the committed view: row key + mapped columns (no op/marker columns)."""
    from pyspark.sql.types import StructType

    full = StructType.fromJson(json.loads(record.schema_json))
    keep = {record.rowkey} | {c[0] for c in record.columns}
    return StructType([f for f in full.fields if f.name in keep])


def region_ranges(conn: HBaseConnection, table: str) -> list[KeyRange]:
    """Row-key ranges of the table's regions, in key order (Thrift1 ``getTableRegions``)."""
    regions = conn.call(lambda c: c.table(table).regions())
    return sorted((r["start_key"], r["end_key"]) for r in regions) or [FULL]


def _in_gap(ts: int, gaps: list[list[int]]) -> bool:
    return any(lo <= ts < hi for lo, hi in gaps)


def _outside_gaps(table: Thrift1Table, key: bytes, data: dict[bytes, tuple[bytes, int]],
                  gaps: list[list[int]]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for column, (value, ts) in data.items():
        if _in_gap(ts, gaps):
            older = table.cells(key, column, versions=_VERSIONS, timestamp=ts, include_timestamp=True)
            found = next((v for v, t in older if not _in_gap(t, gaps)), None)
            if found is None:
                continue
            value = found
        out[column] = value
    return out


def iter_committed(conn: HBaseConnection, record: CommitRecord, key_range: KeyRange = FULL, *,
                   chunk_rows: int = 10_000) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the view of ``record.table`` under ``record``, for one key range.

    One scan through the connection's resumable :meth:`~..client._connection.HBaseConnection.scan`:
    after a dead socket it restarts on the next gateway just after the last row taken,
    under the same record, so it is exact. A row's versions in a gap are looked up on
    the scan's own socket, inside the batch, so they resume with it.
    """
    from happybase.table import TScan, make_row
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(committed_schema(record), timezone="UTC")
    by_name = {c[0]: f"{c[1]}:{c[2]}".encode() for c in record.columns}
    # per field of the view: (is the row key, its cell column -- empty for the row key --, type)
    layout = [(f.name == record.rowkey, by_name.get(f.name, b""), f.type) for f in schema]
    # The sink's own cells only: a row that holds nothing but other writers' cells of the same
    # families (a plain client's column beside the sink's deleted ones) is no row of the view.
    columns = sorted(set(by_name.values()))
    gaps = record.gaps
    keys: list[bytes] = []
    rows: list[dict[bytes, bytes]] = []

    def emit() -> pa.RecordBatch:
        arrays = [decode_column(keys, f.type, f.name) if is_key
                  else decode_column([r.get(col) for r in rows], f.type, f.name)
                  for (is_key, col, _), f in zip(layout, schema, strict=True)]
        keys.clear()
        rows.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    start, stop = key_range
    name = record.table.encode()

    def open_scanner(c: Thrift1Connection, after: bytes | None) -> int:
        scan = TScan(startRow=start if after is None else after + b"\x00", stopRow=stop or None,
                     timestamp=record.read_bound, columns=columns or None, caching=_SCAN_BATCH)
        return int(c.client.scannerOpenWithScan(name, scan, {}))

    def fetch(c: Thrift1Connection, scanner: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
        found = c.client.scannerGetList(scanner, _SCAN_BATCH)
        if not gaps:
            return [(item.row, make_row(item.columns, False)) for item in found]
        table = c.table(record.table)
        return [(item.row, _outside_gaps(table, item.row, make_row(item.columns, True), gaps)) for item in found]

    for batch in conn.scan(open_scanner, fetch, lambda c, s: c.client.scannerClose(s), lambda r: r[0],
                           what=f"scan of {record.table!r}"):
        for key, data in batch:
            if not data:
                continue
            keys.append(key)
            rows.append(data)
            if len(keys) >= chunk_rows:
                yield emit()
    if keys:
        yield emit()


def read_committed(host: str | None, port: int | None, table: str, *, sink_id: str | None = None,
                   commit_table: str = DEFAULT_COMMIT_TABLE, transport: str | None = None,
                   protocol: str | None = None, as_of_batch: int | None = None,
                   as_of_ms: int | None = None, tls: TlsSettings | None = None,
                   kerberos: KerberosSettings | None = None,
                   options: Mapping[str, str] | None = None) -> pa.Table:
    """The committed (or as-of) view of ``table`` as a pyarrow Table (no Spark session needed).

    ``options``: any ``hbase.*`` option as the sink takes it (``hbase.thrift.tls.ca``,
    ``hbase.thrift.authentication``, a gateway list, failover, ...); ``host``/``port`` and the
    other keywords are shorthands for some of them (``host`` may be a gateway list like
    option ``hbase.thrift.host``; ``port`` is then the default port).
    """
    conn = HBaseConnection(connection_options(
        options, host=host, port=port, transport=transport, protocol=protocol, tls=tls, kerberos=kerberos))
    try:
        latest = find_commit(conn, commit_table, table, sink_id)
        record = view_record(conn, commit_table, latest, as_of_batch=as_of_batch, as_of_ms=as_of_ms)
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(committed_schema(record), timezone="UTC")
        return pa.Table.from_batches(list(iter_committed(conn, record)), schema=schema)
    finally:
        conn.close()
