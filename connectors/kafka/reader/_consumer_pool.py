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
consumers with it. The pool itself is the connectors' one idle-client pool
(``connectors._idle_pool``), which the HBase sink's connections use too.
"""

from __future__ import annotations

from typing import TypeVar

from ..._idle_pool import Closable, IdlePool

__all__ = ["CAPACITY", "IDLE_S", "ConsumerPool"]

# Spark's JVM source: spark.kafka.consumer.cache.timeout (5m) and .capacity (64).
IDLE_S = 300.0
CAPACITY = 64

C = TypeVar("C", bound=Closable)


class ConsumerPool(IdlePool[C]):
    """Idle consumers by key, with the JVM source's time and capacity by default."""

    def __init__(self, idle_s: float = IDLE_S, capacity: int = CAPACITY) -> None:
        super().__init__(idle_s, capacity, what="barrier-kafka consumer")
