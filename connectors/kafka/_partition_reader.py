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
driver loads the compiled module only to check ``kafkaConsumer.client=native``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import cache

import pyarrow as pa

from ..._exceptions import ConfigError
from ...barrier.markers import CheckpointBarrier, marker_batch
from ._client_config import ConsumerClient
from ._options import KafkaSourceOptions
from ._range import KafkaRangePartition

__all__ = ["KafkaRangePartition", "read_range"]

log = logging.getLogger(__name__)


def _read_records(options: KafkaSourceOptions) -> Callable[
        [KafkaSourceOptions, KafkaRangePartition, pa.Schema], Iterator[pa.RecordBatch]]:
    """The read path ``kafkaConsumer.client`` selects, resolving ``auto`` on this executor."""
    client = options.consumer_client
    if client is ConsumerClient.KAFKA_PYTHON:
        from ._kafka_python_reader import read_records
        return read_records
    if client is not ConsumerClient.CONFLUENT:
        from ._native_reader import available, read_records
        if (reason := available()) is None:
            return read_records
        if client is ConsumerClient.NATIVE:  # checked at query start; this executor differs
            raise ConfigError(f"option 'kafkaConsumer.client' is native, but on this executor "
                              f"{reason}", option="kafkaConsumer.client")
        _warn_fallback(reason)
    from ._confluent_reader import read_records
    return read_records


@cache
def _warn_fallback(reason: str) -> None:
    log.warning("barrier-kafka: kafkaConsumer.client=auto reads with confluent-kafka because "
                "%s (the native reader is faster)", reason)


def read_range(options: KafkaSourceOptions, part: KafkaRangePartition,
               schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` (then its barrier marker) as Arrow batches."""
    if part.end > part.start:
        yield from _read_records(options)(options, part, schema)
    if part.emit_barrier and options.barrier_markers:
        barrier = CheckpointBarrier(part.checkpoint_id, part.timestamp_ms, part.channel, part.end)
        yield marker_batch([barrier], schema)
