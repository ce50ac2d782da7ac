"""Executor side of a checkpointed sink: one write task feeds one function through an InputProcessor.

Per task (Spark's ``write(iterator)``): a fresh function instance, ``initialize_state``
once with the batch, partition and attempt; every Arrow batch is split at marker rows
and fed to an :class:`~sparkbarrier.barrier.InputProcessor` (exactly-once alignment or
at-least-once tracking, option ``delivery.guarantee``), which hands data to ``invoke`` and
calls ``snapshot_state`` when a source checkpoint's barriers are in. At the end of the input
the processor releases what it still buffers, the function hears ``end_of_input`` and
the task takes a last snapshot if data arrived after the previous one (or always, when
``end_of_input`` asked for it); ``close`` runs whatever happened. Every snapshot's handle goes back to the driver
in the task's commit message, with the source offsets the barriers carried.

Two ids (docs/ids.md). The InputProcessor speaks the single-process
:class:`~sparkbarrier.barrier.CheckpointedFunction` protocol, keyed by the *source
checkpoint id* its barriers carry; the sink's methods take Spark's *batch id*.
:class:`_SinkAsFunction` is the one bridge: a snapshot at a source checkpoint is recorded
as that id in the commit message (``source_checkpoints``) and taken as the sink's
snapshot for the task's ``batch_id``.

Channels. A data row's channel is ``"<topic>:<partition>"`` when the input has the
``barrier-kafka`` columns ``topic`` and ``partition`` (the channel string its barriers
carry), else the task is one channel (``"input"``) and every barrier counts on it:
a repeat of the newest source checkpoint id is then another source partition's copy of
the same barrier and is skipped. Channels are added as they first appear; in Spark a
task's input is its partitions one after another (``coalesce``, ``union``), so a
channel first seen during an alignment has not delivered that barrier yet and is
waited for.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..._exceptions import SinkError
from ..._faults import fault_point
from ...barrier import (
    CheckpointBarrier,
    DeliveryGuarantee,
    InitializationContext,
    InputProcessor,
    Marker,
    split_markers,
)
from ...barrier._sink import CheckpointedSink, SinkContext

__all__ = ["SINGLE_CHANNEL", "TaskCommitMessage", "run_task"]

log = logging.getLogger(__name__)

SINGLE_CHANNEL = "input"


@dataclass
class TaskCommitMessage:
    """One task's report to the driver (picklable; Spark wraps it as a WriterCommitMessage)."""

    query_id: str
    batch_id: int
    partition_id: int
    attempt: int
    handles: list[object] = field(default_factory=list)  # the sink's own, passed through to the driver
    source_offsets: dict[str, int] = field(default_factory=dict)
    source_checkpoints: list[int] = field(default_factory=list)
    rows: int = 0


class _SinkAsFunction:
    """A task's :class:`CheckpointedSink` as the InputProcessor's ``CheckpointedFunction``.

    The bridge between the two ids, and the only one. The InputProcessor calls the
    ``CheckpointedFunction`` methods with *source checkpoint ids* (what its barriers
    carry); the sink takes Spark's *batch id*. A snapshot at ``checkpoint_id``
    records that id in the commit message and snapshots the sink for the task's
    ``batch_id`` (:meth:`snapshot_batch`), so one task may snapshot one batch several
    times. Source checkpoints' notifications stop here: the sink is notified on the
    driver, once per batch (``_driver_commit.py``).
    """

    def __init__(self, fn: CheckpointedSink, msg: TaskCommitMessage) -> None:
        self.fn, self.msg = fn, msg
        self.dirty = False
        self.last_checkpoint_id: int | None = None

    def initialize_state(self, _context: InitializationContext) -> None:  # done by run_task with the SinkContext
        pass

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.msg.source_checkpoints.append(checkpoint_id)
        self.snapshot_batch()

    def snapshot_batch(self) -> None:
        """The sink's snapshot for Spark batch ``msg.batch_id``; its handle goes to the driver."""
        fault_point("sink.before_flush")
        handle = self.fn.snapshot_state(self.msg.batch_id)
        if handle is not None:
            self.msg.handles.append(handle)
        self.dirty = False

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:  # driver-side in Spark
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        log.info("task %d: alignment of source checkpoint %d declined; its data goes into the next "
                 "snapshot of batch %d", self.msg.partition_id, checkpoint_id, self.msg.batch_id)

    def downstream(self, _channel: Hashable, batch: pa.RecordBatch) -> None:
        self.fn.invoke(batch)
        self.msg.rows += batch.num_rows
        self.dirty = True


def _has_channel_columns(schema: pa.Schema) -> bool:
    return "topic" in schema.names and "partition" in schema.names


def _channel_runs(batch: pa.RecordBatch) -> list[tuple[str, pa.RecordBatch]]:
    """Split data rows into runs of one channel each, by the barrier-kafka columns."""
    channel = pc.binary_join_element_wise(batch.column("topic"), pc.cast(batch.column("partition"), pa.string()),
                                          ":")
    values = channel.to_pylist()
    out, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            out.append((values[start], batch.slice(start, i - start)))
            start = i
    return out


class _Feeder:
    """Creates the InputProcessor with the first channel seen and adds later ones."""

    def __init__(self, function: _SinkAsFunction, guarantee: DeliveryGuarantee) -> None:
        self.function, self.guarantee = function, guarantee
        self.processor: InputProcessor | None = None

    def feed(self, channel: str, element: pa.RecordBatch | Marker) -> None:
        if self.processor is None:
            self.processor = InputProcessor([channel], self.function, self.function.downstream,
                                            guarantee=self.guarantee)
        else:
            self.processor.add_channel(channel)
        self.processor.process(channel, element)

    def end(self) -> None:
        if self.processor is not None:
            self.processor.end_of_input()


def run_task(fn: CheckpointedSink, context: SinkContext, batches: Iterator[pa.RecordBatch], *,
             guarantee: DeliveryGuarantee) -> TaskCommitMessage:
    """Feed one task's input through ``fn``; returns the commit message for the driver."""
    msg = TaskCommitMessage(context.query_id, context.batch_id, context.partition_id, context.attempt)
    try:
        _run(fn, context, batches, msg, guarantee)
    finally:
        fn.close()
    return msg


def _run(fn: CheckpointedSink, context: SinkContext, batches: Iterator[pa.RecordBatch], msg: TaskCommitMessage,
         guarantee: DeliveryGuarantee) -> None:
    fn.initialize_state(context)
    function = _SinkAsFunction(fn, msg)
    feeder = _Feeder(function, guarantee)
    for batch in batches:
        single = not _has_channel_columns(batch.schema)
        for piece in split_markers(batch):
            if isinstance(piece, pa.RecordBatch):
                if piece.num_rows:
                    for channel, run in ([(SINGLE_CHANNEL, piece)] if single else _channel_runs(piece)):
                        feeder.feed(channel, run)
                continue
            if isinstance(piece, CheckpointBarrier):
                if piece.channel is not None and piece.next_offset is not None:
                    prev = msg.source_offsets.get(piece.channel, piece.next_offset)
                    msg.source_offsets[piece.channel] = max(prev, int(piece.next_offset))
                last = function.last_checkpoint_id
                if single and last is not None and piece.checkpoint_id <= last:
                    continue  # another source partition's copy of a barrier already counted
                function.last_checkpoint_id = piece.checkpoint_id
            marker_channel = SINGLE_CHANNEL if single else piece.channel
            if marker_channel is None:
                raise SinkError(f"a {type(piece).__name__} marker without a channel reached the sink",
                                batch_id=context.batch_id)
            feeder.feed(marker_channel, piece)
    feeder.end()
    always = fn.end_of_input()  # True: the function holds data back, its last snapshot follows always
    if function.dirty or not msg.handles or always:
        function.snapshot_batch()
