"""Idle clients kept in a Python worker between tasks, by what shapes them.

Why: Spark reuses its Python workers across tasks (``spark.python.worker.reuse``, on by
default), but every task and every sink commit runs with a freshly unpickled reader or
writer, so a client made per task pays its connections (and any TLS or SASL handshake)
in every micro-batch. The JVM connectors keep theirs per executor. One pool type serves
the Kafka source's consumers (``kafka.reader._consumer_pool``) and the HBase sink's Thrift
connections (``hbase.client._connection_pool``); each package sets its own time and capacity.

A client is keyed by everything that shapes it (settings, credentials included, kept
in memory only and never logged), so a changed option never reaches an old client.
Callers give a client back only after it finished its work cleanly; anything that
failed is closed, so the next task starts clean. What happened to a client while it
idled (its server died, say) is judged at :meth:`IdlePool.take` by the caller's
``usable`` check: a client that fails it is closed, never handed out. Beyond the capacity the longest idle
goes first; a client idle past its time is closed at the next take or give.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

__all__ = ["Closable", "IdlePool"]

log = logging.getLogger(__name__)


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class IdlePool(Generic[C]):
    """Idle clients by key; :meth:`take` hands one out, :meth:`give` takes it back."""

    def __init__(self, idle_s: float, capacity: int, *, what: str) -> None:
        """``idle_s``: how long a client given back without its own time stays; ``what``
        names the clients in debug lines."""
        self._what = what
        self._idle_s, self._capacity = idle_s, capacity
        # (key, serial) -> (client, when it may be closed), in the order given back
        self._idle: OrderedDict[tuple[Hashable, int], tuple[C, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._serial = 0
        self.hits = 0
        self.misses = 0
        self.rejected = 0  # idle clients ``usable`` turned away at take

    def take(self, key: Hashable, usable: Callable[[C], bool] | None = None) -> C | None:
        """An idle client made for ``key`` (now the caller's), or None.

        ``usable`` (called outside the lock, on a client already taken out) judges what
        happened to a client while it idled; one it rejects is closed and the next
        candidate tried, so a rejected client is never handed out (counted in
        :attr:`rejected`).
        """
        while True:
            with self._lock:
                expired = self._expire(time.monotonic())
                found = None
                for slot in reversed(self._idle):  # the most recently used first: its connections are warmest
                    if slot[0] == key:
                        found = self._idle.pop(slot)[0]
                        break
            _close_all(expired, self._what)
            if found is not None and usable is not None and not usable(found):
                with self._lock:
                    self.rejected += 1
                _close_all([found], self._what)
                continue
            with self._lock:
                if found is None:
                    self.misses += 1
                else:
                    self.hits += 1
            return found

    def give(self, key: Hashable, client: C, idle_s: float | None = None) -> None:
        """Keep ``client`` for the next :meth:`take` of ``key``, for at most ``idle_s``."""
        keep = self._idle_s if idle_s is None else idle_s
        if keep <= 0:
            _close_all([client], self._what)
            return
        with self._lock:
            self._serial += 1
            now = time.monotonic()
            self._idle[(key, self._serial)] = (client, now + keep)
            expired = self._expire(now)
        _close_all(expired, self._what)

    def close(self) -> None:
        """Close every idle client (tests, and a worker that wants its sockets back)."""
        with self._lock:
            idle = [client for client, _ in self._idle.values()]
            self._idle.clear()
        _close_all(idle, self._what)

    def __len__(self) -> int:
        return len(self._idle)

    def _expire(self, now: float) -> list[C]:
        out = [client for client, until in self._idle.values() if until <= now]
        if out:
            self._idle = OrderedDict((slot, v) for slot, v in self._idle.items() if v[1] > now)
        while len(self._idle) > self._capacity:  # the longest idle first
            out.append(self._idle.popitem(last=False)[1][0])
        return out


def _close_all(clients: list[C], what: str) -> None:
    """Close outside the lock: closing a librdkafka client waits for its threads."""
    for client in clients:
        try:
            client.close()
        except Exception as exc:  # noqa: BLE001 -- an idle client's close must not fail the task that evicts it
            log.debug("closing an idle %s failed: %s", what, type(exc).__name__)
