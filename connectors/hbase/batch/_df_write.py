"""``df.write.format("barrier-hbase")``: one batch write is one committed batch of a write series.

Which process runs what (pyspark 4.3, ``write_into_data_source.py`` and
``commit_data_source_write.py``): ``DataSource.writer`` runs in a planning worker on the
driver (:func:`plan_batch_write`); Spark pickles the returned :class:`HBaseBatchWriter`
to every task (:meth:`~HBaseBatchWriter.write`, executors) and to a commit worker on the
driver (:meth:`~HBaseBatchWriter.commit` / :meth:`~HBaseBatchWriter.abort`). So all
the writer holds is plain, picklable data.

The machinery is the streaming sink's: a write task is an :class:`HBaseTaskWriter` named
by ``TaskIdentity(series, batch id, partition id, plan id)`` (``_attempts``), and the
commit is :class:`Committer.commit`, conditional on the attempt. The plan id is an epoch
raised in the commit table once per chosen write (``raise_plan_id``), so a re-run of an
interrupted write abandons the attempt it finds and writes above it, and a task of the
interrupted run that still writes is fenced. A write whose (series, batch id) is
committed already writes nothing and commits nothing (rule 1 of ``_attempts``; the
planning finds it in the commit table or the sink's history, so an older batch of the
series is recognised too). The commit record carries the source offsets Spark's offset
log holds for the batch when ``write.checkpointLocation`` names a streaming query's
checkpoint (``hbase_batch_writer`` sets it), so lineage, ``starting_offsets_from_sink``
and group commits behind ``foreachBatch`` see the batch as they see a streaming sink's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ...._exceptions import ConfigError, SinkError
from ...._faults import fault_point
from ....barrier.markers import split_markers
from ...checkpointed._runs import CheckKey, validate_once
from ...storage._checkpoint_log import planned_batch
from ..client._connection import HBaseConnection
from ..client._connection_pool import connect, release
from ..sink._commit_table import CommitRecord, read_history, read_state
from ..sink._committer import HBaseCommitMessage
from ..sink._sink_function import HBaseSinkFunction, raise_plan_id
from ..sink._writer import HBaseTaskWriter, TaskIdentity
from ._options import WRITE_BATCH_ID, BatchWriteOptions, parse_batch_write_options

__all__ = ["HBaseBatchWriter", "plan_batch_write"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _BatchChoice:
    """The batch a write commits, and the commit that holds it already (a re-run), if any."""

    batch_id: int
    committed: CommitRecord | None


def plan_batch_write(options: dict[str, str], schema: StructType, overwrite: bool) -> HBaseBatchWriter:
    """Plan one batch write (driver, planning worker; once per ``save()``).

    Checks the options, the table and the commit table (once per process and options,
    as the streaming sink does at query start), decides the batch id, and raises the plan
    epoch. ``overwrite`` (``mode("overwrite")``) is refused: the sink upserts keys, and a
    truncation of a shared table cannot be made exactly once or undone.
    """
    if overwrite:
        raise ConfigError("barrier-hbase batch writes upsert rows by key and delete them with 'op.column'; "
                          "mode('overwrite') would truncate the table, which the sink does not do: use "
                          "mode('append')", option="mode")
    write = parse_batch_write_options(options)
    given = hashlib.sha256(json.dumps([sorted(write.sink_options.items()), schema.json()]).encode()).hexdigest()
    validate_once(CheckKey("barrier-hbase", write.sink.sink_id or "", f"series:{write.series}", given),
                  lambda: HBaseSinkFunction().validate(write.sink_options, schema))
    conn = connect(write.sink)
    try:
        chosen = _batch_to_write(conn, write)
    except BaseException:
        conn.close()
        raise
    release(conn)
    if chosen.committed is not None:
        log.info("sink %s: batch %d of series %s is committed already (sequence %d); this write writes nothing",
                 write.sink.sink_id, chosen.batch_id, write.series, chosen.committed.seq)
        plan = ""
    else:
        plan = raise_plan_id(write.sink_options)
    return HBaseBatchWriter(write, schema, chosen.batch_id, plan, chosen.committed is not None)


def _batch_to_write(conn: HBaseConnection, write: BatchWriteOptions) -> _BatchChoice:
    """The batch id and whether it is committed: one get, and a history scan only off the common path.

    The common paths read the sink row alone: no batch id given, or the series' next
    batch after its newest commit (``foreachBatch``), or a re-run of the newest. Only an
    older batch id, or a series whose newest commit is not the sink's newest, scans the
    sink's history (one row per commit).
    """
    sink_id, series, wanted = write.sink.sink_id or "", write.series, write.batch_id
    latest = read_state(conn, write.sink.commit_table, sink_id).commit
    if latest is not None and latest.query_id == series:
        if wanted is None:
            return _BatchChoice(latest.batch_id + 1, None)
        if wanted == latest.batch_id:
            return _BatchChoice(wanted, latest)
        if wanted > latest.batch_id:
            return _BatchChoice(wanted, None)
    elif latest is None:
        return _BatchChoice(wanted or 0, None)
    mine = [r for r in read_history(conn, write.sink.commit_table, sink_id) if r.query_id == series]
    if wanted is None:
        return _BatchChoice(mine[-1].batch_id + 1 if mine else 0, None)
    found = next((r for r in mine if r.batch_id == wanted), None)
    if found is None and mine and mine[-1].batch_id > wanted:
        raise ConfigError(f"sink {sink_id!r}: {WRITE_BATCH_ID} {wanted} of series {series!r} was never committed, "
                          f"and the series has committed batch {mine[-1].batch_id} since; batch ids of a series "
                          f"only grow (leave {WRITE_BATCH_ID} unset for the next one)", option=WRITE_BATCH_ID)
    return _BatchChoice(wanted, found)


class HBaseBatchWriter(DataSourceArrowWriter):
    """One chosen batch write (picklable): tasks write through the sink's task writer, the driver commits."""

    def __init__(self, write: BatchWriteOptions, schema: StructType, batch_id: int, plan_id: str,
                 committed: bool) -> None:
        self.write_options, self.schema = write, schema
        self.batch_id, self.plan_id, self.committed = batch_id, plan_id, committed

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """Executor, once per task: write the partition's rows in the batch's attempt.

        Marker rows (``barrier-kafka`` with ``barrierMarkers``) are dropped: a batch is
        one batch, its offsets come from Spark's offset log. A task of a committed batch
        writes nothing. Idempotent per (plan, partition), as a streaming task is.
        """
        from pyspark import TaskContext

        if self.committed:
            return WriterCommitMessage()  # Spark wants one; the commit ignores it
        ctx = TaskContext.get()
        if ctx is None:
            raise SinkError("barrier-hbase: HBaseBatchWriter.write runs in a Spark task (no task context)",
                            batch_id=self.batch_id)
        w = self.write_options
        writer = HBaseTaskWriter(w.sink, TaskIdentity(w.series, self.batch_id, ctx.partitionId(), self.plan_id))
        try:
            writer.begin()
            for batch in iterator:
                for item in split_markers(batch):
                    if isinstance(item, pa.RecordBatch):
                        writer.add(item)
            fault_point("batch_write.before_flush")
            return writer.snapshot(final=True)
        finally:
            writer.close()

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Driver (commit worker): write the commit record, conditional on the attempt; idempotent."""
        if self.committed:
            return
        w = self.write_options
        chosen = planned_batch(w.checkpoint_location, self.batch_id)
        if w.checkpoint_location and chosen is None:
            log.warning("sink %s batch %d: Spark's offset log at %s holds no Kafka offsets for this batch; the "
                        "commit record carries the previous commit's", w.sink.sink_id, self.batch_id,
                        w.checkpoint_location)
        offsets = chosen.offsets if chosen is not None else {}
        checkpoints = [chosen.checkpoint_id] if chosen is not None and chosen.checkpoint_id is not None else []
        fault_point("batch_write.after_flush_before_commit")
        fn = HBaseSinkFunction()
        fn.start(w.sink_options, self.schema)
        committer = fn.committer()
        committed = False
        try:
            committer.commit(_messages(messages), self.batch_id, offsets=offsets, source_checkpoints=checkpoints)
            committed = True
        finally:
            committer.close(keep=committed)
        fault_point("batch_write.after_commit_before_return")

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Driver: nothing to undo (the cells sit above the committed read bound; ``Committer.abort``)."""
        if self.committed:
            return
        fn = HBaseSinkFunction()
        fn.start(self.write_options.sink_options, self.schema)
        committer = fn.committer()
        try:
            committer.abort(_messages(messages), self.batch_id)
        finally:
            committer.close(keep=True)


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[HBaseCommitMessage]:
    return [m for m in messages if isinstance(m, HBaseCommitMessage)]
