"""Executor-side writer: Arrow batches → buffered HBase mutations at deterministic timestamps.

Contract (one instance per write task, unpickled on the executor): marker columns are
stripped; a barrier row flushes everything before it (Flink's snapshot at the barrier:
unconditional, errors surface here) and adds its channel's next offset to the commit
message; the end of the task flushes too. Column values are encoded a whole column at
a time; only the final ``BatchMutation`` objects are built per row.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..._exceptions import SinkError
from ..._faults import fault_point
from ...barrier.markers import CheckpointBarrier, split_markers
from ._buffer import MutationBuffer
from ._committer import HBaseCommitMessage, plan_attempt
from ._connection import HBaseConnection
from ._encoding import encode_column
from ._layout import SinkLayout
from ._options import HBaseSinkOptions
from ._timestamps import STRIDE, GenerationCounter

__all__ = ["HBaseTaskWriter", "TaskIdentity"]

log = logging.getLogger(__name__)


class TaskIdentity:
    """Who is writing: from Spark's TaskContext, or given explicitly (tests, benchmarks)."""

    def __init__(self, query_id: str, batch_id: int, partition_id: int) -> None:
        self.query_id, self.batch_id, self.partition_id = query_id, batch_id, partition_id

    @classmethod
    def from_task_context(cls) -> TaskIdentity:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise SinkError("barrier-hbase write() ran outside a Spark task")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        query = ctx.getLocalProperty("sql.streaming.queryId")
        if batch is None or query is None:
            raise SinkError("barrier-hbase is a streaming sink: no micro-batch id in the task context")
        return cls(query, int(batch), ctx.partitionId())


class HBaseTaskWriter:
    """Writes one task's rows; :meth:`run` returns its commit message."""

    def __init__(self, opts: HBaseSinkOptions, identity: TaskIdentity) -> None:
        self._opts = opts
        self._id = identity
        self.sink_id = opts.sink_id or f"query-{identity.query_id}"
        self._conn = HBaseConnection.from_options(opts)
        self._layout: SinkLayout | None = None
        self._gens = GenerationCounter(identity.partition_id)
        from happybase.batch import BatchMutation, Mutation

        self._Mutation = Mutation
        self._BatchMutation = BatchMutation

    def run(self, batches: Iterator[pa.RecordBatch]) -> HBaseCommitMessage:
        opts, ident = self._opts, self._id
        try:
            plan = plan_attempt(self._conn, opts.commit_table, self.sink_id, ident.query_id,
                                ident.batch_id, fenced=opts.exactly_once)
            base = plan.seq * STRIDE
            buf = MutationBuffer(self._conn, opts.table, max_rows=opts.max_rows, max_size=opts.max_size,
                                 interval_ms=opts.interval_ms, checkpoint_id=ident.batch_id)
            msg = HBaseCommitMessage(self.sink_id, ident.query_id, ident.batch_id, ident.partition_id,
                                     plan.seq, plan.prev_seq, plan.gap_from, plan.replay_of_committed)
            checkpoints: set[int] = set()
            for batch in batches:
                for piece in split_markers(batch):
                    if isinstance(piece, pa.RecordBatch):
                        msg.rows += self._add(piece, buf, base)
                    elif isinstance(piece, CheckpointBarrier):
                        fault_point("sink.before_flush")
                        buf.flush()  # snapshot at the barrier: unconditional
                        checkpoints.add(piece.checkpoint_id)
                        if piece.channel is not None and piece.next_offset is not None:
                            prev = msg.offsets.get(piece.channel, piece.next_offset)
                            msg.offsets[piece.channel] = max(prev, int(piece.next_offset))
                if buf.interval_due():
                    buf.flush()
            buf.flush()
            msg.checkpoint_ids = sorted(checkpoints)
            msg.max_ts = base + self._gens.current if msg.rows else None
            return msg
        finally:
            self._conn.close()

    def _layout_for(self, schema: pa.Schema) -> SinkLayout:
        if self._layout is None:
            o = self._opts
            self._layout = SinkLayout.build(schema, rowkey=o.rowkey, op_column=o.op_column,
                                            default_family=o.column_family, mapping=o.explicit_mapping())
        return self._layout

    def _add(self, data: pa.RecordBatch, buf: MutationBuffer, base: int) -> int:
        """Buffer the rows of ``data`` (marker columns already stripped); returns the row count."""
        n = data.num_rows
        if n == 0:
            return 0
        layout = self._layout_for(data.schema)
        key_arr = data.column(layout.rowkey)
        if key_arr.null_count:
            raise SinkError(f"column {layout.rowkey!r} (the row key) is null in {key_arr.null_count} row(s)",
                            checkpoint_id=self._id.batch_id)
        keys = encode_column(key_arr)
        if layout.op_column is not None:
            ops = pc.utf8_lower(data.column(layout.op_column)).to_pylist()
            bad = set(ops) - {None, "upsert", "delete"}
            if bad:
                raise SinkError(f"column {layout.op_column!r} holds {sorted(bad)}; allowed: upsert, delete "
                                "(null means upsert)", checkpoint_id=self._id.batch_id)
        else:
            ops = None
        cols = [(t.column, t.tombstone, encode_column(data.column(t.name))) for t in layout.targets]
        sizes = _row_sizes(data, layout, n)
        tombstones = layout.row_tombstones
        keep_nulls = not self._opts.ignore_null_value
        Mutation, BatchMutation, gens, add = self._Mutation, self._BatchMutation, self._gens, buf.add
        for i in range(n):
            key = keys[i]
            ts = base + gens.next(key)
            if ops is not None and ops[i] == "delete":
                muts = [Mutation(column=c, value=b"") for c in tombstones]
            else:
                muts = []
                for column, tomb, values in cols:
                    v = values[i]
                    if v is not None:
                        muts.append(Mutation(column=column, value=v))
                    elif keep_nulls:
                        muts.append(Mutation(column=tomb, value=b""))
                if not muts:
                    continue
            add(ts, BatchMutation(row=key, mutations=muts), sizes[i])
        return n


def _row_sizes(data: pa.RecordBatch, layout: SinkLayout, n: int) -> list[int]:
    """Approximate bytes per row (values + column names), computed column-wise."""
    fixed = len(layout.targets) * 16 + 16
    total: Any = pa.array([fixed] * n, pa.int64())
    for name in [layout.rowkey] + [t.name for t in layout.targets]:
        col = data.column(name)
        if pa.types.is_string(col.type) or pa.types.is_binary(col.type):
            total = pc.add(total, pc.binary_length(col).fill_null(0).cast(pa.int64()))
        else:
            total = pc.add(total, 8)
    return total.to_pylist()
