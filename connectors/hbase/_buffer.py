"""Mutation buffer and flush policy (executor, one per write task): net per key, flush in rounds.

Rows are *netted* per row key while buffered, as Flink's reduced-buffer executors do:
the buffer keeps, per key, whether the row was deleted, which cells were deleted and
the last value of every put cell. Ten thousand updates of a hot key leave one put; a
delete followed by puts leaves one delete marker (at the round's delete slot) and
newer puts (at its put slot), see ``_timestamps``. A flush sends at most two
``mutateRowsTs`` calls: every delete of the flush at the delete slot (Thrift1 turns a
``family`` column into a DeleteFamily marker and ``family:qualifier`` into a
DeleteColumns marker, both masking versions at or below the slot), then every put at
the put slot.

Flush points are deterministic, so a replay of the same input flushes at the same rows
and writes the same cells at the same timestamps: the row limit (input rows since the
last flush), the byte limit, every barrier and the end of the task. A delete of a key
whose put this round already flushed cannot mask that put from the same delete slot,
so that flush opens a new round first. When only the last round is left, the buffer
stops flushing mid-task and sends everything at the end of the task in one go (memory
then grows with the task's distinct keys; a warning says which option to raise).

Any write failure raises :class:`FlushError`: Spark fails the task and retries it, and
the retry rewrites the same cells at the same timestamps.
"""

from __future__ import annotations

import logging
from typing import Any

from thriftpy2.thrift import TException

from ..._exceptions import FlushError, SinkError
from ..._faults import fault_point
from ._connection import HBaseConnection
from ._timestamps import TaskClock

__all__ = ["MutationBuffer", "FAULT_AFTER_PARTIAL_FLUSH", "FLUSHED_KEYS_LIMIT"]

log = logging.getLogger(__name__)

FAULT_AFTER_PARTIAL_FLUSH = "hbase.after_partial_flush"
# Keys whose puts went out in the current round are remembered to spot a later delete
# of them; past this many the next flush opens a new round, bounding that memory.
FLUSHED_KEYS_LIMIT = 1_000_000


class _RowChange:
    """The net effect of a task's buffered rows on one row key."""

    __slots__ = ("deleted", "cell_deletes", "puts")

    def __init__(self) -> None:
        self.deleted = False
        self.cell_deletes: set[bytes] = set()
        self.puts: dict[bytes, bytes] = {}

    @property
    def has_delete(self) -> bool:
        return self.deleted or bool(self.cell_deletes)


class MutationBuffer:
    """Netted row changes of one task with Flink's row/byte flush limits."""

    def __init__(self, conn: HBaseConnection, table: str, clock: TaskClock, *, families: tuple[bytes, ...],
                 max_rows: int, max_size: int, checkpoint_id: int | None = None) -> None:
        self._conn = conn
        self._table = table.encode()
        self._clock = clock
        self._families = families
        self.max_rows, self.max_size = max_rows, max_size
        self.checkpoint_id = checkpoint_id
        self._changes: dict[bytes, _RowChange] = {}
        self._flushed_puts: set[bytes] = set()
        self._rows = 0
        self._bytes = 0
        self._holding = False
        self.written = False
        self.written_in_last_round = False

    def delete_row(self, key: bytes, nbytes: int) -> None:
        change = self._change(key)
        change.deleted = True
        change.cell_deletes.clear()
        change.puts.clear()
        self._count(nbytes)

    def upsert(self, key: bytes, puts: list[tuple[bytes, bytes]], deletes: list[bytes], nbytes: int) -> None:
        change = self._change(key)
        for column in deletes:
            change.puts.pop(column, None)
            if not change.deleted:  # a row delete in this round already masks the cell
                change.cell_deletes.add(column)
        change.puts.update(puts)
        self._count(nbytes)

    def _change(self, key: bytes) -> _RowChange:
        change = self._changes.get(key)
        if change is None:
            change = self._changes[key] = _RowChange()
        return change

    def _count(self, nbytes: int) -> None:
        self._rows += 1
        self._bytes += nbytes
        if self._rows >= self.max_rows or self._bytes >= self.max_size:
            self.flush()

    def flush(self, *, final: bool = False) -> None:
        """Send the netted changes (a barrier or limit; ``final`` at the end of the task)."""
        if not self._changes or (self._holding and not final):
            return
        clock = self._clock
        if self._holding and self.written_in_last_round and self._needs_new_round():
            raise SinkError(
                "a write task must order a delete after a put it already wrote in its last timestamp round "
                "(several barriers in one task with keys deleted and rewritten between them); raise "
                "sink.buffer-flush.max-rows or use smaller micro-batches", checkpoint_id=self.checkpoint_id)
        if not self._holding and self._needs_new_round():
            if clock.next_is_last:
                clock.advance()
                self._holding = True
                log.warning("a write task deleted keys it had already written %d times in one "
                            "micro-batch; it now holds the rest of its rows until its end. Raise "
                            "sink.buffer-flush.max-rows or use smaller micro-batches to avoid this",
                            clock.round)
                if not final:
                    return
            else:
                clock.advance()
                self._flushed_puts.clear()
        changes = self._changes
        self._changes, self._rows, self._bytes = {}, 0, 0
        Mutation, BatchMutation = _thrift_types()
        deletes: list[Any] = []
        puts: list[Any] = []
        for key, change in changes.items():
            if change.deleted:
                deletes.append(BatchMutation(row=key, mutations=[
                    Mutation(isDelete=True, column=f) for f in self._families]))
            elif change.cell_deletes:
                deletes.append(BatchMutation(row=key, mutations=[
                    Mutation(isDelete=True, column=c) for c in change.cell_deletes]))
            if change.puts:
                puts.append(BatchMutation(row=key, mutations=[
                    Mutation(column=c, value=v) for c, v in change.puts.items()]))
                self._flushed_puts.add(key)
        self._send(deletes, clock.delete_ts)
        self._send(puts, clock.put_ts)
        self.written = True
        self.written_in_last_round = self._holding
        log.debug("flushed %d row(s) (%d delete, %d put) in round %d", len(changes), len(deletes),
                  len(puts), clock.round)
        fault_point(FAULT_AFTER_PARTIAL_FLUSH, fail=lambda m: FlushError(m, checkpoint_id=self.checkpoint_id))

    def _needs_new_round(self) -> bool:
        if len(self._flushed_puts) >= FLUSHED_KEYS_LIMIT:
            return True
        flushed = self._flushed_puts
        return any(c.has_delete and k in flushed for k, c in self._changes.items())

    def _send(self, mutations: list[Any], ts: int) -> None:
        if not mutations:
            return
        try:
            self._conn.call(lambda c: c.client.mutateRowsTs(self._table, mutations, ts, {}))
        except (TException, SinkError) as exc:
            raise FlushError(
                f"writing {len(mutations)} row(s) to HBase table {self._table.decode()!r} "
                f"at timestamp {ts} failed: {_first_line(exc)}",
                checkpoint_id=self.checkpoint_id,
            ) from exc


def _thrift_types() -> tuple[Any, Any]:
    from happybase.batch import BatchMutation, Mutation

    return Mutation, BatchMutation


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
