"""Which Kafka errors heal on their own, and how long barrier-kafka waits for them.

Why: on a multi-broker cluster a leader change, a coordinator move or a broker in a
rolling restart is a normal event. The Java client retries these errors inside every
call; librdkafka and kafka-python hand many of them to the caller. Without this map a
leader election failed the whole query (one failed task fails a ``local[*]`` query).

The map follows the Java client's ``RetriableException`` tree:

* **retriable** -- the leader is moving or not yet elected (``NOT_LEADER_OR_FOLLOWER``,
  ``LEADER_NOT_AVAILABLE``, fenced/unknown leader epochs), the new leader's high
  watermark has not caught up (``OFFSET_NOT_AVAILABLE``), the coordinator is moving
  (``NOT_COORDINATOR``, ``COORDINATOR_NOT_AVAILABLE``, ``COORDINATOR_LOAD_IN_PROGRESS``),
  too few in-sync replicas, a timeout, one broker refusing connections, a broker
  handle destroyed because its broker died. Retried with backoff until
  ``failover.timeoutMs`` has passed since the first failure, then the query fails with
  a message naming that option;
* **fatal at once** -- everything else: authentication, authorisation, TLS, offsets
  out of range (the data-loss policy decides those), unknown topics (data loss or a
  missing permission, told apart elsewhere).

One problem is logged once (WARNING) with what is retried and for how long, again only
when it changes, and once more (WARNING too, with how long it lasted) when it healed:
:class:`ProblemLog`. kafka-python
itself logs every failed reconnect to a dead broker at ERROR (several a second during
a rolling restart); those lines go to DEBUG (:func:`quiet_reconnect_logs`, installed at
import): the one line that matters is ours.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ...._exceptions import SourceError

__all__ = [
    "FAILOVER_OPTION",
    "LIBRDKAFKA_RETRIABLE",
    "ProblemLog",
    "describe",
    "kafka_python_retriable",
    "librdkafka_log_level",
    "quiet_reconnect_logs",
    "retry_failover",
]

T = TypeVar("T")

FAILOVER_OPTION = "failover.timeoutMs"

# librdkafka's rd_kafka_resp_err_t codes (negative: client-local) that heal by waiting.
LIBRDKAFKA_RETRIABLE = frozenset({
    -197,  # _DESTROY: broker handle going away (its broker died)
    -195,  # _TRANSPORT: connection refused/reset by one broker
    -193,  # _RESOLVE
    -187,  # _ALL_BROKERS_DOWN
    -185,  # _TIMED_OUT
    -182,  # _NODE_UPDATE: a broker's address changed
    -180,  # _WAIT_COORD
    -166,  # _TIMED_OUT_QUEUE
    -153,  # _RETRY
    -137,  # _DESTROY_BROKER: broker handle destroyed without termination
    5,     # LEADER_NOT_AVAILABLE
    6,     # NOT_LEADER_OR_FOLLOWER
    7,     # REQUEST_TIMED_OUT
    9,     # REPLICA_NOT_AVAILABLE
    13,    # NETWORK_EXCEPTION
    14,    # COORDINATOR_LOAD_IN_PROGRESS
    15,    # COORDINATOR_NOT_AVAILABLE
    16,    # NOT_COORDINATOR
    19,    # NOT_ENOUGH_REPLICAS
    20,    # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    56,    # KAFKA_STORAGE_ERROR
    74,    # FENCED_LEADER_EPOCH
    75,    # UNKNOWN_LEADER_EPOCH
    78,    # OFFSET_NOT_AVAILABLE: leader high watermark not caught up
    80,    # PREFERRED_LEADER_NOT_AVAILABLE
    83,    # ELIGIBLE_LEADERS_NOT_AVAILABLE
})


def kafka_python_retriable(exc: BaseException) -> bool:
    """kafka-python marks the Java client's retriable errors ``retriable`` (connection
    errors, timeouts, leader and coordinator moves); a socket error below it heals too."""
    from kafka.errors import KafkaError

    if isinstance(exc, KafkaError):
        return bool(getattr(exc, "retriable", False))
    return isinstance(exc, (ConnectionError, TimeoutError))


def describe(exc: BaseException) -> str:
    """``"Type: message"`` once (kafka-python's messages already start with the type)."""
    text, name = str(exc), type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}"


class ProblemLog:
    """One WARNING per problem, one WARNING when it healed; repeats at DEBUG.

    Why: a leader election makes every lookup of every batch fail the same way for
    seconds; a stack trace or warning per attempt buries the one line that matters. The
    healed line has the problem line's level: Spark's Python workers set no logging up,
    so only WARNING and above reach the driver's log, and a problem whose end is not
    there reads as one that never ended (issue 58). Thread-safe; one instance per
    long-lived client (planner, committer, reader).
    """

    def __init__(self, logger: logging.Logger, prefix: str) -> None:
        self._log, self._prefix = logger, prefix
        self._lock = threading.Lock()
        self._problem: str | None = None
        self._since = 0.0

    def failing(self, what: str, error: str, retry: str) -> None:
        key = what  # the error's text varies while one problem lasts (counts, brokers)
        with self._lock:
            if self._problem == key:
                self._log.debug("%s: still cannot %s (%s)", self._prefix, what, error)
                return
            if self._problem is None:
                self._since = time.monotonic()
            self._problem = key
        self._log.warning("%s: cannot %s: %s; %s", self._prefix, what, error, retry)

    def healed(self, what: str) -> None:
        with self._lock:
            if self._problem is None:
                return
            self._problem = None
            took = time.monotonic() - self._since
        self._log.warning("%s: %s works again after %.1f s", self._prefix, what, took)


def retry_failover(what: str, call: Callable[[], T], *, timeout_s: float,
                   interval_s: float, problems: ProblemLog,
                   retriable: Callable[[BaseException], bool] = kafka_python_retriable,
                   topic_partition: str | None = None) -> T:
    """``call()``, retrying retriable errors with backoff for up to ``timeout_s``.

    The backoff starts at ``interval_s`` and doubles up to 2 s (a leader election
    takes seconds; a tight loop only adds load). Fatal errors propagate unchanged.
    When the budget is spent: :class:`SourceError` naming ``failover.timeoutMs``.
    """
    deadline = time.monotonic() + timeout_s
    wait = min(interval_s, 2.0)
    while True:
        try:
            result = call()
        except Exception as exc:  # classified right below
            if not retriable(exc):
                raise
            error = describe(exc)
            left = deadline - time.monotonic()
            if left <= 0:
                raise SourceError(
                    f"cannot {what}: {error}; still failing after {timeout_s:g} s of retries "
                    f"({FAILOVER_OPTION}={int(timeout_s * 1000)}: raise it if the cluster's "
                    f"leader elections or restarts take longer)",
                    topic_partition=topic_partition) from None
            problems.failing(what, error, f"retrying for up to {timeout_s:g} s "
                                          f"({FAILOVER_OPTION})")
            time.sleep(min(wait, left))
            wait = min(wait * 2, 2.0)
            continue
        problems.healed(what)
        return result


# kafka-python's loggers that report each connection attempt, and what they say then.
_RECONNECT_LOGGERS = ("kafka.net.manager", "kafka.net.connection", "kafka.conn",
                      "kafka.client_async")
_RECONNECT_NOISE = ("Connection failed", "Connection lost", "Bootstrap", "ECONNREFUSED",
                    "not ready", "Connection complete", "Closing connection")


class _ReconnectNoise(logging.Filter):
    """Moves kafka-python's per-attempt connection lines to DEBUG; passes the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and any(
                marker in str(record.msg) for marker in _RECONNECT_NOISE):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_NOISE = _ReconnectNoise()


def quiet_reconnect_logs() -> None:
    """Idempotent: install :class:`_ReconnectNoise` on kafka-python's connection loggers."""
    for name in _RECONNECT_LOGGERS:
        logger = logging.getLogger(name)
        if _NOISE not in logger.filters:
            logger.addFilter(_NOISE)


quiet_reconnect_logs()


# librdkafka's log facilities that report one broker's connection coming and going: a
# dead broker in a rolling restart produces several a second, all saying the same.
_RDKAFKA_RECONNECT = frozenset({"FAIL", "REQTMOUT", "BROKERFAIL", "CONNECT", "STATE",
                                "DESTROY", "TERMINATE"})


def librdkafka_log_level(level: int, text: str) -> int:
    """The logging level for one librdkafka log line: DEBUG for reconnect chatter.

    The problem itself reaches the caller once, through :class:`ProblemLog`.
    """
    facility = text.split(" ", 1)[0].rstrip(":")
    return logging.DEBUG if facility in _RDKAFKA_RECONNECT else level

