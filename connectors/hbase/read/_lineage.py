"""Lineage: which checkpoint wrote a cell, when, and which Kafka offsets that checkpoint covered.

Every cell the sink writes carries a timestamp inside its batch's ``[ts_lo, ts_hi)``
(see ``_timestamps``), and every commit is kept in the sink's history (see
``_commit_table``), so a cell version maps back to exactly one commit record: its
Spark batch, query, commit time, and the source offsets it covered (from the previous
commit's offsets to its own). A version outside every committed range was written by
someone else, or belongs to a batch that is still in flight.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._options import DEFAULT_COMMIT_TABLE
from ..client._connection import HBaseConnection, connection_options
from ..client._sasl import KerberosSettings
from ..client._tls import TlsSettings
from ..sink._commit_table import CommitRecord, read_history
from ._reader import find_commit

__all__ = ["CellLineage", "covered_offsets", "lineage"]

_DEFAULTS = {"hbase.thrift.failover.rounds": "1"}
"""An interactive read: one pass over the gateways unless the options ask for more."""


@dataclass(frozen=True)
class CellLineage:
    """One version of one cell and the checkpoint that wrote it (``None`` fields: not ours)."""

    column: str
    timestamp_ms: int
    value: bytes
    sink_id: str | None = None
    seq: int | None = None
    batch_id: int | None = None
    query_id: str | None = None
    committed_at_ms: int | None = None
    offsets_from: dict[str, int] = field(default_factory=dict)
    offsets_to: dict[str, int] = field(default_factory=dict)

    @property
    def committed(self) -> bool:
        return self.seq is not None


def covered_offsets(history: list[CommitRecord], index: int) -> tuple[dict[str, int], dict[str, int]]:
    """Source offsets commit ``history[index]`` covered: ``(from, to)`` per channel that moved."""
    now = history[index].offsets
    before = history[index - 1].offsets if index > 0 else {}
    moved = {ch for ch, off in now.items() if before.get(ch) != off}
    return ({ch: before[ch] for ch in moved if ch in before}, {ch: now[ch] for ch in moved})


def _owner(history: list[CommitRecord], starts: list[int], ts: int) -> int | None:
    i = bisect.bisect_right(starts, ts) - 1
    if i >= 0 and history[i].ts_lo <= ts < history[i].ts_hi:
        return i
    return None


def lineage(host: str | None, port: int | None, table: str, row: bytes | str, *, column: str | None = None,
            sink_id: str | None = None, commit_table: str = DEFAULT_COMMIT_TABLE, versions: int = 1,
            transport: str | None = None, protocol: str | None = None,
            kerberos: KerberosSettings | None = None, tls: TlsSettings | None = None,
            options: Mapping[str, str] | None = None) -> list[CellLineage]:
    """Every kept version (newest ``versions`` per cell) of ``row`` with the commit that wrote it.

    ``options``: any ``hbase.*`` option as the sink takes it (TLS, Kerberos, gateways,
    failover); ``host``, ``port``, ``kerberos`` and the others are shorthands for some of them.
    One pass over the gateways unless the options ask for more (an interactive read).
    """
    key = row.encode() if isinstance(row, str) else row
    conn = HBaseConnection(connection_options(
        options, host=host, port=port, transport=transport, protocol=protocol, tls=tls, kerberos=kerberos,
        defaults=_DEFAULTS))
    try:
        latest = find_commit(conn, commit_table, table, sink_id)
        history = read_history(conn, commit_table, latest.sink_id)
        columns = [column.encode()] if column is not None else sorted(conn.call(lambda c: c.table(table).row(key)))

        def versions_of(col: bytes) -> list[tuple[bytes, int]]:
            """Through the retrying call: a dead socket is retried on the next gateways."""
            return conn.call(lambda c: c.table(table).cells(key, col, versions=versions, include_timestamp=True))

        cells = [(col, value, ts) for col in columns for value, ts in versions_of(col)]
    finally:
        conn.close()
    history = sorted(history, key=lambda r: r.ts_lo)
    starts = [r.ts_lo for r in history]
    out = []
    for col, value, ts in cells:
        i = _owner(history, starts, ts)
        if i is None:
            out.append(CellLineage(col.decode(), ts, value))
            continue
        rec = history[i]
        lo, hi = covered_offsets(history, i)
        out.append(CellLineage(col.decode(), ts, value, rec.sink_id, rec.seq, rec.batch_id, rec.query_id,
                               rec.committed_at_ms, lo, hi))
    return out
