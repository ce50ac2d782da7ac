"""Committed view: what a sink has committed, and nothing it has not.

Per cell the newest version with a timestamp below the last commit's ``read_bound``
(``scan(timestamp=read_bound)``; HBase returns ``ts < read_bound``) and outside every
recorded *gap* (sequences attempted but never committed; a cell found in a gap is
replaced by its newest older version). Tombstones (see ``_layout``) then hide what
they delete: a family's row tombstone hides the family's cells with smaller
timestamps, a cell tombstone hides its cell. Rows with no visible cell are absent.

Used by ``spark.read.format("barrier-hbase")`` (batch) and by :func:`read_committed`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..._exceptions import ConfigError, SinkError
from ._commit_table import CommitRecord, list_sinks, read_state
from ._connection import HBaseConnection
from ._encoding import decode_column
from ._layout import CELL_TOMBSTONE_PREFIX, ROW_TOMBSTONE

__all__ = ["find_commit", "read_committed", "committed_schema"]

_VERSIONS = 100


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


def committed_schema(record: CommitRecord) -> Any:
    """The Spark schema of the committed view: row key + mapped columns (no op/marker columns)."""
    from pyspark.sql.types import StructType

    full = StructType.fromJson(json.loads(record.schema_json))
    keep = {record.rowkey} | {c[0] for c in record.columns}
    return StructType([f for f in full.fields if f.name in keep])


def _in_gap(ts: int, gaps: list[list[int]]) -> bool:
    return any(lo <= ts < hi for lo, hi in gaps)


def _visible_cells(table: Any, key: bytes, data: dict[bytes, tuple[bytes, int]],
                   gaps: list[list[int]]) -> dict[bytes, bytes]:
    cells: dict[bytes, tuple[bytes, int]] = {}
    for column, (value, ts) in data.items():
        if gaps and _in_gap(ts, gaps):
            older = table.cells(key, column, versions=_VERSIONS, timestamp=ts, include_timestamp=True)
            found = next(((v, t) for v, t in older if not _in_gap(t, gaps)), None)
            if found is None:
                continue
            value, ts = found
        cells[column] = (value, ts)
    out: dict[bytes, bytes] = {}
    for column, (value, ts) in cells.items():
        family, _, qualifier = column.partition(b":")
        if qualifier.startswith(ROW_TOMBSTONE):
            continue
        row_del = cells.get(family + b":" + ROW_TOMBSTONE)
        if row_del is not None and row_del[1] >= ts:
            continue
        cell_del = cells.get(family + b":" + CELL_TOMBSTONE_PREFIX + qualifier)
        if cell_del is not None and cell_del[1] >= ts:
            continue
        out[column] = value
    return out


def iter_committed(conn: HBaseConnection, record: CommitRecord, *, chunk_rows: int = 10_000) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the committed view of ``record.table``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(committed_schema(record), timezone="UTC")
    targets = [(c[0], f"{c[1]}:{c[2]}".encode()) for c in record.columns]
    families = sorted({c[1].encode() for c in record.columns})
    table = conn.connection.table(record.table)
    keys: list[bytes] = []
    rows: list[dict[bytes, bytes]] = []

    def emit() -> pa.RecordBatch:
        arrays = []
        for field in schema:
            if field.name == record.rowkey:
                arrays.append(decode_column(keys, field.type))
            else:
                col = dict(targets)[field.name]
                arrays.append(decode_column([r.get(col) for r in rows], field.type))
        keys.clear()
        rows.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    scan = table.scan(columns=families or None, timestamp=record.read_bound, include_timestamp=True)
    for key, data in scan:
        visible = _visible_cells(table, key, data, record.gaps)
        if not visible:
            continue
        keys.append(key)
        rows.append(visible)
        if len(keys) >= chunk_rows:
            yield emit()
    if keys:
        yield emit()


def read_committed(host: str, port: int, table: str, *, sink_id: str | None = None,
                   commit_table: str = "sparkbarrier_commits", transport: str = "buffered",
                   protocol: str = "binary") -> pa.Table:
    """The committed view of ``table`` as a pyarrow Table (no Spark session needed)."""
    conn = HBaseConnection(host, port, transport=transport, protocol=protocol)
    try:
        record = find_commit(conn, commit_table, table, sink_id)
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(committed_schema(record), timezone="UTC")
        return pa.Table.from_batches(list(iter_committed(conn, record)), schema=schema)
    finally:
        conn.close()
