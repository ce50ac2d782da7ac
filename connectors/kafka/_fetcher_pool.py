"""Idle executor consumers kept in a Python worker for the next range of the same partition.

Why: Spark reuses its Python workers across tasks (``spark.python.worker.reuse``, on by
default), but every task of a Python data source reads with a freshly unpickled reader.
A consumer created per task pays the client's start-up, the bootstrap metadata request
and new connections in every micro-batch: 5 to 25 ms a task, measured on loopback, a tenth
of a 300-row batch. Spark's JVM source keeps its consumers per executor for the same
reason (``spark.kafka.consumer.cache.*``), and this pool follows its defaults.

What an idle consumer holds: a librdkafka client with its connections and metadata,
stopped (``Fetcher.stop``: it fetches nothing and holds no message), so idle consumers
cost threads and sockets, not memory. A consumer is keyed by everything that shapes it
(its librdkafka settings, credentials included, kept in memory only and never logged;
topic; partition; headers), so a changed option never reaches an old client. Only a
consumer whose range was read to its end without a client error goes back; a failed or
abandoned read closes its consumer, so a retry starts clean. Nothing about what was read
lives in the pool: every range still seeks to its own start and checks the earliest
offset, so which task ran where never changes what a task yields.

Idle consumers are closed after their query's ``kafkaConsumer.cacheTimeoutMs``
(:data:`IDLE_S` by default; 0 closes at once) and beyond :data:`CAPACITY` the longest
idle goes first; Spark ends a Python worker that stays idle for a minute, closing its
consumers with it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

__all__ = ["CAPACITY", "IDLE_S", "ConsumerPool"]

log = logging.getLogger(__name__)

# Spark's JVM source: spark.kafka.consumer.cache.timeout (5m) and .capacity (64).
IDLE_S = 300.0
CAPACITY = 64


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class ConsumerPool(Generic[C]):
    """Idle consumers by key; :meth:`take` hands one out, :meth:`give` takes it back."""

    def __init__(self, idle_s: float = IDLE_S, capacity: int = CAPACITY) -> None:
        """``idle_s``: how long a consumer given back without its own time stays."""
        self._idle_s, self._capacity = idle_s, capacity
        # (key, serial) -> (consumer, when it may be closed), in the order given back
        self._idle: OrderedDict[tuple[Hashable, int], tuple[C, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._serial = 0
        self.hits = 0
        self.misses = 0

    def take(self, key: Hashable) -> C | None:
        """An idle consumer made for ``key`` (now the caller's), or None."""
        with self._lock:
            expired = self._expire(time.monotonic())
            found = None
            for slot in reversed(self._idle):  # the most recently used first: its connections are warmest
                if slot[0] == key:
                    found = self._idle.pop(slot)[0]
                    break
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        _close_all(expired)
        return found

    def give(self, key: Hashable, consumer: C, idle_s: float | None = None) -> None:
        """Keep ``consumer`` for the next :meth:`take` of ``key``, for at most ``idle_s``."""
        keep = self._idle_s if idle_s is None else idle_s
        if keep <= 0:
            _close_all([consumer])
            return
        with self._lock:
            self._serial += 1
            now = time.monotonic()
            self._idle[(key, self._serial)] = (consumer, now + keep)
            expired = self._expire(now)
        _close_all(expired)

    def close(self) -> None:
        """Close every idle consumer (tests, and a worker that wants its sockets back)."""
        with self._lock:
            idle = [consumer for consumer, _ in self._idle.values()]
            self._idle.clear()
        _close_all(idle)

    def __len__(self) -> int:
        return len(self._idle)

    def _expire(self, now: float) -> list[C]:
        out = [consumer for consumer, until in self._idle.values() if until <= now]
        if out:
            self._idle = OrderedDict((slot, v) for slot, v in self._idle.items() if v[1] > now)
        while len(self._idle) > self._capacity:  # the longest idle first
            out.append(self._idle.popitem(last=False)[1][0])
        return out


def _close_all(consumers: list[C]) -> None:
    """Close outside the lock: closing a librdkafka client waits for its threads."""
    for consumer in consumers:
        try:
            consumer.close()
        except Exception as exc:  # noqa: BLE001 -- an idle consumer's close must not fail the task that evicts it
            log.debug("barrier-kafka: closing an idle consumer failed: %s", type(exc).__name__)
