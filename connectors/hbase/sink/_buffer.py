"""A write task's net change per row key, spilled to local disk past a memory bound, written once.

Why this shape. Exactly once needs every try of a task (a retry, a speculative copy, an
executor declared lost that still runs) to leave what one try leaves, whatever order its
rows arrive in: after a shuffle Spark gives a retry the same rows, but interleaves the
keys differently (remote blocks arrive in any order), and where one key's rows come
from several upstream tasks, their order too. Anything that depends on where in the
input a row sits -- flush boundaries, a key's "round" -- differs between tries. So the
task nets its *whole* input per key and writes each key once, at the end of its input:

* the net change of a key is a function of that key's own rows alone (``_RowChange``:
  whether the row was deleted, which of the sink's cells were deleted, the last value
  of every put cell; a null with ``sink.ignore-null-value`` leaves the cell as it was,
  whatever came before it in the batch). Which cells it deletes does not depend on the
  rows' order at all (a row delete anywhere, or the union of the cells nulled); only
  the put values can;
* every key of the task is written at the task's delete timestamp (the same on every
  try) and the put timestamp of the try's slot (``TaskClock``; ``note`` returns the
  slot, ``_writer``), so a delete followed by puts is a marker below the new values, and
  tries that saw a key's rows in the same order write the same markers and the same
  values; where they did not, the commit removes every try's puts but the committing
  one's (``_committer``);
* the writes go out in calls of at most ``max_rows`` rows or ``max_size`` bytes
  (``sink.buffer-flush.*``), each call one ``mutateRowsTs``: a call's rows are
  independent, so the calls of two tries may land in any interleaving.

Memory (issue 57). ``max_memory`` bounds what the task holds, whatever its row sizes and key
skew; the fixed overhead on top is measured and documented (docs/hbase-sink.md):

* the held keys are costed as CPython holds them (:func:`_cost`: the objects' headers, the
  dicts' tables, the value bytes), and a key's cost is its *net* change: a hot key's rows
  replace its values, so it costs one row, not one per row. Past ``max_memory`` the held
  keys are sorted and spilled as a run;
* every run lives in one unlinked temporary file, read back with ``pread``: a task has at
  most two spill files open (the one read, the one written), whatever its number of runs;
* runs are written in chunks cut where they reach ``max_memory / 64`` costed bytes (one
  change, when a single key is bigger), and the merge reads one chunk per run: a pass merges as
  many consecutive runs as their largest chunks fit in ``max_memory`` (at most
  :data:`MAX_FAN_IN`, at least two), and passes repeat until one takes every run. Equal
  keys net in run order, which is input order for that key, and :func:`net` is
  associative, so the passes change nothing in what is written.

Before anything is sent, ``note`` (when given, exactly once: ``_writer``) receives the
keys whose puts the task sends, as a stream: it records them in the commit table, is
refused once the task's attempt was replaced or is being committed (then nothing is
sent), and returns the try's put slot. By the time the stream ends, every key of the task
has passed ``keyed`` (when given), which decides the block the task writes in
(``_keyed``: the batch's shared block when every key hashes to the task) and keeps the
task's report of its keys' classes (``key_classes``), so ``note`` can record the block.

Any write failure raises :class:`FlushError`: Spark fails the task and retries it, and
the retry writes the same delete markers, and its puts at a slot of its own.
"""

from __future__ import annotations

import heapq
import logging
import marshal
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from sys import getsizeof
from typing import Any

from ...._exceptions import FlushError, SinkError
from ...._faults import fault_point
from ..client._connection import HBaseConnection
from ..client._errors import refusals
from ._keyed import KeyClasses
from ._timestamps import TaskClock

__all__ = ["FAULT_AFTER_PARTIAL_FLUSH", "KEY_OVERHEAD_BYTES", "MAX_FAN_IN", "MutationBuffer", "net"]

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
MAX_FAN_IN = 64  # the most runs one merge pass reads (more runs: another pass)
_LENGTH = struct.Struct(">Q")

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
                 keyed: tuple[KeyClasses, Callable[[dict[str, list[int]] | None], bool], TaskClock] | None = None,
                 ) -> None:
        self._conn = conn
        self._table = table.encode()
        self.clock = clock
        self._delete_columns = delete_columns  # what a row delete clears (``SinkLayout.delete_columns``)
        self.max_rows, self.max_size, self.max_memory = max_rows, max_size, max_memory
        self._chunk_bytes = max(1, max_memory // _CHUNKS_PER_BUDGET)
        self.batch_id = batch_id
        self._note = note
        self._slot = 0  # the put slot of this try (``note`` returns it)
        # The task's key classes, the test of whether they make it keyed, and the shared block's
        # clock it then writes with instead of ``clock`` (``_keyed``); decided once every key
        # passed, before ``note`` ends. ``key_classes``: the report (None: no key was written).
        self._keyed = keyed
        self.key_classes: dict[str, list[int]] | None = None
        # A key's net change; a key whose rows only put cells (most) is held as the bare dict of
        # its puts, with no _RowChange: the common path costs one dict per key.
        self._changes: dict[bytes, _RowChange | dict[bytes, bytes]] = {}
        self._held = 0  # the cost of _changes (``_cost`` and KEY_OVERHEAD_BYTES per key)
        self._runs: list[_Run] = []  # spilled runs in self._file, oldest first
        self._file = _RunFile()  # holds the runs (a file is created by the first spill)
        self._spare = _RunFile()  # a merge pass writes here, then the two swap
        self.written = False  # something was sent (the task's timestamps are in use)
        self.spilled_runs = 0
        self.merge_passes = 0  # passes before the last (which the note reads): 0 up to MAX_FAN_IN runs

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
        items = ((k, _frozen(changes.pop(k))) for k in sorted(changes))
        self._runs.append(self._file.write(items, self._chunk_bytes))
        self.spilled_runs += 1
        log.debug("spilled %d netted key(s) (~%d bytes) to run %d", count, held, len(self._runs))
        self._changes, self._held = {}, 0

    def _groups(self) -> list[list[_Run]]:
        """The runs cut into consecutive groups a merge pass can read at once.

        As many runs as their largest chunks fit in ``max_memory`` besides the pass's own
        chunk (its output, its marshalled copy, one chunk being read): at most
        :data:`MAX_FAN_IN`, at least two (a key bigger than the budget's share still merges).
        """
        budget = self.max_memory - 3 * self._chunk_bytes
        groups: list[list[_Run]] = [[]]
        size = 0
        for run in self._runs:
            group = groups[-1]
            if len(group) >= 2 and (len(group) >= MAX_FAN_IN or size + run.largest > budget):
                groups.append([])
                size = 0
            groups[-1].append(run)
            size += run.largest
        return groups

    def _one_pass_left(self) -> _RunFile:
        """Merge groups of runs into longer ones until one pass can read them all; their file."""
        while len(groups := self._groups()) > 1:
            src, out = self._file, self._spare
            self._runs = [out.write(_netted([src.read(r) for r in group]), self._chunk_bytes) for group in groups]
            src.clear()
            self._file, self._spare = out, src
            self.merge_passes += 1
            log.debug("merge pass %d: %d run(s) left", self.merge_passes, len(self._runs))
        return self._file

    def flush(self, *, final: bool = False) -> None:
        """Write everything at the end of the task's input (``final``); a barrier inside a task writes nothing.

        A barrier inside one Spark task is not a commit point (the batch commits as a whole
        on the driver), and writing there would split a key's rows by their position in
        the input: the one thing two tries of a task do not share.

        After spills, the held keys spill too (the merge then holds chunks only), merge
        passes leave runs one pass can read, and that pass writes a final run while the
        note takes the keys; the writes then read the final run once.
        """
        if not final or self.written or (not self._changes and not self._runs):
            return
        changes: Iterable[tuple[bytes, bool, Any, dict[bytes, bytes]]]
        if self._runs:
            self._spill()
            src, dst = self._one_pass_left(), self._spare
            out = _RunWriter(dst, self._chunk_bytes)

            check = self._keyed[0] if self._keyed is not None else None

            def keys() -> Iterator[bytes]:
                for item in _netted([src.read(r) for r in self._runs]):
                    out.add(item)
                    if check is not None:
                        check.add(item[0])
                    if item[1][2]:
                        yield item[0]
                self._settle()

            if self._note is not None:
                self._slot = self._note(keys())
            else:
                for _ in keys():
                    pass
            final_run = out.done()
            src.clear()
            self._runs = []
            changes = ((k, d, c, p) for k, (d, c, p) in dst.read(final_run))
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
        classes, keyed, shared = self._keyed
        classes.feed(keys)
        self.key_classes = None if classes.empty else classes.done()
        if keyed(self.key_classes):
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
        """Drop the spill files (unlinked from the start: they vanish when closed, or when the process dies)."""
        self._file.close()
        self._spare.close()
        self._runs = []


def _netted(streams: list[Iterator[tuple[bytes, Change]]]) -> Iterator[tuple[bytes, Change]]:
    """Runs (each in key order, oldest first) merged by key: every key once, netted in run order."""
    if len(streams) == 1:
        yield from streams[0]
        return
    current: tuple[bytes, Change] | None = None
    # (key, run) orders a key's changes by input: runs oldest first
    for key, _, change in heapq.merge(*(_numbered(n, s) for n, s in enumerate(streams))):
        if current is not None and current[0] == key:
            current = (key, net(current[1], change))
            continue
        if current is not None:
            yield current
        current = (key, change)
    if current is not None:
        yield current


def _numbered(n: int, items: Iterable[tuple[bytes, Change]]) -> Iterator[tuple[bytes, int, Change]]:
    return ((k, n, c) for k, c in items)


@dataclass(frozen=True)
class _Run:
    """A run's bytes in its file, and its largest chunk's cost (what reading the run holds)."""

    start: int
    end: int
    largest: int


class _RunFile:
    """Runs back to back in one temporary file in the executor's local temporary directory.

    Unlinked from the start, so nothing is left behind by a killed worker; read with
    ``pread`` at a run's offsets, so a task holds two files open (this one and the
    spare of a merge pass) whatever its number of runs: issue 57 ran out of descriptors
    at about 1,024 runs, one open file each.
    """

    def __init__(self) -> None:
        self._fd: int | None = None  # opened by the first append: most tasks never spill
        self.size = 0

    def _opened(self) -> int:
        if self._fd is None:
            with tempfile.TemporaryFile(prefix="sparkbarrier-hbase-run-", buffering=0) as f:
                self._fd = os.dup(f.fileno())  # the descriptor outlives the wrapper; the file is unlinked already
        return self._fd

    def write(self, items: Iterable[tuple[bytes, Change]], chunk_bytes: int) -> _Run:
        out = _RunWriter(self, chunk_bytes)
        for item in items:
            out.add(item)
        return out.done()

    def append(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._opened(), view, self.size)
            self.size += n
            view = view[n:]

    def read(self, run: _Run) -> Iterator[tuple[bytes, Change]]:
        """A run's changes in key order, one chunk in memory at a time (an item handed out is
        dropped from the chunk, so what the merge has passed on is freed as it goes)."""
        fd, pos = self._opened(), run.start
        while pos < run.end:
            (n,) = _LENGTH.unpack(_pread(fd, _LENGTH.size, pos))
            chunk: list[tuple[bytes, Change]] = marshal.loads(_pread(fd, n, pos + _LENGTH.size))
            pos += _LENGTH.size + n
            chunk.reverse()
            while chunk:
                yield chunk.pop()

    def clear(self) -> None:
        """Every run read: give the disk back."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        self.size = 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.size = 0


class _RunWriter:
    """Appends one run to a :class:`_RunFile`: chunks of changes in key order, each ``marshal``-led
    by its length, cut at ``chunk_bytes`` of :func:`_travel_cost` (by bytes, not by count: 4,096
    changes of 100 KB held 400 MB, issue 57)."""

    def __init__(self, file: _RunFile, chunk_bytes: int) -> None:
        self._file, self._chunk_bytes, self._start = file, chunk_bytes, file.size
        self._chunk: list[tuple[bytes, Change]] = []
        self._cost = self._largest = 0

    def add(self, item: tuple[bytes, Change]) -> None:
        self._chunk.append(item)
        self._cost += _travel_cost(*item)
        if self._cost >= self._chunk_bytes:
            self._dump()

    def _dump(self) -> None:
        data = marshal.dumps(self._chunk)
        self._chunk = []
        self._file.append(_LENGTH.pack(len(data)))
        self._file.append(data)
        self._largest, self._cost = max(self._largest, self._cost), 0

    def done(self) -> _Run:
        if self._chunk:
            self._dump()
        return _Run(self._start, self._file.size, self._largest)


def _pread(fd: int, n: int, pos: int) -> bytes:
    data = os.pread(fd, n, pos)
    while len(data) < n:  # a short read (Linux reads at most ~2 GiB at once)
        more = os.pread(fd, n - len(data), pos + len(data))
        if not more:
            raise SinkError(f"a spill file of the write task ended at {pos + len(data)} bytes, {n - len(data)} early")
        data += more
    return data


def _thrift_types() -> tuple[Any, Any]:
    from happybase.batch import BatchMutation, Mutation

    return Mutation, BatchMutation
