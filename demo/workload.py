"""The demo's input: a keyed stream of upserts and deletes, and the state it should produce.

:class:`Workload` produces JSON change events to a Kafka topic from a background thread;
keys repeat (a small key space), so rows are updated, deleted and re-created many times.
Every send's (partition, offset) is kept, so :func:`expected_state` can replay exactly what
Kafka holds, in Kafka's order, into the table the pipeline must end up with.

Event value (JSON): ``{"id": "user-007", "op": "upsert"|"delete", "v": 42, "city": "oslo",
"ts": 1700000000000}``; the Kafka key is ``id``, so one key always lands on one partition
and its events keep their order.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer

__all__ = ["Event", "Workload", "create_topic", "expected_state", "transform_expected"]

CITIES = ("oslo", "lyon", "porto", "graz", "turku", "cork", "gent", "brno")


@dataclass(frozen=True)
class Event:
    """One produced record and where Kafka put it."""

    key: str
    value: dict[str, Any]
    partition: int
    offset: int


def create_topic(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                            wait_for_metadata=True)
    finally:
        admin.close()


class Workload:
    """Produces ``rate`` events/s over ``keys`` keys until :meth:`stop` (thread-safe)."""

    def __init__(self, bootstrap: str, topic: str, *, rate: int = 400, keys: int = 500,
                 delete_ratio: float = 0.15, seed: int = 7) -> None:
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=10,
                                       max_in_flight_requests_per_connection=1)
        self._topic, self._rate, self._keys = topic, rate, keys
        self._delete_ratio = delete_ratio
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._pending: list[tuple[Any, str, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)
        self._error: BaseException | None = None
        self.sent = 0

    def start(self) -> Workload:
        self._thread.start()
        return self

    def _event(self, seq: int) -> tuple[str, dict[str, Any]]:
        key = f"user-{self._rng.randrange(self._keys):04d}"
        op = "delete" if self._rng.random() < self._delete_ratio else "upsert"
        value = {"id": key, "op": op, "v": seq, "city": self._rng.choice(CITIES),
                 "ts": int(time.time() * 1000)}
        return key, value

    def _run(self) -> None:
        tick = 0.05
        per_tick = max(1, int(self._rate * tick))
        try:
            next_at = time.monotonic()
            while not self._stop.is_set():
                for _ in range(per_tick):
                    key, value = self._event(self.sent)
                    future = self._producer.send(self._topic, key=key.encode(),
                                                 value=json.dumps(value).encode())
                    self._pending.append((future, key, value))
                    self.sent += 1
                next_at += tick
                self._stop.wait(max(0.0, next_at - time.monotonic()))
            self._producer.flush()
        except BaseException as exc:  # surfaced by stop(); the thread must not die silently
            self._error = exc
            raise

    def stop_quietly(self) -> None:
        """Stop the thread on an error path (events are discarded; idempotent).

        Also safe when :meth:`start` never ran (the query failed to start): joining an
        unstarted thread would raise and hide the real error.
        """
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(10)

    def stop(self, timeout: float = 30) -> list[Event]:
        """Stop producing, flush, and return every event with its partition and offset."""
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("producer thread did not stop in time")
        if self._error is not None:
            raise RuntimeError(f"producer failed: {self._error!r}") from self._error
        events = []
        for future, key, value in self._pending:
            meta = future.get(timeout=timeout)
            events.append(Event(key, value, meta.partition, meta.offset))
        self._producer.close()
        return events


def transform_expected(value: dict[str, Any], partition: int, offset: int) -> dict[str, Any]:
    """What the pipeline's transformation makes of one upsert (mirrors demo/pipeline.py)."""
    return {"v": value["v"], "city": value["city"].upper(), "src_partition": partition,
            "src_offset": offset}


def expected_state(events: list[Event]) -> dict[str, dict[str, Any]]:
    """Apply ``events`` in Kafka order (per key = per partition): the rows HBase must hold."""
    state: dict[str, dict[str, Any]] = {}
    for ev in sorted(events, key=lambda e: (e.partition, e.offset)):
        if ev.value["op"] == "delete":
            state.pop(ev.key, None)
        else:
            state[ev.key] = transform_expected(ev.value, ev.partition, ev.offset)
    return state
