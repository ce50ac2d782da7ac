"""Executor read path on sparkbarrier's compiled fetcher (``kafkaConsumer.client=native``).

Why: with confluent-kafka, Python gets one ``Message`` object per record and builds
Arrow columns from them; that alone cost more CPU per record than Spark's JVM Kafka
source spends in total. The compiled module (``_rdkafka_arrow.c``) drives librdkafka
itself and copies each message straight into the Arrow buffers of the batch being
built (validity bitmaps, int32 offsets, data) with the GIL released; Python sees a
handful of ``bytes`` per batch and wraps them without copying (:meth:`take`).
librdkafka still speaks Kafka; the module only fetches and copies.

The range loop, error handling and settings are shared with the confluent path
(:mod:`._librdkafka`). The module is built by ``pip install`` where a C compiler is
present; it links the librdkafka bundled in the pinned confluent-kafka wheel, so both
paths run on one librdkafka per process (docs/librdkafka.md). :func:`available` tells
whether it was built and loads, and :func:`librdkafka_version` which library it runs on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ...._exceptions import ConfigError, SourceError
from .._options import KafkaSourceOptions
from ..client._failover import librdkafka_log_level
from ..client._secrets import SecretScrubber
from ..client._waits import waiting
from ._consumer_pool import ConsumerPool
from ._librdkafka import GONE, NOT_YET, UNREACHED, ClientErrors, leader_text, read_with, settings
from ._offset_range import KafkaRangePartition, build_batch, gone

if TYPE_CHECKING:
    from ._rdkafka_arrow import Fetcher as CompiledFetcher

__all__ = ["POOL", "available", "librdkafka_version", "read_records"]

log = logging.getLogger(__name__)

# The compiled consumers idle in this Python worker between tasks (see ._fetcher_pool).
POOL: ConsumerPool[CompiledFetcher] = ConsumerPool()

# librdkafka's log facilities that report a broker connection failing or lost.
_BROKER_FAILED = frozenset({"FAIL", "BROKERFAIL"})
_DROPPED = "client events dropped"  # the compiled module's line when its buffer overflowed

# syslog severities (librdkafka's log levels) -> logging levels
_LOG_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
               4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}


@cache
def available() -> str | None:
    """Why the compiled module cannot be used here, or None when it can.

    The module refuses to load on a librdkafka older than 2.6.1; the reason comes back
    here, and ``kafkaConsumer.client=auto`` then falls back with a warning naming it.
    """
    try:
        from . import _rdkafka_arrow
    except ImportError as exc:
        return (f"the compiled module is not built or cannot load ({exc}); reinstall "
                f"sparkbarrier with a C compiler present (docs/librdkafka.md)")
    log.debug("barrier-kafka: compiled reader runs on librdkafka %s",
              _rdkafka_arrow.librdkafka_version)
    return None


def librdkafka_version() -> str | None:
    """The librdkafka version the compiled module runs on, or None when it cannot load."""
    if available() is not None:
        return None
    from . import _rdkafka_arrow

    return _rdkafka_arrow.librdkafka_version


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _binary(kind: pa.DataType, n: int, column: tuple[bytes | None, bytes, bytes]) -> pa.Array:
    """An Arrow array over the module's (validity or None, int32 offsets, data) buffers."""
    valid, offsets, data = column
    return pa.Array.from_buffers(kind, n, [None if valid is None else pa.py_buffer(valid),
                                           pa.py_buffer(offsets), pa.py_buffer(data)])


class _NativeFetcher:
    """:class:`._librdkafka.Fetcher` on the compiled module's ``Fetcher``."""

    def __init__(self, options: KafkaSourceOptions, part: KafkaRangePartition,
                 schema: pa.Schema) -> None:
        from ._rdkafka_arrow import Fetcher

        self._scrub = SecretScrubber(options.librdkafka_settings(), log)
        self.errors = ClientErrors(self._scrub)
        self._part, self._schema = part, schema
        config = [(k, _setting(v)) for k, v in settings(options).items()]
        self._key = (tuple(config), part.topic, part.partition, options.include_headers)
        self._idle_s = options.cache_timeout_ms / 1000
        self._idle_events: list[tuple[str, int, str]] = []
        # a stale pooled consumer is closed right here (rd_kafka_destroy): a named wait too
        with waiting("take a pooled consumer (closing stale ones)", part.channel,
                     "the consumers' brokers", f"read task of {part.channel}"):
            pooled = POOL.take(self._key, self._usable)
        if pooled is not None:
            self._fetcher = pooled
            self._log_events(self._idle_events)
            return
        try:
            self._fetcher = Fetcher(config, part.topic, part.partition,
                                    options.include_headers)
        except ValueError as exc:
            raise ConfigError(f"librdkafka rejected the consumer settings mapped from the "
                              f"kafka.* options: {self._scrub(exc)}") from None

    def _usable(self, idle: CompiledFetcher) -> bool:
        """Whether a pooled consumer may serve this range: not if a broker connection of
        it failed while it idled (issue 44).

        Why: its cached metadata may still name the dead broker as the partition's
        leader; nobody polled it meanwhile, so it was never told. A fresh consumer costs
        5-25 ms; a trusted stale one cost the next tasks up to a minute. What the idle
        consumer logged is kept and logged by :meth:`_log_events` if it is used.
        """
        idle.serve(0)  # the client errors (error_cb) queued while it idled
        events = idle.client_events()
        trouble = _idle_trouble(events)
        if trouble is not None:
            log.debug("barrier-kafka: a pooled consumer of %s:%d is closed, not reused: %s",
                      self._part.topic, self._part.partition, self._scrub(trouble))
            return False
        self._idle_events = events
        return True

    def _drain_client_events(self) -> None:
        self._log_events(self._fetcher.client_events())

    def _log_events(self, events: list[tuple[str, int, str]]) -> None:
        for kind, code, text in events:
            if kind == "error":  # a fatal error arrives here too, as Err.FATAL
                self.errors.record(code, text)
            else:
                level = librdkafka_log_level(_LOG_LEVELS.get(code, logging.DEBUG), text)
                if log.isEnabledFor(level):
                    log.log(level, "%s", self._scrub(text))

    def earliest(self, timeout_s: float) -> int | None:
        part = self._part
        started = time.monotonic()
        err, low, _, text = self._fetcher.watermarks(int(timeout_s * 1000))
        if err in NOT_YET:  # wait out the slice serving client errors, not spinning
            left = timeout_s - (time.monotonic() - started)
            if left > 0:
                self._fetcher.serve(int(left * 1000))
        self._drain_client_events()
        if err in GONE:
            raise gone(part)
        if err in NOT_YET:
            if err not in UNREACHED:  # the cluster answered: say what it said
                self.errors.last = self._scrub(text)
            return None
        if err:
            self.errors.record(err, text)
            self.errors.raise_permanent(part)
            raise SourceError(f"cannot look up the earliest offset of {part.channel}: "
                              f"{self._scrub(text)}", topic_partition=part.channel)
        return low

    def assign(self, offset: int) -> None:
        self._fetcher.assign(offset)

    def leader(self) -> str:
        """The partition's leader as last heard (:func:`._librdkafka.leader_text`)."""
        return leader_text(*self._fetcher.leader())

    def topic_error(self, timeout_s: float) -> tuple[int, str]:
        return self._fetcher.topic_error(int(timeout_s * 1000))

    def fetch(self, want: int, end: int, timeout_s: float
              ) -> tuple[int, int, bool, bool, list[tuple[int, int, str]]]:
        added, next_offset, hit_end, full, events = self._fetcher.fetch(want, end, int(timeout_s * 1000))
        self._drain_client_events()
        return added, next_offset, hit_end, bool(full), events

    @property
    def rows(self) -> int:
        return self._fetcher.rows

    def take(self) -> pa.RecordBatch:
        n, key, value, offsets, stamps, kinds, hoffsets, hkey, hvalue, hcount = \
            self._fetcher.take()
        headers = None
        if hoffsets is not None and hkey is not None and hvalue is not None:  # all or none (C)
            kind = self._schema.field("headers").type
            entries = pa.StructArray.from_arrays(
                [_binary(pa.string(), hcount, hkey), _binary(pa.binary(), hcount, hvalue)],
                fields=list(kind.value_type))
            headers = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(hoffsets)],
                                            children=[entries])
        return build_batch(
            self._part, self._schema, keys=_binary(pa.binary(), n, key),
            values=_binary(pa.binary(), n, value), offsets=np.frombuffer(offsets, np.int64),
            timestamps_ms=np.frombuffer(stamps, np.int64),
            timestamp_types=np.frombuffer(kinds, np.int32), headers=headers)

    def position(self) -> int:
        return self._fetcher.position()

    def close(self) -> None:
        self._drain_client_events()
        self._fetcher.close()

    def release(self) -> None:
        """Back to :data:`POOL`, stopped; closed instead when it met a permanent client
        error or cannot stop: the range was read, so nothing here may fail the task."""
        self._drain_client_events()
        if self.errors.permanent is not None:
            self._fetcher.close()
            return
        try:
            self._fetcher.stop()
        except RuntimeError as exc:
            log.debug("barrier-kafka: a consumer that cannot stop is closed, not kept: %s", self._scrub(exc))
            self._fetcher.close()
            return
        POOL.give(self._key, self._fetcher, self._idle_s)


def _idle_trouble(events: list[tuple[str, int, str]]) -> str | None:
    """The first sign in a pooled consumer's idle events that a broker connection failed
    (a client error, a FAIL/BROKERFAIL log line, or lines lost to a full buffer), or None."""
    for kind, _, text in events:
        if kind == "error" or text.split(":", 1)[0] in _BROKER_FAILED or _DROPPED in text:
            return text
    return None


def read_records(options: KafkaSourceOptions, part: KafkaRangePartition,
                 schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the data records of ``part`` (no marker) as Arrow batches."""
    return read_with(_NativeFetcher(options, part, schema), options, part)
