"""Mutation buffer and flush policy (executor, one per write task).

Rows are grouped by cell timestamp (one group per generation, see ``_timestamps``)
because Thrift1's ``mutateRowsTs`` stamps a whole call with one timestamp. A flush
sends every group in order, oldest timestamp first. Flush triggers: the row or byte
limit (checked on every row, so limits hold inside one huge Arrow batch), the
interval (checked by the writer between Arrow batches), every barrier and the end of
the task. Any failure raises :class:`FlushError`: Spark fails the task and retries it,
and the retry rewrites the same cells at the same timestamps, so nothing is lost and
nothing is duplicated.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from thriftpy2.thrift import TException

from ..._exceptions import FlushError, SinkError
from ..._faults import FAULT_ENV, fault_point
from ._connection import HBaseConnection

__all__ = ["MutationBuffer", "FAULT_ENV", "FAULT_AFTER_PARTIAL_FLUSH"]

log = logging.getLogger(__name__)

FAULT_AFTER_PARTIAL_FLUSH = "hbase.after_partial_flush"


class MutationBuffer:
    """Buffered ``BatchMutation`` objects keyed by timestamp, with Flink's flush limits."""

    def __init__(self, conn: HBaseConnection, table: str, *, max_rows: int, max_size: int,
                 interval_ms: int, checkpoint_id: int | None = None) -> None:
        self._conn = conn
        self._table = table.encode()
        self.max_rows, self.max_size, self.interval_ms = max_rows, max_size, interval_ms
        self.checkpoint_id = checkpoint_id
        self._groups: list[tuple[int, list[Any]]] = []
        self.rows = 0
        self.bytes = 0
        self._oldest: float | None = None
        self.flushes = 0
        self.rows_written = 0

    def add(self, ts: int, batch_mutation: Any, nbytes: int) -> None:
        """Buffer one row's mutations at ``ts``; flushes first-come when a limit is hit."""
        if not self._groups or self._groups[-1][0] != ts:
            self._groups.append((ts, []))
        self._groups[-1][1].append(batch_mutation)
        self.rows += 1
        self.bytes += nbytes
        if self._oldest is None:
            self._oldest = time.monotonic()
        if self.rows >= self.max_rows or self.bytes >= self.max_size:
            self.flush()

    def interval_due(self) -> bool:
        return self._oldest is not None and (time.monotonic() - self._oldest) * 1000 >= self.interval_ms

    def flush(self) -> None:
        """Send everything buffered; raise :class:`FlushError` if any of it failed."""
        if not self._groups:
            return
        groups, rows = self._groups, self.rows
        self._groups, self.rows, self.bytes, self._oldest = [], 0, 0, None
        for ts, mutations in groups:
            try:
                self._conn.call(lambda c, m=mutations, t=ts: c.client.mutateRowsTs(self._table, m, t, {}))
            except (TException, SinkError) as exc:
                raise FlushError(
                    f"writing {len(mutations)} row(s) to HBase table {self._table.decode()!r} "
                    f"at timestamp {ts} failed: {_first_line(exc)}",
                    checkpoint_id=self.checkpoint_id,
                ) from exc
        self.flushes += 1
        self.rows_written += rows
        log.debug("flushed %d rows in %d timestamp group(s)", rows, len(groups))
        fault_point(FAULT_AFTER_PARTIAL_FLUSH, fail=lambda m: FlushError(m, checkpoint_id=self.checkpoint_id))


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
