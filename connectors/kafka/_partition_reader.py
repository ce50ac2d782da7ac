"""Executor side: read exactly one planned offset range into Arrow batches.

Contract:
- yields every record with ``start <= offset < end`` of one topic-partition, in
  offset order, none outside the range, as ``pyarrow.RecordBatch``es of at most
  ``arrowBatchSize`` rows built column-wise (memory bounded by the batch size);
- if the range ends a channel's part of the checkpoint, a barrier marker row
  follows the last data row;
- stops when the consumer *position* reaches ``end``, not when a record with
  offset ``end - 1`` is seen: compacted topics have gaps and under
  ``read_committed`` aborted records and transaction markers are never returned;
- offsets gone from Kafka (retention, deleted topic) raise
  :class:`DataLossError` with ``failOnDataLoss=true``, else are skipped with a
  warning.

The consumer is group-less (assign + seek) and created here, inside ``read()``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTP
from kafka.errors import OffsetOutOfRangeError
from pyspark.sql.datasource import InputPartition

from ...barrier.markers import CheckpointBarrier, marker_batch
from ..._exceptions import DataLossError, SourceError
from ._options import KafkaSourceOptions
from ._secrets import install_client_log_redaction

__all__ = ["KafkaRangePartition", "read_range"]

install_client_log_redaction()

log = logging.getLogger(__name__)

# Throughput-oriented fetch defaults; any ``kafka.*`` option overrides them.
_FETCH_DEFAULTS = {
    "fetch_max_bytes": 64 * 1024 * 1024,
    "max_partition_fetch_bytes": 16 * 1024 * 1024,
    "fetch_min_bytes": 1,
    "fetch_max_wait_ms": 100,
    "receive_buffer_bytes": 4 * 1024 * 1024,
    "check_crcs": True,
}


@dataclass(frozen=True)
class KafkaRangePartition(InputPartition):
    """One Spark task: records ``[start, end)`` of ``topic``/``partition``.

    ``emit_barrier`` is set on the last split of a channel's range; the marker
    carries ``checkpoint_id``/``timestamp_ms`` from the planned offset.
    """

    topic: str
    partition: int
    start: int
    end: int
    checkpoint_id: int
    timestamp_ms: int
    emit_barrier: bool = True

    @property
    def channel(self) -> str:
        return f"{self.topic}:{self.partition}"


def _records_to_batch(records: list, part: KafkaRangePartition, schema: pa.Schema,
                      headers: bool) -> pa.RecordBatch:
    """Transpose ConsumerRecord tuples once (C speed), then one Arrow array per column."""
    n = len(records)
    cols = list(zip(*records))  # ConsumerRecord fields, in namedtuple order
    fields = records[0]._fields
    col = {name: cols[i] for i, name in enumerate(fields)}
    ts_ms = np.fromiter(col["timestamp"], dtype=np.int64, count=n)
    arrays: dict[str, pa.Array] = {
        "key": pa.array(col["key"], pa.binary()),
        "value": pa.array(col["value"], pa.binary()),
        "topic": pa.array([part.topic] * n, pa.string()),
        "partition": pa.array(np.full(n, part.partition, dtype=np.int32)),
        "offset": pa.array(np.fromiter(col["offset"], dtype=np.int64, count=n)),
        "timestamp": pa.array(ts_ms * 1000, pa.int64()).cast(schema.field("timestamp").type),
        "timestampType": pa.array(np.fromiter(col["timestamp_type"], dtype=np.int32, count=n)),
    }
    if headers:
        arrays["headers"] = pa.array(
            [[{"key": k, "value": v} for k, v in hs] for hs in col["headers"]],
            schema.field("headers").type,
        )
    out = [arrays[f.name] if f.name in arrays else pa.nulls(n, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(out, schema=schema)


def _check_loss(options: KafkaSourceOptions, part: KafkaRangePartition, pos: int,
                earliest: int) -> int:
    """Where to continue when ``pos`` is below what Kafka still retains."""
    if earliest <= pos:
        return pos
    lost_to = min(earliest, part.end)
    message = (f"offsets {pos}..{lost_to - 1} of {part.channel} are no longer available "
               f"(earliest retained offset is {earliest}); planned range {part.start}.."
               f"{part.end - 1} of checkpoint {part.checkpoint_id}")
    if options.fail_on_data_loss:
        raise DataLossError(message + ". Set failOnDataLoss=false to skip lost offsets.",
                            topic_partition=part.channel)
    log.warning("barrier-kafka: data loss skipped: %s", message)
    return lost_to


def read_range(options: KafkaSourceOptions, part: KafkaRangePartition,
               schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` (then its barrier marker) as Arrow batches."""
    if part.end > part.start:
        yield from _read_records(options, part, schema)
    if part.emit_barrier:
        barrier = CheckpointBarrier(part.checkpoint_id, part.timestamp_ms, part.channel, part.end)
        yield marker_batch([barrier], schema)


def _read_records(options: KafkaSourceOptions, part: KafkaRangePartition,
                  schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    configs = {**_FETCH_DEFAULTS, **options.consumer_configs()}
    configs["max_poll_records"] = options.arrow_batch_size
    consumer = KafkaConsumer(**configs, enable_auto_commit=False, auto_offset_reset="none",
                             allow_auto_create_topics=False)
    tp = KafkaTP(part.topic, part.partition)
    try:
        consumer.assign([tp])
        earliest = consumer.beginning_offsets([tp]).get(tp)
        if earliest is None:
            raise DataLossError(f"{part.channel} no longer exists", topic_partition=part.channel)
        pos = _check_loss(options, part, part.start, earliest)
        if pos >= part.end:
            return
        consumer.seek(tp, pos)
        deadline = time.monotonic() + options.poll_timeout_ms / 1000
        pending: list = []
        while True:
            try:
                fetched = consumer.poll(timeout_ms=200, max_records=options.arrow_batch_size)
            except OffsetOutOfRangeError:
                earliest = consumer.beginning_offsets([tp])[tp]
                pos = _check_loss(options, part, pos, earliest)
                if pos >= part.end:
                    break
                consumer.seek(tp, pos)
                continue
            records = fetched.get(tp, ())
            if records:
                deadline = time.monotonic() + options.poll_timeout_ms / 1000
                if records[-1].offset >= part.end:
                    records = [r for r in records if r.offset < part.end]
                pending.extend(records)
                if records:
                    pos = records[-1].offset + 1
                if len(pending) >= options.arrow_batch_size:
                    yield _records_to_batch(pending, part, schema, options.include_headers)
                    pending = []
            position = consumer.position(tp)
            if position >= part.end:
                break
            if time.monotonic() > deadline:
                raise SourceError(
                    f"no progress reading {part.channel} at offset {position} (planned end "
                    f"{part.end}) for {options.poll_timeout_ms} ms "
                    f"(kafkaConsumer.pollTimeoutMs)", topic_partition=part.channel)
        if pending:
            yield _records_to_batch(pending, part, schema, options.include_headers)
    finally:
        consumer.close(autocommit=False)
