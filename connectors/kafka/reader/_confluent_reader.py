"""Executor read path on confluent-kafka (``kafkaConsumer.client=confluent``).

Why it stays beside the compiled path (:mod:`._native_reader`): it needs nothing but
the confluent-kafka wheel, so it is what ``kafkaConsumer.client=auto`` falls back to
where the compiled module was not built. The range loop is shared
(:func:`._librdkafka.read_with`); this file only turns confluent-kafka's messages into
Arrow columns.

CPU: librdkafka decodes in C on its own thread (~0.4 µs/record), but ``consume()``
hands Python one ``Message`` object per record, and the columns are built by mapping
its C accessors (``Message.value`` ...) over whole batches (:func:`._offset_range.build_batch`).
Each message is a GC-tracked object that lives until its batch is built, and that
many survivors made CPython's cyclic GC run full collections over the whole worker
heap -- measured at about half of this path's CPU -- hence the loop's
:func:`._offset_range.gc_paused`.

Secrets: librdkafka's log (``logger``) and every client error (``error_cb``) go
through :class:`SecretScrubber`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import cast

import numpy as np
import pyarrow as pa
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition as ConfluentTP,
)

from ...._exceptions import ConfigError, SourceError
from .._options import KafkaSourceOptions
from ..client._secrets import SecretScrubber
from ._librdkafka import GONE, NOT_YET, UNREACHED, ClientErrors, leader_text, read_with, settings
from ._offset_range import KafkaRangePartition, build_batch, gone

__all__ = ["executor_group_id", "read_records"]

log = logging.getLogger(__name__)

# The executors' group id when the query names none (commitOffsets=false).
UNJOINED_GROUP = "sparkbarrier-executor-unjoined"


def executor_group_id(options: KafkaSourceOptions) -> str:
    """The ``group.id`` of this path's consumers: the query's ``kafka.group.id``, if any.

    Why a group at all: confluent-kafka's ``Consumer`` refuses to start without one
    ("group.id must be set"), and librdkafka's ``assign`` needs its group handle. The
    consumer never joins or commits, but librdkafka still looks up the group's
    coordinator, which needs Describe on the group. The group the user already names
    (and holds rights on, to receive the commits) is the one that passes ACLs covering
    only the user's own groups, as Spark's executors use ``kafka.group.id`` when it is
    set. The compiled path (the default) needs no group at all.
    """
    return options.group_id or UNJOINED_GROUP


def _offset(msg: Message) -> int:
    """A data message's offset. confluent-kafka returns None for a negative offset (so its
    stubs say ``int | None``); a consumed data message always has one."""
    return cast(int, msg.offset())


def _event_offset(msg: Message) -> int:
    """An error event's offset as the compiled fetcher reports it: librdkafka's own
    ``OFFSET_INVALID`` where the event carries none (confluent-kafka gives None). Only a
    PARTITION_EOF's offset is read (``_librdkafka._handle_events``), and it has one."""
    offset = msg.offset()
    return OFFSET_INVALID if offset is None else offset


class _ConfluentFetcher:
    """:class:`._librdkafka.Fetcher` on a confluent-kafka ``Consumer``."""

    def __init__(self, options: KafkaSourceOptions, part: KafkaRangePartition,
                 schema: pa.Schema) -> None:
        scrub = SecretScrubber(options.librdkafka_settings(), log)
        self.errors = ClientErrors(scrub)
        self._part, self._schema, self._headers = part, schema, options.include_headers
        self._pending: list[Message] = []
        self._assigned = False
        self._leader: tuple[int, str] = (-1, "")
        try:
            self._consumer = Consumer({**settings(options), "group.id": executor_group_id(options),
                                       "logger": scrub, "error_cb": self._on_error})
        except (KafkaException, ValueError) as exc:
            raise ConfigError(f"librdkafka rejected the consumer settings mapped from the "
                              f"kafka.* options: {scrub(exc)}") from None

    def _on_error(self, err: KafkaError) -> None:
        self.errors.record(err.code(), err.str(), err.fatal())

    def earliest(self, timeout_s: float) -> int | None:
        part = self._part
        started = time.monotonic()
        try:
            low, _ = self._consumer.get_watermark_offsets(
                ConfluentTP(part.topic, part.partition), timeout=timeout_s, cached=False)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() in GONE:
                raise gone(part) from None
            if err.code() in NOT_YET:
                if err.code() not in UNREACHED:  # the cluster answered: say what it said
                    self.errors.last = self.errors.scrub(err.str())
                self._serve(max(timeout_s - (time.monotonic() - started), 0))
                return None
            self.errors.record(err.code(), err.str(), err.fatal())
            self.errors.raise_permanent(part)
            raise SourceError(f"cannot look up the earliest offset of {part.channel}: "
                              f"{self.errors.scrub(err.str())}",
                              topic_partition=part.channel) from None
        return low

    def _serve(self, timeout_s: float) -> None:
        """Wait ``timeout_s`` before the next lookup, running ``error_cb`` meanwhile.

        Before the first assign, ``poll`` returns no record, errors at most. Later,
        ``consume`` serves the errors and a ``poll`` could take a record away, so the
        retry only pauses (a lookup answered at once must not spin).
        """
        if self._assigned:
            time.sleep(timeout_s)
            return
        msg = self._consumer.poll(timeout_s)
        if msg is not None and (err := msg.error()) is not None:
            self.errors.record(err.code(), err.str(), err.fatal())

    def topic_error(self, timeout_s: float) -> tuple[int, str]:
        try:
            cluster = self._consumer.list_topics(self._part.topic, timeout=timeout_s)
        except KafkaException as exc:
            err = exc.args[0]
        else:
            topic = cluster.topics[self._part.topic]
            err = topic.error
            known = topic.partitions.get(self._part.partition)
            if known is not None:
                broker = cluster.brokers.get(known.leader)
                self._leader = (known.leader, "" if broker is None else f"{broker.host}:{broker.port}")
        return (err.code(), err.str()) if err is not None else (0, "")

    def leader(self) -> str:
        """The partition's leader as last heard (:func:`._librdkafka.leader_text`)."""
        return leader_text(*self._leader)

    def assign(self, offset: int) -> None:
        self._assigned = True
        self._consumer.assign([ConfluentTP(self._part.topic, self._part.partition, offset)])

    def fetch(self, want: int, end: int, timeout_s: float
              ) -> tuple[int, int, bool, bool, list[tuple[int, int, str]]]:
        try:
            msgs = self._consumer.consume(num_messages=want, timeout=timeout_s)
        except KafkaException as exc:  # raised for fatal client states only
            raise SourceError(f"cannot read {self._part.channel}: {self.errors.scrub(exc)}",
                              topic_partition=self._part.channel) from None
        events: list[tuple[int, int, str]] = []
        if msgs and any(map(Message.error, msgs)):
            events = [(err.code(), _event_offset(m), err.str())
                      for m in msgs if (err := m.error()) is not None]
            msgs = [m for m in msgs if m.error() is None]
        hit_end = False
        if msgs and _offset(msgs[-1]) >= end:
            msgs = [m for m in msgs if _offset(m) < end]
            hit_end = True
        self._pending.extend(msgs)
        return len(msgs), (_offset(msgs[-1]) + 1 if msgs else -1), hit_end, False, events

    @property
    def rows(self) -> int:
        return len(self._pending)

    def take(self) -> pa.RecordBatch:
        """Columns by mapping librdkafka's C accessors over the batch; no per-record loop."""
        msgs, self._pending = self._pending, []
        n = len(msgs)
        first, last = _offset(msgs[0]), _offset(msgs[-1])
        if last - first == n - 1:  # offsets strictly increase, so this means no gap
            offsets = np.arange(first, last + 1, dtype=np.int64)
        else:
            offsets = np.fromiter(map(Message.offset, msgs), np.int64, n)
        kinds, stamps = zip(*map(Message.timestamp, msgs), strict=True)
        return build_batch(
            self._part, self._schema, keys=list(map(Message.key, msgs)),
            values=list(map(Message.value, msgs)), offsets=offsets,
            timestamps_ms=np.fromiter(stamps, np.int64, n),
            # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Spark: -1, 0, 1.
            timestamp_types=np.fromiter(kinds, np.int32, n) - 1,
            headers=list(map(Message.headers, msgs)) if self._headers else None)

    def position(self) -> int:
        tp = ConfluentTP(self._part.topic, self._part.partition)
        return self._consumer.position([tp])[0].offset

    def close(self) -> None:
        self._pending = []
        self._consumer.close()

    def release(self) -> None:
        """Closes: confluent-kafka's consumer is the fallback path, not pooled."""
        self.close()


def read_records(options: KafkaSourceOptions, part: KafkaRangePartition,
                 schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the data records of ``part`` (no marker) as Arrow batches."""
    return read_with(_ConfluentFetcher(options, part, schema), options, part)
