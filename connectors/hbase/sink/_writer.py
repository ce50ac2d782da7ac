"""Executor-side writer: Arrow batches → netted HBase mutations at deterministic timestamps.

Contract (one instance per write task, on the executor): the checkpointed-sink adapter
strips marker columns and calls :meth:`HBaseTaskWriter.snapshot` at every aligned
barrier and at the end of the task. Only the last snapshot (``final``) writes: the
task's netted keys, once, after its try noted them (:meth:`HBaseTaskWriter._note`);
a barrier's snapshot only reports (a barrier inside a task is not a commit point, see
``_buffer.MutationBuffer.flush``). Write errors surface there. Column values are encoded a whole column at
a time; per row only the key's net change is updated (see ``_buffer``). Deletes are
real HBase deletes: ``op.column = delete`` removes the row's cells in this sink's
columns (another writer's columns of the same family stay), a null with
``sink.ignore-null-value=false`` removes that cell.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from dataclasses import replace
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...._exceptions import FencedError, ProtocolError, SinkError
from ..._partitioners import hash_kind
from .._codec import encode_column
from .._options import HBaseSinkOptions
from ..client._connection_pool import connect, release
from ._attempts import Placement
from ._buffer import MutationBuffer
from ._column_layout import SinkLayout
from ._commit_table import ATTEMPT_COLUMN, TaskNote, check_and_put, delete_task_notes, write_note_chunks
from ._committer import HBaseCommitMessage, place_task
from ._keyed import KeyClasses, keyed_block, levels
from ._timestamps import TRY_SLOTS, TaskClock, batch_span_ms, check_block, task_block

__all__ = ["HBaseTaskWriter", "TaskIdentity"]

log = logging.getLogger(__name__)


class TaskIdentity:
    """Who is writing: the query, the Spark batch, the task's partition and the batch's plan.

    ``plan_id`` names the planned batch (the stream writer Spark pickled to its tasks):
    a retry of a task shares it, a replay after a driver restart has a later one
    (``_attempts``). Tasks given none share the empty plan, which sorts first.
    """

    def __init__(self, query_id: str, batch_id: int, partition_id: int, plan_id: str = "") -> None:
        self.query_id, self.batch_id, self.partition_id = query_id, batch_id, partition_id
        self.plan_id = plan_id


class HBaseTaskWriter:
    """Writes one task's rows: :meth:`begin`, :meth:`add` per data batch, :meth:`snapshot` per barrier.

    Driven by :class:`~._sink_function.HBaseSinkFunction` under the checkpointed-sink adapter
    (which splits markers and calls the snapshots); this module does not know that
    function, so the two do not import each other.
    """

    def __init__(self, opts: HBaseSinkOptions, identity: TaskIdentity) -> None:
        self._opts = opts
        self._id = identity
        self.sink_id = opts.sink_id or f"query-{identity.query_id}"
        self._conn = connect(opts, identity.partition_id)
        self._clean = False  # the last snapshot went through: the connection may be kept
        self._layout: SinkLayout | None = None
        self._clock: TaskClock | None = None
        self._buf: MutationBuffer | None = None
        self._msg: HBaseCommitMessage | None = None
        self._placement: Placement | None = None

    def begin(self) -> None:
        """Agree on the batch's timestamp base (one get, at most one checkAndPut).

        The task's block is its partition id: within one plan Spark gives a task the
        same rows on every retry (not always in the same order: the buffer nets them per
        key, so order does not matter), and a new plan writes in a new attempt (``_attempts``).
        """
        opts, ident = self._opts, self._id
        check_block(ident.partition_id, opts.max_tasks)  # before the attempt is recorded or a cell written
        placement = self._placement = place_task(self._conn, opts.commit_table, self.sink_id, ident.query_id,
                                         ident.batch_id, plan_id=ident.plan_id, fenced=opts.exactly_once,
                                         max_rows=opts.max_rows, max_size=opts.max_size,
                                         history_retain=opts.history_retain, writes=opts.write_shape(),
                                         span_ms=batch_span_ms(opts.max_tasks))
        # The task's own block; the buffer moves to a shared one if the task turns out keyed (``_keyed``).
        self._clock = TaskClock(placement.base_ms, task_block(
            ident.partition_id, levels=levels(placement.keyed_tasks, placement.key_residues)))
        self._msg = HBaseCommitMessage(self.sink_id, ident.query_id, ident.batch_id, ident.partition_id,
                                       placement.base_ms, placement.prev_seq,
                                       placement.replay_of_committed,
                                       flush_rows=placement.flush_rows, flush_bytes=placement.flush_bytes,
                                       kept_history=placement.kept_history, abandoned=list(placement.abandoned),
                                       unnoted=list(placement.unnoted),
                                       attempt_raw=placement.attempt_raw, reach_ms=placement.reach_ms)
        if placement.replay_of_committed:
            log.info("sink %s batch %d is committed already (a replay after a restart); task %d counts its rows "
                     "and writes nothing", self.sink_id, ident.batch_id, ident.partition_id)

    def _begun(self, call: str) -> tuple[HBaseCommitMessage, TaskClock]:
        """The attempt's message and clock; an explicit check (``assert`` vanishes under
        ``python -O``)."""
        if self._msg is None or self._clock is None:
            raise ProtocolError(f"HBaseTaskWriter.{call}() before begin()")
        return self._msg, self._clock

    def add(self, data: pa.RecordBatch) -> None:
        """Buffer a batch of data rows (no marker rows)."""
        msg, clock = self._begun("add")
        if not data.num_rows:
            return
        if msg.replay_of_committed:  # the batch is in the table already (see begin)
            msg.rows += data.num_rows
            return
        if self._buf is None:
            o = self._opts
            layout = self._layout_for(data.schema)
            placement = self._placement
            keyed = None
            if placement is not None and placement.keyed_tasks:
                part, tasks, key_hash = self._id.partition_id, placement.keyed_tasks, placement.key_hash
                residues = placement.key_residues

                def decide(classes: dict[str, list[int]] | None) -> TaskClock | None:
                    block = keyed_block(classes, key_hash=key_hash, tasks=tasks, partition=part, residues=residues)
                    return None if block is None else TaskClock(msg.base_ms, task_block(part, keyed_at=block))

                keyed = (KeyClasses(hash_kind(data.schema.field(layout.rowkey).type)), decide)
            self._buf = MutationBuffer(self._conn, o.table, clock, delete_columns=layout.delete_columns,
                                       max_rows=o.max_rows, max_size=o.max_size, max_memory=o.max_memory,
                                       batch_id=self._id.batch_id,
                                       note=self._note if msg.attempt_raw is not None and o.exactly_once else None,
                                       keyed=keyed)
        msg.rows += self._add(data, self._buf)

    def _note(self, keys: Iterator[bytes]) -> int:
        """Note this try's puts in the commit table before sending any, while the attempt is still ours.

        First the try claims a put slot of its task's block: the first of
        ``c:task-<base>-<partition>-s<slot>`` that does not exist, with a ``checkAndPut``
        (a try that finds all :data:`TRY_SLOTS` taken fails; its plan's next run starts
        afresh), written as "being written" (so its chunk rows are found and removed
        whatever happens next). Then the keys, in chunk rows of their own; then a
        ``checkAndPut`` of the cell with the chunk count, conditional on ``c:attempt``
        holding this task's attempt. Refused once a newer plan or another writer replaced
        it, or the driver began to commit it: the try then removes its note and sends
        nothing (:class:`FencedError`). At most ``1 + slot`` claims and one more write on
        the sink row per try, whatever the number of keys. Returns the slot the puts go to.
        """
        msg, _ = self._begun("flush")
        table, sink = self._opts.commit_table, self.sink_id
        pending = self._claim_slot(msg, secrets.token_hex(6))
        done = write_note_chunks(self._conn, table, sink, pending, keys)
        if self._buf is not None:  # every key has passed: the block is chosen (``MutationBuffer._settle``)
            done = replace(done, block=self._buf.clock.block)
        if not check_and_put(self._conn, table, sink, done.column(), msg.attempt_raw, done.to_bytes(),
                             check=ATTEMPT_COLUMN):
            delete_task_notes(self._conn, table, sink, [done])
            raise FencedError(
                f"sink {self.sink_id!r}: the attempt of batch {self._id.batch_id} this task writes in (timestamp "
                f"base {msg.base_ms}) was replaced by a newer plan or another writer, or is being committed; this "
                f"task (partition {self._id.partition_id}) is a leftover and stops before it writes anything",
                batch_id=self._id.batch_id)
        msg.notes += 1
        msg.slot = pending.slot
        return pending.slot

    def _claim_slot(self, msg: HBaseCommitMessage, owner: str) -> TaskNote:
        """The first free put slot of this task's block, claimed by creating its note cell."""
        table, sink = self._opts.commit_table, self.sink_id
        for slot in range(TRY_SLOTS):
            note = TaskNote(msg.base_ms, msg.partition_id, f"s{slot}", owner=owner)
            if check_and_put(self._conn, table, sink, note.column(), None, note.to_bytes()):
                return note
        raise SinkError(
            f"sink {self.sink_id!r}: task {self._id.partition_id} of batch {self._id.batch_id} has had "
            f"{TRY_SLOTS} tries in one plan (retries and speculative copies), each with its own put timestamp; "
            f"no slot is left. Restart the query: its next run plans the batch afresh",
            batch_id=self._id.batch_id)

    def snapshot(self, *, final: bool = False) -> HBaseCommitMessage:
        """Report what is written so far; with ``final`` (the end of the task's input) first write it all.

        A barrier's snapshot writes nothing (``_buffer.MutationBuffer.flush``): the batch
        commits as a whole on the driver.
        """
        msg, _ = self._begun("snapshot")
        if self._buf is not None:
            self._buf.flush(final=final)
            if self._buf.written:
                msg.ts_end = self._buf.clock.block_end()
                msg.key_classes = self._buf.key_classes
        self._clean = final
        return replace(msg)

    def close(self) -> None:
        """Keep the connection for the next task when the task ended cleanly (``_connection_pool``)."""
        if self._buf is not None:
            self._buf.close()
        if self._clean:
            release(self._conn)
        else:
            self._conn.close()

    def _layout_for(self, schema: pa.Schema) -> SinkLayout:
        if self._layout is None:
            o = self._opts
            self._layout = SinkLayout.build(schema, rowkey=o.rowkey, op_column=o.op_column,
                                            default_family=o.column_family, mapping=o.explicit_mapping())
        return self._layout

    def _add(self, data: pa.RecordBatch, buf: MutationBuffer) -> int:
        """Buffer the rows of ``data`` (marker columns already stripped); returns the row count."""
        n: int = data.num_rows
        layout = self._layout_for(data.schema)
        key_arr = data.column(layout.rowkey)
        if key_arr.null_count:
            raise SinkError(f"column {layout.rowkey!r} (the row key) is null in {key_arr.null_count} row(s)",
                            batch_id=self._id.batch_id)
        keys = cast(list[bytes], encode_column(key_arr))  # null keys were rejected just above
        if layout.op_column is not None:
            ops = pc.utf8_lower(data.column(layout.op_column)).to_pylist()
            bad = set(ops) - {None, "upsert", "delete"}
            if bad:
                raise SinkError(f"column {layout.op_column!r} holds {sorted(bad)}; allowed: upsert, delete "
                                "(null means upsert)", batch_id=self._id.batch_id)
        else:
            ops = None
        cols = [(t.column, encode_column(data.column(t.name))) for t in layout.targets]
        sizes = _row_sizes(data, layout, n)
        keep_nulls = not self._opts.ignore_null_value
        upsert, delete_row = buf.upsert, buf.delete_row
        for i in range(n):
            if ops is not None and ops[i] == "delete":
                delete_row(keys[i], sizes[i])
                continue
            puts: list[tuple[bytes, bytes]] = []
            deletes: list[bytes] = []
            for column, values in cols:
                v = values[i]
                if v is not None:
                    puts.append((column, v))
                elif keep_nulls:
                    deletes.append(column)
            if puts or deletes:
                upsert(keys[i], puts, deletes, sizes[i])
        return n


def _row_sizes(data: pa.RecordBatch, layout: SinkLayout, n: int) -> list[int]:
    """Approximate bytes per row (values + column names), computed column-wise.

    From the columns' offset buffers with numpy, not pyarrow compute with Python
    scalars: those go through pyarrow's pandas shim, which imports pandas into the
    Python worker on its first batch (see ``.._codec._fixed``). A null's length counts
    as whatever its offsets say (zero as Arrow writers make it): sizes only decide when
    to flush.
    """
    total = np.full(n, len(layout.targets) * 16 + 16, dtype=np.int64)
    for name in [layout.rowkey] + [t.name for t in layout.targets]:
        col = data.column(name)
        kind = col.type
        if pa.types.is_string(kind) or pa.types.is_binary(kind):
            total += np.diff(np.frombuffer(col.buffers()[1], dtype=np.int32, count=col.offset + n + 1)[col.offset:])
        elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
            total += np.diff(np.frombuffer(col.buffers()[1], dtype=np.int64, count=col.offset + n + 1)[col.offset:])
        else:
            total += 8
    return cast("list[int]", total.tolist())
