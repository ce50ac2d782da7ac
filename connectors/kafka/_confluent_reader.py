"""Executor read path on confluent-kafka (librdkafka), the default.

Why: kafka-python decodes records in pure Python (~8 µs of CPU per record, ~90 % of
the reader's time); librdkafka decodes them in C on its own thread (~1.2 µs). What
Python still does per record is a few C method calls (``Message.value`` ...) mapped
over whole batches; columns are built once per Arrow batch (:func:`._range.build_batch`).

The range contract is the one in :mod:`._partition_reader`. How this path keeps it:

* start: the earliest retained offset is looked up (``get_watermark_offsets``) and
  the data-loss policy applied before ``assign`` puts the consumer at the start;
* end: ``consume`` is asked for at most ``end - position`` messages, so a range
  without gaps ends without waiting; with gaps (compaction, ``read_committed``
  control records and aborted records) the range ends when librdkafka's position
  reaches ``end``, a record at or past ``end`` arrives, or the end-of-partition
  event (``enable.partition.eof``) reports the log end at or past ``end``;
* offsets that vanish while reading arrive as an offset-reset error
  (``auto.offset.reset=error``) and go through the same data-loss policy;
* memory: at most ``arrowBatchSize`` messages are held in Python, librdkafka's
  prefetch queue is capped by ``queued.max.messages.kbytes`` (:data:`_DEFAULTS`);
* CPU: each message is a GC-tracked object that lives until its batch is built, and
  that many survivors made CPython's cyclic GC run full collections over the whole
  worker heap -- measured at about half of the reader's CPU. The reader's own steps run
  with the collector paused (:func:`._range.gc_paused`); it is on whenever control is
  in Spark's code between batches.

Secrets: librdkafka's log and every client error go through :class:`SecretScrubber`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as ConfluentTP

from ..._exceptions import ConfigError, SourceError
from ._options import KafkaSourceOptions
from ._range import KafkaRangePartition, build_batch, check_loss, gc_paused, gone, no_progress
from ._secrets import SecretScrubber

__all__ = ["read_records"]

log = logging.getLogger(__name__)

# Throughput-oriented defaults; a mapped ``kafka.*`` option overrides them.
_DEFAULTS = {
    "fetch.max.bytes": 32 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.wait.max.ms": 100,
    "socket.receive.buffer.bytes": 4 * 1024 * 1024,
    # Prefetched bytes librdkafka may hold per partition (its default is 64 MiB). Room
    # for several fetches keeps one in flight while Python drains the queue: measured
    # here, 8 MiB fetches into a 32 MiB queue read 2-2.5x faster than 16 into 16. The
    # message-count limit is lifted so the byte limit alone decides.
    "queued.max.messages.kbytes": 32 * 1024,
    "queued.min.messages": 1_000_000,
}
# Settings the reader depends on; users cannot reach them (no kafka-python counterpart).
_FORCED = {
    # librdkafka refuses a consumer without a group id. ``assign`` never joins it and
    # nothing is ever committed through this consumer, so the name is only a label.
    "group.id": "sparkbarrier-executor-unjoined",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "enable.partition.eof": True,
    "allow.auto.create.topics": False,
}
# How long one ``consume`` call waits for a full batch; bounds the wait at a range's end.
_WAIT_S = 0.1
_GONE = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
                   KafkaError.UNKNOWN_TOPIC_OR_PART})
_OUT_OF_RANGE = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
# Errors librdkafka would retry forever that no retry can fix: fail the task now.
_PERMANENT = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                        KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError._SSL})


class _ClientErrors:
    """``error_cb``: remembers the last client-level error, scrubbed, for messages."""

    def __init__(self, scrub: SecretScrubber) -> None:
        self._scrub = scrub
        self.last = ""
        self.permanent: str | None = None

    def __call__(self, err: KafkaError) -> None:
        self.last = self._scrub(err.str())
        log.debug("barrier-kafka: librdkafka error: %s", self.last)
        if err.fatal() or err.code() in _PERMANENT:
            self.permanent = self.last


def _to_batch(msgs: list, part: KafkaRangePartition, schema: pa.Schema,
              headers: bool) -> pa.RecordBatch:
    """Columns by mapping librdkafka's C accessors over the batch; no per-record loop."""
    n = len(msgs)
    first, last = msgs[0].offset(), msgs[-1].offset()
    if last - first == n - 1:  # offsets strictly increase, so this means no gap
        offsets = np.arange(first, last + 1, dtype=np.int64)
    else:
        offsets = np.fromiter(map(Message.offset, msgs), np.int64, n)
    kinds, stamps = zip(*map(Message.timestamp, msgs))
    return build_batch(
        part, schema, keys=list(map(Message.key, msgs)), values=list(map(Message.value, msgs)),
        offsets=offsets, timestamps_ms=np.fromiter(stamps, np.int64, n),
        # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Spark: -1, 0, 1.
        timestamp_types=np.fromiter(kinds, np.int32, n) - 1,
        headers=list(map(Message.headers, msgs)) if headers else None)


def _earliest(consumer: Consumer, part: KafkaRangePartition, timeout_s: float,
              scrub: SecretScrubber) -> int:
    try:
        low, _ = consumer.get_watermark_offsets(ConfluentTP(part.topic, part.partition),
                                                timeout=timeout_s, cached=False)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() in _GONE:
            raise gone(part) from None
        raise SourceError(f"cannot look up the earliest offset of {part.channel}: "
                          f"{scrub(err.str())}", topic_partition=part.channel) from None
    return low


def _new_consumer(options: KafkaSourceOptions, scrub: SecretScrubber,
                  errors: _ClientErrors) -> Consumer:
    config = {**_DEFAULTS, **options.confluent_configs(), **_FORCED,
              "logger": scrub, "error_cb": errors}
    try:
        return Consumer(config)
    except (KafkaException, ValueError) as exc:
        raise ConfigError(f"librdkafka rejected the consumer settings mapped from the "
                          f"kafka.* options: {scrub(exc)}") from None


def read_records(options: KafkaSourceOptions, part: KafkaRangePartition,
                 schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the data records of ``part`` (no marker) as Arrow batches."""
    scrub = SecretScrubber(options.librdkafka_configs, log)
    errors = _ClientErrors(scrub)
    consumer = _new_consumer(options, scrub, errors)
    lookup_s = options.client_configs.get("request_timeout_ms", 30_000) / 1000
    tp = ConfluentTP(part.topic, part.partition)
    try:
        pos = check_loss(options, part, part.start, _earliest(consumer, part, lookup_s, scrub))
        if pos >= part.end:
            return
        consumer.assign([ConfluentTP(part.topic, part.partition, pos)])
        deadline = time.monotonic() + options.poll_timeout_ms / 1000
        pending: list = []
        done = False
        while not done:
            batch = None
            with gc_paused():
                want = min(options.arrow_batch_size - len(pending), part.end - pos)
                try:
                    msgs = consumer.consume(num_messages=want, timeout=_WAIT_S)
                except KafkaException as exc:  # raised for fatal client states only
                    raise SourceError(f"cannot read {part.channel}: {scrub(exc)}",
                                      topic_partition=part.channel) from None
                if errors.permanent is not None:
                    raise SourceError(f"cannot read {part.channel}: {errors.permanent}",
                                      topic_partition=part.channel)
                events = []
                if msgs and any(map(Message.error, msgs)):
                    events = [m for m in msgs if m.error() is not None]
                    msgs = [m for m in msgs if m.error() is None]
                if msgs:
                    if msgs[-1].offset() >= part.end:
                        msgs = [m for m in msgs if m.offset() < part.end]
                        done = True
                    if msgs:
                        pending.extend(msgs)
                        pos = msgs[-1].offset() + 1
                        deadline = time.monotonic() + options.poll_timeout_ms / 1000
                if events:
                    ended, pos = _handle_events(events, consumer, options, part, pos, lookup_s,
                                                scrub, errors)
                    done = done or ended
                if len(pending) >= options.arrow_batch_size:
                    batch = _to_batch(pending, part, schema, options.include_headers)
                    pending = []
                if not done and pos < part.end:
                    position = consumer.position([tp])[0].offset
                    if time.monotonic() > deadline and position < part.end:
                        raise no_progress(options, part, max(pos, position), errors.last)
                    done = position >= part.end
                else:
                    done = True
                if done and pending:
                    batch = _to_batch(pending, part, schema, options.include_headers)
            if batch is not None:
                yield batch
    finally:
        consumer.close()


def _handle_events(events: list, consumer: Consumer, options: KafkaSourceOptions,
                   part: KafkaRangePartition, pos: int, lookup_s: float,
                   scrub: SecretScrubber, errors: _ClientErrors) -> tuple[bool, int]:
    """Apply the range contract to librdkafka's per-partition events.

    ``pos`` is the next offset after the data already taken (librdkafka delivers a
    partition's messages and events in order, so events follow that data). Returns
    ``(done, pos)``.
    """
    done = False
    for event in events:
        err = event.error()
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            done = done or event.offset() >= part.end
        elif code in _OUT_OF_RANGE:
            pos = check_loss(options, part, pos, _earliest(consumer, part, lookup_s, scrub))
            if pos >= part.end:
                return True, pos
            consumer.assign([ConfluentTP(part.topic, part.partition, pos)])
        elif code in _GONE:
            raise gone(part)
        elif err.fatal() or code in _PERMANENT:
            raise SourceError(f"cannot read {part.channel}: {scrub(err.str())}",
                              topic_partition=part.channel)
        else:  # transient; the no-progress deadline bounds how long it may last
            errors.last = scrub(err.str())
            log.warning("barrier-kafka: reading %s: %s", part.channel, errors.last)
    return done, pos
