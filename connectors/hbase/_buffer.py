"""Mutation buffer and flush policy (executor, one per write task): net per key, rounds per key.

Rows are *netted* per row key while buffered, as Flink's reduced-buffer executors do:
the buffer keeps, per key, whether the row was deleted, which cells were deleted and
the last value of every put cell. Ten thousand updates of a hot key leave one put; a
delete followed by puts leaves one delete marker (at the round's delete slot) and
newer puts (at its put slot), see ``_timestamps``. A flush sends, per round in use, at
most two ``mutateRowsTs`` calls: the deletes at the round's delete slot (Thrift1 turns
``family:qualifier`` into a DeleteColumns marker masking versions at or below the slot;
a row delete is one per column of this sink, so another writer's columns in the same
family are never touched), then the puts at its put slot.

Rounds are per key, and each (row, column, timestamp) is written by at most one flush of
a task, with one value. A key whose put already went out in its round moves to the next
round when it is written again (a put at the next put slot sorts above it; a delete at
the next delete slot masks it); a key whose round so far only deleted stays in it (its
put slot is still unused, and a delete marker written twice is the same marker). Why:
two copies of one task (speculation, an executor declared lost that still runs, a
mutation retried through another gateway whose first try lands late) send the same
flushes in any interleaving; were a slot written twice with two values, HBase would
keep whichever arrived last. With one value per slot, every interleaving leaves what
one copy leaves. A key that reaches the last round is held in memory until the end of
the task and written once there, so it can never need a fifth round (the task reports
how many in its commit message; the driver warns once).

A key's puts of an earlier round that a later round supersedes are *retired* after the
flush: ``retire`` (when given: ``_writer``, through Thrift2) deletes exactly those
versions ``(row, column, timestamp)``, so a key still ends with one version per batch
and task. A version delete masks its version whenever that put lands, so copies of a
task still converge. Without Thrift2 nothing is retired: a key written in several
flushes then keeps a version per round.

Before a flush's mutations are sent, ``note`` (when given) records which keys it puts
in which round (``_writer``: a write-ahead note in the commit table, refused once the
task's attempt was replaced, so the flush is then never sent). Flush points are
deterministic, so a replay writes the same cells at the same timestamps: the row limit
(input rows since the last flush), the byte limit (both recorded with the attempt, so a
replay under changed options still flushes where the first attempt did), every
barrier, and the end of the task.

Any write failure raises :class:`FlushError`: Spark fails the task and retries it, and
the retry rewrites the same cells at the same timestamps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..._exceptions import FlushError, SinkError
from ..._faults import fault_point
from ._connection import HBaseConnection
from ._errors import refusals
from ._timestamps import ROUNDS, TaskClock

__all__ = ["FAULT_AFTER_PARTIAL_FLUSH", "FLUSHED_KEYS_LIMIT", "MutationBuffer"]

log = logging.getLogger(__name__)

FAULT_AFTER_PARTIAL_FLUSH = "hbase.after_partial_flush"
# The round of every key already written is remembered; past this many keys they are
# forgotten and every key starts one round higher (a later write of any of them then
# sorts above what it wrote before), bounding that memory.
FLUSHED_KEYS_LIMIT = 1_000_000
_LAST = ROUNDS - 1


class _RowChange:
    """The net effect of a task's buffered rows on one row key."""

    __slots__ = ("cell_deletes", "deleted", "puts")

    def __init__(self) -> None:
        self.deleted = False
        self.cell_deletes: set[bytes] = set()
        self.puts: dict[bytes, bytes] = {}


class MutationBuffer:
    """Netted row changes of one task with Flink's row/byte flush limits."""

    def __init__(self, conn: HBaseConnection, table: str, clock: TaskClock, *, delete_columns: tuple[bytes, ...],
                 max_rows: int, max_size: int, batch_id: int | None = None,
                 note: Callable[[dict[int, list[bytes]]], None] | None = None,
                 retire: Callable[[list[tuple[bytes, bytes, int]]], None] | None = None) -> None:
        self._conn = conn
        self._table = table.encode()
        self.clock = clock
        self._delete_columns = delete_columns  # what a row delete clears (``SinkLayout.delete_columns``)
        self.max_rows, self.max_size = max_rows, max_size
        self.batch_id = batch_id
        self._note = note
        self._retire = retire
        self._changes: dict[bytes, _RowChange] = {}
        self._held: dict[bytes, _RowChange] = {}  # keys in the last round, written at the end
        # key -> (round, the columns of its puts that went out in that round)
        self._written: dict[bytes, tuple[int, frozenset[bytes]]] = {}
        self._floor = 0  # round of keys not in _written
        self._rows = 0
        self._bytes = 0
        self.max_round: int | None = None  # highest round written so far
        self.held_keys = 0  # keys held back for the end of the task (each counted once)

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
        change = self._held.get(key) or self._changes.get(key)
        if change is None:
            change = self._changes[key] = _RowChange()
        return change

    def _count(self, nbytes: int) -> None:
        self._rows += 1
        self._bytes += nbytes
        if self._rows >= self.max_rows or self._bytes >= self.max_size:
            self.flush()

    def _round_of(self, key: bytes) -> int:
        written = self._written.get(key)
        if written is None:
            return self._floor
        round_, put_out = written
        return round_ + 1 if put_out else round_

    def flush(self, *, final: bool = False) -> None:
        """Send the netted changes (a limit or barrier; ``final`` at the end of the task)."""
        changes = self._changes
        if final:
            changes.update(self._held)
            self._held = {}
        if not changes:
            return
        self._changes, self._rows, self._bytes = {}, 0, 0
        rounds: dict[int, list[tuple[bytes, _RowChange]]] = {}
        for key, change in changes.items():
            round_ = self._round_of(key)
            if round_ >= _LAST and not final:
                # Written once, at the end of the task. Counted, not warned about here: the
                # driver's commit sums the tasks' counts and warns once per query.
                self.held_keys += 1
                log.debug("key %r reached the last round; held until the end of the task", key[:64])
                self._held[key] = change
                continue
            rounds.setdefault(round_, []).append((key, change))
        if self._note is not None and rounds:
            self._note({r: [k for k, c in rows if c.puts] for r, rows in rounds.items()})
        retired: list[tuple[bytes, bytes, int]] = []
        for round_ in sorted(rounds):
            self._write(round_, rounds[round_], retired)
        if retired and self._retire is not None:
            self._retire(retired)
        if len(self._written) >= FLUSHED_KEYS_LIMIT:
            self._floor = min(_LAST, max(r for r, _ in self._written.values()) + 1)
            self._written = {}
        fault_point(FAULT_AFTER_PARTIAL_FLUSH, fail=lambda m: FlushError(m, batch_id=self.batch_id))

    def _write(self, round_: int, changes: list[tuple[bytes, _RowChange]],
               retired: list[tuple[bytes, bytes, int]]) -> None:
        Mutation, BatchMutation = _thrift_types()
        deletes: list[object] = []  # happybase's generated BatchMutation structs
        puts: list[object] = []
        for key, change in changes:
            if change.deleted:
                deletes.append(BatchMutation(row=key, mutations=[
                    Mutation(isDelete=True, column=c) for c in self._delete_columns]))
            elif change.cell_deletes:
                deletes.append(BatchMutation(row=key, mutations=[
                    Mutation(isDelete=True, column=c) for c in change.cell_deletes]))
            if change.puts:
                puts.append(BatchMutation(row=key, mutations=[
                    Mutation(column=c, value=v) for c, v in change.puts.items()]))
            before = self._written.get(key)
            if before is not None and before[0] < round_ and before[1]:
                # Its earlier round's puts are superseded: retired (exact versions), so the
                # batch leaves one version per key and task. A delete marker of this round
                # masks them anyway; retiring them too is harmless and keeps this simple.
                old_ts = self.clock.put_ts(before[0])
                retired.extend((key, column, old_ts) for column in before[1])
            kept = before[1] if before is not None and before[0] == round_ else frozenset()
            self._written[key] = (round_, kept | frozenset(change.puts))
        self._send(deletes, self.clock.delete_ts(round_))
        self._send(puts, self.clock.put_ts(round_))
        self.max_round = round_ if self.max_round is None else max(self.max_round, round_)
        log.debug("flushed %d row(s) (%d delete, %d put) in round %d", len(changes), len(deletes),
                  len(puts), round_)

    def _send(self, mutations: list[object], ts: int) -> None:
        if not mutations:
            return
        with refusals(f"writing {len(mutations)} row(s) to HBase table {self._table.decode()!r} "
                      f"at timestamp {ts} failed", error=FlushError, also=(SinkError,), batch_id=self.batch_id):
            self._conn.call(lambda c: c.client.mutateRowsTs(self._table, mutations, ts, {}))


def _thrift_types() -> tuple[Any, Any]:
    from happybase.batch import BatchMutation, Mutation

    return Mutation, BatchMutation


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
