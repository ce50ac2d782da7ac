"""Executor side: read exactly one planned offset range into Arrow batches.

Contract (every client path, selected by ``kafkaConsumer.client``):
- yields every record with ``start <= offset < end`` of one topic-partition, in
  offset order, none outside the range, as ``pyarrow.RecordBatch``es of at most
  ``arrowBatchSize`` rows built column-wise (memory bounded by the batch size and
  the client's prefetch limits);
- with ``barrierMarkers=true``, if the range ends a channel's part of the checkpoint,
  a barrier marker row follows the last data row;
- stops when the consumer *position* reaches ``end``, not when a record with
  offset ``end - 1`` is seen: compacted topics have gaps and under
  ``read_committed`` aborted records and transaction markers are never returned;
- offsets gone from Kafka (retention, deleted topic) raise
  :class:`DataLossError` with ``failOnDataLoss=true``, else are skipped with a
  warning;
- no progress for ``kafkaConsumer.pollTimeoutMs`` raises :class:`SourceError`.

The consumer is group-less (assign + seek, never joins, never commits) and created
inside ``read()``, on the executor. The client modules are imported only there (the
driver loads the compiled module only to check ``kafkaConsumer.client=native``); the
choice is made by :mod:`._reader_choice`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ....barrier.markers import CheckpointBarrier, marker_batch
from .._options import KafkaSourceOptions
from ._offset_range import KafkaRangePartition
from ._reader_choice import reader_for

__all__ = ["KafkaRangePartition", "read_range"]


def read_range(options: KafkaSourceOptions, part: KafkaRangePartition,
               schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` (then its barrier marker) as Arrow batches."""
    if part.end > part.start:
        yield from reader_for(options)(options, part, schema)
    if part.emit_barrier and options.barrier_markers:
        barrier = CheckpointBarrier(part.checkpoint_id, part.timestamp_ms, part.channel, part.end)
        yield marker_batch([barrier], schema)
