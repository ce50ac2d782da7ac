"""A write task's net change per row key, spilled to local disk past a memory bound, written once.

Why this shape. Every try of a task (a retry, a speculative copy, a lost executor's task
still running) must leave what one try leaves, whatever order its rows arrive in: after
a shuffle Spark gives a retry the same rows in another order. Anything that depends on
where in the input a row sits (flush boundaries, a key's "round") differs between tries,
so the task nets its *whole* input per key and writes each key once, at the end of its
input (docs/hbase-guarantees.md, step 3). A key's net change (``_RowChange``: row
deleted, cells deleted, last value per put cell) is a function of its own rows; which
cells it deletes does not depend on their order at all, only put values can. Writes go
out in calls of at most ``max_rows`` rows or ``max_size`` bytes (``sink.buffer-flush.*``):
deletes at the task's delete timestamp, puts at its try's slot (``TaskClock``).

Memory. ``max_memory`` bounds what the task holds, for any row size and key skew (the
fixed overhead on top: docs/hbase-sink.md). Held keys are costed as CPython holds them
(:func:`_cost`), at their *net* change (a hot key costs one row); past the bound they
are sorted and spilled as a run (``.._spill.SortedRuns``: chunks of ``max_memory / 64``
costed bytes, merged within ``max_memory``, two files open). Equal keys net in run order
(input order for that key) and :func:`net` is associative, so the merge's passes change
nothing in what is written.

Before anything is sent, ``note`` (exactly once: ``_writer``) receives the keys whose
puts the task sends, as a stream, records them, and returns the try's put slot, or
raises once the attempt was replaced or is being committed (then nothing is sent). By
then every key has passed ``keyed``, which chooses the task's block (``_keyed``). A
write failure raises :class:`FlushError`; Spark retries the task, which writes the same
markers and its puts at a slot of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from sys import getsizeof
from typing import Any

from ...._exceptions import FlushError, SinkError
from ...._faults import fault_point
from ..._spill import SortedRuns
from ..client._connection import HBaseConnection
from ..client._errors import refusals
from ._keyed import KeyClasses
from ._timestamps import TaskClock

__all__ = ["FAULT_AFTER_PARTIAL_FLUSH", "KEY_OVERHEAD_BYTES", "MutationBuffer", "net"]

log = logging.getLogger(__name__)

FAULT_AFTER_PARTIAL_FLUSH = "hbase.after_partial_flush"
# What CPython (3.11, 3.12, 64-bit) spends on a held key besides its bytes and its change: the
# key's bytes object (header 33, in pymalloc's 16-byte size classes), its slot in the buffer's
# dict (up to ~80 bytes just after the table doubles, when the old table is freed) and its place
# in the sorted list of a spill (8). Checked against tracemalloc (tests/connectors/hbase/test_buffer_memory.py).
KEY_OVERHEAD_BYTES = 144
_VALUE_COST = 40  # a value's bytes object besides its bytes (header 33 in 16-byte classes: 8 bytes of value take 48)
_ROW_CHANGE_COST = 64  # a _RowChange (three slots) besides its dict and set
_TRAVEL_COST = 120  # a change as runs and the merge carry it: (key, (deleted, cells, puts)), two tuples
# Runs are written in chunks of at most max_memory / _CHUNKS_PER_BUDGET costed bytes (or one
# change, if bigger): a merge pass holds one chunk per run it reads, so ~60 runs fit.
_CHUNKS_PER_BUDGET = 64

# A net change as it travels through runs and the merge: (deleted, cell deletes, puts).
Change = tuple[bool, frozenset[bytes], dict[bytes, bytes]]

_NO_CELLS: frozenset[bytes] = frozenset()


class _RowChange:
    """The net effect of the task's rows so far on one row key."""

    __slots__ = ("cell_deletes", "deleted", "puts")

    def __init__(self) -> None:
        self.deleted = False
        self.cell_deletes: set[bytes] | None = None  # most keys never delete a cell: no set for them
        self.puts: dict[bytes, bytes] = {}

    def frozen(self) -> Change:
        return self.deleted, (frozenset(self.cell_deletes) if self.cell_deletes else _NO_CELLS), self.puts

    @classmethod
    def of(cls, puts: dict[bytes, bytes]) -> _RowChange:
        change = cls()
        change.puts = puts
        return change


def _frozen(change: _RowChange | dict[bytes, bytes]) -> Change:
    """A held change as it travels: a key that only ever put cells is held as its dict of puts."""
    return (False, _NO_CELLS, change) if type(change) is dict else change.frozen()  # type: ignore[union-attr]


def _cost(change: _RowChange | dict[bytes, bytes]) -> int:
    """What a held change takes in memory: its dict's table, every value's object and bytes.

    The cost of what is held now, not of the rows that made it: a key's later rows replace
    its values, so a hot key costs one row (issue 57: it used to grow with every row).
    Column names are the writer's shared objects (one per column, not per key).
    """
    if type(change) is dict:
        return getsizeof(change) + _VALUE_COST * len(change) + sum(map(len, change.values()))
    puts = change.puts  # type: ignore[union-attr]
    cells = change.cell_deletes  # type: ignore[union-attr]
    return (_ROW_CHANGE_COST + getsizeof(puts) + _VALUE_COST * len(puts) + sum(map(len, puts.values()))
            + (getsizeof(cells) if cells else 0))


def _travel_cost(key: bytes, change: Change) -> int:
    """What a change takes in a run's chunk once read back (the size of chunks is counted in these)."""
    _, cells, puts = change
    return (KEY_OVERHEAD_BYTES + _TRAVEL_COST + len(key) + getsizeof(puts) + _VALUE_COST * len(puts)
            + sum(map(len, puts.values())) + (getsizeof(cells) if cells else 0))


def net(earlier: Change, later: Change) -> Change:
    """The change of ``earlier`` then ``later`` on one key (the merge of two runs).

    A row delete in ``later`` replaces everything before it; otherwise ``later``'s cell
    deletes remove ``earlier``'s puts of those cells and its puts overwrite them. A cell
    delete after a row delete is masked by it already (as ``MutationBuffer.upsert`` keeps it).
    Associative (each case of ``later`` and the one before it checked by hand, and by the
    property test with merge passes): the merge may net any consecutive runs first.
    """
    deleted, cell_deletes, puts = later
    if deleted:
        return later
    e_deleted, e_cells, e_puts = earlier
    merged = {c: v for c, v in e_puts.items() if c not in cell_deletes}
    merged.update(puts)
    return e_deleted, (e_cells if e_deleted or not cell_deletes else e_cells | cell_deletes), merged


class MutationBuffer:
    """One task's netted row changes: held, spilled past ``max_memory``, written once by :meth:`flush`.

    ``max_memory`` is the buffer's bound in bytes as CPython holds the changes (any positive
    value works; the option refuses values below its minimum, ``_options``).
    """

    def __init__(self, conn: HBaseConnection, table: str, clock: TaskClock, *, delete_columns: tuple[bytes, ...],
                 max_rows: int, max_size: int, max_memory: int = 256 << 20, batch_id: int | None = None,
                 note: Callable[[Iterator[bytes]], int] | None = None,
                 keyed: tuple[KeyClasses, Callable[[dict[str, list[int]] | None], TaskClock | None]] | None = None,
                 ) -> None:
        self._conn = conn
        self._table = table.encode()
        self.clock = clock
        self._delete_columns = delete_columns  # what a row delete clears (``SinkLayout.delete_columns``)
        self.max_rows, self.max_size, self.max_memory = max_rows, max_size, max_memory
        self.batch_id = batch_id
        self._note = note
        self._slot = 0  # the put slot of this try (``note`` returns it)
        # The task's key classes and the test of whether they make it keyed, giving the shared
        # block's clock it then writes with instead of ``clock`` (``_keyed``); decided once every
        # key passed, before ``note`` ends. ``key_classes``: the report (None: no key was written).
        self._keyed = keyed
        self.key_classes: dict[str, list[int]] | None = None
        # A key's net change; a key whose rows only put cells (most) is held as the bare dict of
        # its puts, with no _RowChange: the common path costs one dict per key.
        self._changes: dict[bytes, _RowChange | dict[bytes, bytes]] = {}
        self._held = 0  # the cost of _changes (``_cost`` and KEY_OVERHEAD_BYTES per key)
        self._runs: SortedRuns[Change] = SortedRuns(max_memory=max_memory, cost=_travel_cost, combine=net,
                                                    chunk_bytes=max(1, max_memory // _CHUNKS_PER_BUDGET))
        self.written = False  # something was sent (the task's timestamps are in use)

    @property
    def spilled_runs(self) -> int:
        return self._runs.spilled

    @property
    def merge_passes(self) -> int:
        """Passes before the last (which the note reads): 0 up to ``_spill.MAX_FAN_IN`` runs."""
        return self._runs.passes

    def delete_row(self, key: bytes, nbytes: int) -> None:  # noqa: ARG002 (see upsert)
        change, before = self._row_change(key)
        change.deleted = True
        change.cell_deletes = None
        change.puts.clear()
        self._held += _cost(change) - before

    def upsert(self, key: bytes, puts: list[tuple[bytes, bytes]], deletes: list[bytes], nbytes: int) -> None:  # noqa: ARG002
        """Net one row into its key's change.

        ``nbytes`` (the writer's size of the row) is not used: the buffer costs what it holds
        (``_cost``), since a key's rows replace each other's values rather than add up.
        """
        held = self._changes.get(key)
        if held is None and not deletes:  # the common path, inlined: a new key that puts cells
            if self._held >= self.max_memory:
                self._spill()
            held = self._changes[key] = dict(puts)
            self._held += (KEY_OVERHEAD_BYTES + len(key) + getsizeof(held) + _VALUE_COST * len(held)
                           + sum(map(len, held.values())))
            return
        if type(held) is dict and not deletes:  # a key seen before: its cost moves by what changed (issue 57)
            cells, values, size = len(held), sum(map(len, held.values())), getsizeof(held)
            held.update(puts)
            if len(held) == cells:  # no new cell (a hot key's rows): only the values' bytes moved
                self._held += sum(map(len, held.values())) - values
            else:
                self._held += _cost(held) - (size + _VALUE_COST * cells + values)
            return
        change, before = self._row_change(key)
        for column in deletes:
            change.puts.pop(column, None)
            if not change.deleted:  # a row delete of this task already masks the cell
                if change.cell_deletes is None:
                    change.cell_deletes = set()
                change.cell_deletes.add(column)
        change.puts.update(puts)
        self._held += _cost(change) - before

    def _row_change(self, key: bytes) -> tuple[_RowChange, int]:
        """The key's change as a _RowChange (a new one past a spill if need be) and its cost so far."""
        held = self._changes.get(key)
        if held is None:
            if self._held >= self.max_memory:
                self._spill()
            change = self._changes[key] = _RowChange()
            self._held += KEY_OVERHEAD_BYTES + len(key)
            return change, 0
        before = _cost(held)
        if type(held) is dict:
            held = self._changes[key] = _RowChange.of(held)
        return held, before  # type: ignore[return-value]

    def _spill(self) -> None:
        """Write the held changes, sorted by key, as a run (each change dropped once written)."""
        if not self._changes:
            return
        changes, held, count = self._changes, self._held, len(self._changes)
        self._runs.spill((k, _frozen(changes.pop(k))) for k in sorted(changes))
        log.debug("spilled %d netted key(s) (~%d bytes) to run %d", count, held, self._runs.spilled)
        self._changes, self._held = {}, 0

    def flush(self, *, final: bool = False) -> None:
        """Write everything at the end of the task's input (``final``); a barrier inside a task writes nothing.

        A barrier inside one Spark task is not a commit point (the batch commits as a whole
        on the driver), and writing there would split a key's rows by their position in
        the input: the one thing two tries of a task do not share.

        After spills, the held keys spill too (the merge then holds chunks only), and the
        note takes the keys as the runs drain; the writes then read the drained copy once.
        """
        if not final or self.written or (not self._changes and not self._runs):
            return
        changes: Iterable[tuple[bytes, bool, Any, dict[bytes, bytes]]]
        if self._runs:
            self._spill()
            check = self._keyed[0] if self._keyed is not None else None

            def keys() -> Iterator[bytes]:
                for key, change in self._runs.drain():
                    if check is not None:
                        check.add(key)
                    if change[2]:
                        yield key
                self._settle()

            if self._note is not None:
                self._slot = self._note(keys())
            else:
                for _ in keys():
                    pass
            changes = ((k, d, c, p) for k, (d, c, p) in self._runs.replay())
        else:
            self._settle(self._changes)
            if self._note is not None:
                self._slot = self._note(k for k, c in self._changes.items() if _frozen(c)[2])
            changes = ((k, *_frozen(c)) for k, c in self._changes.items())
        self.written = True
        self._write(changes)
        self.close()
        self._changes, self._held = {}, 0

    def _settle(self, keys: Iterable[bytes] = ()) -> None:
        """Choose the task's block once every key it writes was seen: the shared one if it is keyed."""
        if self._keyed is None:
            return
        classes, keyed = self._keyed
        classes.feed(keys)
        self.key_classes = None if classes.empty else classes.done()
        shared = keyed(self.key_classes)
        if shared is not None:
            self.clock = shared
        self._keyed = None

    def _write(self, changes: Iterable[tuple[bytes, bool, Any, dict[bytes, bytes]]]) -> None:
        """Send the changes in calls bounded by the flush limits: deletes at the delete slot, then puts."""
        Mutation, BatchMutation = _thrift_types()
        deletes: list[object] = []  # happybase's generated BatchMutation structs
        puts: list[object] = []
        size = rows = 0
        delete_columns = self._delete_columns
        max_rows, max_size = self.max_rows, self.max_size
        for key, deleted, cell_deletes, cells in changes:
            rows += 1
            if deleted or cell_deletes:
                columns = delete_columns if deleted else sorted(cell_deletes)
                deletes.append(BatchMutation(row=key, mutations=[Mutation(isDelete=True, column=c) for c in columns]))
            if cells:
                puts.append(BatchMutation(row=key, mutations=[Mutation(column=c, value=v) for c, v in cells.items()]))
                size += len(key) + sum(map(len, cells.values()))
            if rows >= max_rows or size >= max_size:
                self._send_both(deletes, puts)
                deletes, puts, size, rows = [], [], 0, 0
        self._send_both(deletes, puts)

    def _send_both(self, deletes: list[object], puts: list[object]) -> None:
        """One write call's deletes, then its puts; the fault point after each call (kill tests)."""
        if not deletes and not puts:
            return
        self._send(deletes, self.clock.delete_ts())
        self._send(puts, self.clock.slot_put_ts(self._slot))
        fault_point(FAULT_AFTER_PARTIAL_FLUSH, fail=lambda m: FlushError(m, batch_id=self.batch_id))

    def _send(self, mutations: list[object], ts: int) -> None:
        if not mutations:
            return
        with refusals(f"writing {len(mutations)} row(s) to HBase table {self._table.decode()!r} "
                      f"at timestamp {ts} failed", error=FlushError, also=(SinkError,), batch_id=self.batch_id):
            self._conn.call(lambda c: c.client.mutateRowsTs(self._table, mutations, ts, {}))

    def close(self) -> None:
        """Drop the spill files (``SortedRuns.close``)."""
        self._runs.close()


def _thrift_types() -> tuple[Any, Any]:
    from happybase.batch import BatchMutation, Mutation

    return Mutation, BatchMutation
