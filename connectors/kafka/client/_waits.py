"""What a batch waits for on Kafka: a line when a wait passes 10 s, one when it ends, and every slow call.

Why: a query stopped on a dead broker used to say nothing at all for a minute (issue 50):
the planner and the read tasks sat inside client calls that neither failed nor returned,
so no retry logged. Every call of theirs that can wait on a broker runs inside
:func:`waiting`, which names it (the call, the partition, the broker asked). A watchdog
thread, one per process and idle while nothing waits, logs once (WARNING) a wait that
passes :data:`WARN_AFTER_S`, with how long it has lasted so far, and once more, also at
WARNING, when it ended: how long it lasted in all, on which broker, and whether the call
answered or ended with an error. The end line has the start line's level on purpose:
Spark's Python workers set no logging up, so only WARNING and above reach the driver's
log (Python's last-resort handler), and in issue 58 a start line without its end was
read as a wait of a minute. In the planner's process (the driver) that covers the offset
lookups and discovery; in the executors' Python workers the range reads (their lines
reach the driver's log in local mode, and the executor's stderr on a cluster).

Nothing secret reaches these lines: a partition, a broker's node id and ``host:port``, a
call's name and seconds.

``SPARKBARRIER_KAFKA_WAITS``: a file to which every wait of at least
:data:`RECORD_AFTER_S` is appended as one JSON line (``benchmarks/bench_failover.py``
reads it to say which call a stall waited on). Unset: nothing is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["ENV", "RECORD_AFTER_S", "WARN_AFTER_S", "Wait", "begin", "end", "waiting"]

log = logging.getLogger("sparkbarrier.connectors.kafka")

WARN_AFTER_S = 10.0
RECORD_AFTER_S = 1.0
ENV = "SPARKBARRIER_KAFKA_WAITS"
_TICK_S = 1.0

Broker = Callable[[], str] | str


@dataclass
class Wait:
    """One call in flight: ``broker`` may be a callable, asked only when a line is written,
    and :meth:`on` may point the wait at another broker while it lasts."""

    call: str
    partition: str
    broker: Broker
    where: str
    started: float = field(default_factory=time.monotonic)
    warned: bool = False

    def on(self, broker: Broker) -> None:
        self.broker = broker

    def broker_now(self) -> str:
        try:
            return self.broker() if callable(self.broker) else self.broker
        except Exception:  # noqa: BLE001 -- a line about a wait must never fail the wait
            return "unknown broker"

    def describe(self, took: float) -> str:
        return (f"{self.where} waits on Kafka: {self.call} of {self.partition} on "
                f"{self.broker_now()}, {took:.1f} s so far")

    def ended(self, took: float, outcome: str) -> str:
        """The line of a wait that is over: what, on which broker, how long, how it ended."""
        return (f"{self.where} waited on Kafka {took:.1f} s: {self.call} of {self.partition} "
                f"on {self.broker_now()}; {outcome}")


_lock = threading.Lock()
_active: dict[int, Wait] = {}
_watchdog: threading.Thread | None = None
_wake = threading.Event()


def _watch() -> None:
    while True:
        time.sleep(_TICK_S)
        now = time.monotonic()
        with _lock:
            due = [w for w in _active.values() if not w.warned and now - w.started >= WARN_AFTER_S]
            for w in due:
                w.warned = True
            idle = not _active
            if idle:
                _wake.clear()  # under the lock: a wait registered after this sets it again
        for w in due:
            log.warning("barrier-kafka: %s", w.describe(now - w.started))
        if idle:
            _wake.wait()  # parked until the next wait starts


def _start_watchdog() -> None:
    global _watchdog
    if _watchdog is None or not _watchdog.is_alive():
        _watchdog = threading.Thread(target=_watch, name="barrier-kafka-waits", daemon=True)
        _watchdog.start()


def _record(w: Wait, took: float, outcome: str) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"at": time.time(), "took_s": round(took, 3), "where": w.where,
                       "call": w.call, "partition": w.partition, "broker": w.broker_now(),
                       "outcome": outcome, "pid": os.getpid()})
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")  # one short append: whole lines from many processes


def begin(call: str, partition: str, broker: Broker, where: str = "driver") -> Wait:
    """Start one named wait; :func:`end` ends it (for a wait that spans loop rounds)."""
    w = Wait(call, partition, broker, where)
    with _lock:
        _active[id(w)] = w
        _start_watchdog()
    _wake.set()
    return w


def end(w: Wait, failed: BaseException | None = None) -> None:
    """End ``w``: a line if it was warned about, a record if it was slow. Idempotent.

    ``failed``: the exception the call ended with, if any; the line names its type only
    (a client's message may quote a setting)."""
    with _lock:
        if _active.pop(id(w), None) is None:
            return
    took = time.monotonic() - w.started
    outcome = "answered" if failed is None else f"ended with {type(failed).__name__}"
    if w.warned:
        log.warning("barrier-kafka: %s", w.ended(took, outcome))
    if took >= RECORD_AFTER_S:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("barrier-kafka: %s", w.ended(took, outcome))
        _record(w, took, outcome)


@contextlib.contextmanager
def waiting(call: str, partition: str, broker: Broker, where: str = "driver") -> Iterator[Wait]:
    """Run the block as one named wait on Kafka (see the module docstring)."""
    w = begin(call, partition, broker, where)
    try:
        yield w
    except BaseException as exc:
        end(w, exc)
        raise
    end(w)
