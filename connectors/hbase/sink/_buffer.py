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

Memory. Past ``max_memory`` bytes (an estimate of the netted changes held, values and
per-key overhead) the netted changes are sorted by key and spilled to a run file in the
executor's local temporary directory; at the end the runs merge by key (equal keys in
run order, which is input order for that key), so a task's memory is bounded by
``sink.buffer.max-memory`` and the merge, not by its number of distinct keys.

Before anything is sent, ``note`` (when given, exactly once: ``_writer``) receives the
keys whose puts the task sends, as a stream: it records them in the commit table, is
refused once the task's attempt was replaced or is being committed (then nothing is
sent), and returns the try's put slot.

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
from typing import IO, Any

from ...._exceptions import FlushError, SinkError
from ...._faults import fault_point
from ..client._connection import HBaseConnection
from ..client._errors import refusals
from ._timestamps import TaskClock

__all__ = ["FAULT_AFTER_PARTIAL_FLUSH", "KEY_OVERHEAD_BYTES", "MutationBuffer", "net"]

log = logging.getLogger(__name__)

FAULT_AFTER_PARTIAL_FLUSH = "hbase.after_partial_flush"
# What one held key costs besides its bytes (the change object, its dict and set, the
# key's own object): the memory estimate that decides when to spill.
KEY_OVERHEAD_BYTES = 400
_LENGTH = struct.Struct(">Q")
_RUN_CHUNK = 4096  # changes per marshalled chunk of a run file (the merge reads one chunk per run at a time)

# A net change as it travels through runs and the merge: (deleted, cell deletes, puts).
Change = tuple[bool, frozenset[bytes], dict[bytes, bytes]]


class _RowChange:
    """The net effect of the task's rows so far on one row key."""

    __slots__ = ("cell_deletes", "deleted", "puts")

    def __init__(self) -> None:
        self.deleted = False
        self.cell_deletes: set[bytes] | None = None  # most keys never delete a cell: no set for them
        self.puts: dict[bytes, bytes] = {}

    def frozen(self) -> Change:
        return self.deleted, frozenset(self.cell_deletes or ()), self.puts

    @classmethod
    def of(cls, puts: dict[bytes, bytes]) -> _RowChange:
        change = cls()
        change.puts = puts
        return change


_NO_CELLS: frozenset[bytes] = frozenset()


def _frozen(change: _RowChange | dict[bytes, bytes]) -> Change:
    """A held change as it travels: a key that only ever put cells is held as its dict of puts."""
    return (False, _NO_CELLS, change) if type(change) is dict else change.frozen()  # type: ignore[union-attr]


def net(earlier: Change, later: Change) -> Change:
    """The change of ``earlier`` then ``later`` on one key (the merge of two runs).

    A row delete in ``later`` replaces everything before it; otherwise ``later``'s cell
    deletes remove ``earlier``'s puts of those cells and its puts overwrite them. A cell
    delete after a row delete is masked by it already (as ``MutationBuffer.upsert`` keeps it).
    """
    deleted, cell_deletes, puts = later
    if deleted:
        return later
    e_deleted, e_cells, e_puts = earlier
    merged = {c: v for c, v in e_puts.items() if c not in cell_deletes}
    merged.update(puts)
    return e_deleted, (e_cells if e_deleted else e_cells | cell_deletes), merged


class MutationBuffer:
    """One task's netted row changes: held, spilled past ``max_memory``, written once by :meth:`flush`."""

    def __init__(self, conn: HBaseConnection, table: str, clock: TaskClock, *, delete_columns: tuple[bytes, ...],
                 max_rows: int, max_size: int, max_memory: int = 256 << 20, batch_id: int | None = None,
                 note: Callable[[Iterator[bytes]], int] | None = None) -> None:
        self._conn = conn
        self._table = table.encode()
        self.clock = clock
        self._delete_columns = delete_columns  # what a row delete clears (``SinkLayout.delete_columns``)
        self.max_rows, self.max_size, self.max_memory = max_rows, max_size, max_memory
        self.batch_id = batch_id
        self._note = note
        self._slot = 0  # the put slot of this try (``note`` returns it)
        # A key's net change; a key whose rows only put cells (most) is held as the bare dict of
        # its puts, with no _RowChange: the common path costs one dict per key.
        self._changes: dict[bytes, _RowChange | dict[bytes, bytes]] = {}
        self._held = 0  # estimated bytes of _changes
        self._runs: list[IO[bytes]] = []  # spilled runs, oldest first
        self.written = False  # something was sent (the task's timestamps are in use)
        self.spilled_runs = 0

    def delete_row(self, key: bytes, nbytes: int) -> None:
        change = self._change(key, nbytes)
        change.deleted = True
        change.cell_deletes = None
        change.puts.clear()

    def upsert(self, key: bytes, puts: list[tuple[bytes, bytes]], deletes: list[bytes], nbytes: int) -> None:
        held = self._changes.get(key)
        if held is None:
            if not deletes:
                if self._held >= self.max_memory:
                    self._spill()
                self._changes[key] = dict(puts)
                self._held += KEY_OVERHEAD_BYTES + len(key) + nbytes
                return
            change = self._new(key, nbytes)
        else:
            self._held += nbytes
            if type(held) is dict:
                if not deletes:
                    held.update(puts)
                    return
                change = self._changes[key] = _RowChange.of(held)
            else:
                change = held  # type: ignore[assignment]
        if deletes:
            for column in deletes:
                change.puts.pop(column, None)
                if not change.deleted:  # a row delete of this task already masks the cell
                    if change.cell_deletes is None:
                        change.cell_deletes = set()
                    change.cell_deletes.add(column)
        change.puts.update(puts)

    def _change(self, key: bytes, nbytes: int) -> _RowChange:
        change = self._changes.get(key)
        if change is None:
            return self._new(key, nbytes)
        self._held += nbytes
        if type(change) is dict:
            change = self._changes[key] = _RowChange.of(change)
        return change  # type: ignore[return-value]

    def _new(self, key: bytes, nbytes: int) -> _RowChange:
        if self._held >= self.max_memory:
            self._spill()
        change = self._changes[key] = _RowChange()
        self._held += KEY_OVERHEAD_BYTES + len(key) + nbytes
        return change

    def _spill(self) -> None:
        """Write the held changes, sorted by key, to a run file in the local temporary directory."""
        self._runs.append(_write_run((k, _frozen(c)) for k, c in sorted(self._changes.items())))
        self.spilled_runs += 1
        log.debug("spilled %d netted key(s) (~%d bytes) to run %d", len(self._changes), self._held, len(self._runs))
        self._changes, self._held = {}, 0

    def _merged(self) -> Iterator[tuple[bytes, Change]]:
        """The runs and the held keys merged by key: every key once, with its net change."""
        held = ((k, _frozen(c)) for k, c in sorted(self._changes.items()))
        # (key, run) orders a key's changes by input: runs oldest first, the held keys last
        streams = [_numbered(i, _read_run(run)) for i, run in enumerate(self._runs)]
        streams.append(_numbered(len(self._runs), held))
        current: tuple[bytes, Change] | None = None
        for key, _, change in heapq.merge(*streams):
            if current is not None and current[0] == key:
                current = (key, net(current[1], change))
                continue
            if current is not None:
                yield current
            current = (key, change)
        if current is not None:
            yield current

    def flush(self, *, final: bool = False) -> None:
        """Write everything at the end of the task's input (``final``); a barrier inside a task writes nothing.

        A barrier inside one Spark task is not a commit point (the batch commits as a whole
        on the driver), and writing there would split a key's rows by their position in
        the input: the one thing two tries of a task do not share.

        After spills, one pass merges the runs into a final run while the note takes the
        keys; the writes then read the final run once.
        """
        if not final or self.written or (not self._changes and not self._runs):
            return
        changes: Iterable[tuple[bytes, bool, Any, dict[bytes, bytes]]]
        if self._runs:
            out = _RunWriter()

            def keys() -> Iterator[bytes]:
                for item in self._merged():
                    out.add(item)
                    if item[1][2]:
                        yield item[0]

            if self._note is not None:
                self._slot = self._note(keys())
            else:
                for _ in keys():
                    pass
            run = out.done()
            self.close()
            self._runs, self._changes, self._held = [run], {}, 0
            changes = ((k, d, c, p) for k, (d, c, p) in _read_run(run))
        else:
            if self._note is not None:
                self._slot = self._note(k for k, c in self._changes.items() if _frozen(c)[2])
            changes = ((k, *_frozen(c)) for k, c in self._changes.items())
        self.written = True
        self._write(changes)
        self.close()
        self._changes, self._held = {}, 0

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
        self._send(deletes, self.clock.delete_ts(0))
        self._send(puts, self.clock.slot_put_ts(self._slot))
        fault_point(FAULT_AFTER_PARTIAL_FLUSH, fail=lambda m: FlushError(m, batch_id=self.batch_id))

    def _send(self, mutations: list[object], ts: int) -> None:
        if not mutations:
            return
        with refusals(f"writing {len(mutations)} row(s) to HBase table {self._table.decode()!r} "
                      f"at timestamp {ts} failed", error=FlushError, also=(SinkError,), batch_id=self.batch_id):
            self._conn.call(lambda c: c.client.mutateRowsTs(self._table, mutations, ts, {}))

    def close(self) -> None:
        """Drop spilled runs (their files vanish when closed)."""
        for run in self._runs:
            run.close()
        self._runs = []


def _numbered(n: int, items: Iterable[tuple[bytes, Change]]) -> Iterator[tuple[bytes, int, Change]]:
    return ((k, n, c) for k, c in items)


class _RunWriter:
    """A run file in the local temporary directory: chunks of changes in key order, each
    ``marshal``-led by its length (one ``read`` and one ``loads`` per chunk when read back).

    Kept open until the task ends (closed by the buffer); the file vanishes when closed.
    """

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="sparkbarrier-hbase-run-")  # noqa: SIM115
        self._chunk: list[tuple[bytes, Change]] = []

    def add(self, item: tuple[bytes, Change]) -> None:
        self._chunk.append(item)
        if len(self._chunk) >= _RUN_CHUNK:
            self._dump()

    def _dump(self) -> None:
        data = marshal.dumps(self._chunk)
        self.file.write(_LENGTH.pack(len(data)))
        self.file.write(data)
        self._chunk = []

    def done(self) -> IO[bytes]:
        if self._chunk:
            self._dump()
        self.file.flush()
        return self.file


def _write_run(items: Iterable[tuple[bytes, Change]]) -> IO[bytes]:
    out = _RunWriter()
    for item in items:
        out.add(item)
    return out.done()


def _read_run(run: IO[bytes]) -> Iterator[tuple[bytes, Change]]:
    """A run file's changes in key order, one chunk in memory at a time (its own descriptor,
    so a run can be read while another pass reads it too)."""
    with os.fdopen(os.dup(run.fileno()), "rb", closefd=True) as f:
        f.seek(0)
        while True:
            head = f.read(_LENGTH.size)
            if not head:
                return
            (n,) = _LENGTH.unpack(head)
            chunk: list[tuple[bytes, Change]] = marshal.loads(f.read(n))
            yield from chunk


def _thrift_types() -> tuple[Any, Any]:
    from happybase.batch import BatchMutation, Mutation

    return Mutation, BatchMutation
