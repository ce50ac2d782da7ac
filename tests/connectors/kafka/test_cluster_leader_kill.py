"""A partition's leader SIGKILLed early in a query: batches stall only as long as the
cluster takes to move the leader, and the log says what each long wait waited on, when
it ended and how long it lasted (issue 58).

Issue 58 read a minute-long stall of the default reader into two lines of the driver's
log: a wait on the latest-offset lookup that had passed 10 s, then nothing for ~50 s.
Nothing had waited that long. The repro script takes its stall from the mtimes of the
checkpoint's ``commits/`` files, and Spark had purged those of the leader kill by the
time it looked (it keeps the last 100 batches; the default reader's case, with a rolling
restart more than the others, ran 144-156): 77.6 s by the script, 14.1 s by the batch
times in the script's own sink, of which the cluster took ~12 s to fence the dead broker
and elect a leader (benchmarks/RESULTS.md, issue 58). The waits' end was logged at INFO,
which Spark's Python workers (no logging set up) never show, so the log could not tell.

Here a query's calls run in this process, without Spark, so their log lines are seen:
the planner's (``initialOffset``, ``latestOffset``, ``partitions``) and its read tasks'
(``read``, the default compiled reader), round after round, on the devstack's 3-node
cluster (replication factor 3, min ISR 2, a dead broker fenced after 4 s) while a
producer writes ~250 records/s into 4 partitions. After :data:`ROUNDS_BEFORE` rounds the
leader of partition 0 is SIGKILLed, stays down :data:`DOWN_S` and is started again.

* The stall is bounded: no gap between completed rounds exceeds :data:`STALL_BOUND_S`
  (the bound of ``test_kafka_leader_kill_liveness``: twice the JVM source's worst stall
  on this cluster), and within it a round reads partition 0 past its end at the kill.
* The log tells the waits: the warning threshold is lowered to 1 s (the cluster's 4 s
  are below the 10 s default), at least one wait is warned about, and every one has its
  end line at WARNING -- the same call and partition, how long it lasted in all (at
  least what its start line said), and that it answered. On the code before issue 58
  the end was an INFO line, and this fails.

About 30 s (plus the cluster's start when it is not up); polled, never slept.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time

import pytest
from kafka import KafkaProducer
from polling import wait_for
from pyspark.sql.streaming.datasource import ReadAllAvailable

from sparkbarrier.connectors.kafka import parse_source_options, source_schema
from sparkbarrier.connectors.kafka.client import _waits
from sparkbarrier.connectors.kafka.planner._planner import KafkaStreamPlanner

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

ROUNDS_BEFORE = 3
DOWN_S = 12.0        # the killed leader stays down (fenced after 4 s here)
AFTER_S = 6.0        # rounds go on this long after it is back
STALL_BOUND_S = 14.0  # tests/integration/test_kafka_leader_kill_liveness.py's JVM_BOUND_S
WARN_AFTER_S = 1.0

_STARTED = re.compile(r"^barrier-kafka: (?P<where>.+?) waits on Kafka: (?P<call>.+?) of "
                      r"(?P<partition>.+?) on .+, (?P<so_far>[\d.]+) s so far$")
_ENDED = re.compile(r"^barrier-kafka: (?P<where>.+?) waited on Kafka (?P<took>[\d.]+) s: "
                    r"(?P<call>.+?) of (?P<partition>.+?) on .+; (?P<outcome>.+)$")


class _Producer(threading.Thread):
    """~250 records/s, round-robin over the partitions, until :meth:`finish`."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="leader-kill-producer", daemon=True)
        self.topic = topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all",
                                      retries=1_000_000, delivery_timeout_ms=120_000,
                                      request_timeout_ms=10_000, linger_ms=5)
        self._halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._halt.is_set():
            for _ in range(25):
                self.producer.send(self.topic, value=str(n).encode(), partition=n % 4)
                n += 1
            self._halt.wait(0.1)

    def finish(self) -> None:
        self._halt.set()
        self.join(30)
        self.producer.close(30)


class _Query:
    """Spark's micro-batch loop over the planner, reduced to its calls: plan the next
    range, read every planned partition to its end, go on from there."""

    def __init__(self, planner: KafkaStreamPlanner) -> None:
        self.planner = planner
        self.start = planner.initialOffset()
        self.done: list[tuple[float, dict]] = []  # (completed at, planned end offsets)

    def round(self) -> None:
        end = self.planner.latestOffset(self.start, ReadAllAvailable())
        if end != self.start:
            for part in self.planner.partitions(self.start, end):
                for _ in self.planner.read(part):
                    pass
        self.done.append((time.monotonic(), end["offsets"]))
        self.start = end

    def read_past(self, channel: str, offset: int, since: float) -> bool:
        topic, partition = channel.rsplit(":", 1)
        return any(at > since and offsets.get(topic, {}).get(partition, -1) > offset
                   for at, offsets in self.done)

    def longest_gap(self, since: float) -> float:
        times = [since] + [at for at, _ in self.done if at > since] + [time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(times))


def test_a_killed_leader_stalls_rounds_only_until_the_cluster_moves_it_and_each_wait_logs_its_end(
        kafka_cluster, unique_name, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_waits, "WARN_AFTER_S", WARN_AFTER_S)
    caplog.set_level(logging.WARNING)
    topic = kafka_cluster.create_topic(unique_name("leaderkill")[:60], partitions=4)
    channel = f"{topic}:0"
    producer = _Producer(kafka_cluster.bootstrap, topic)
    producer.start()
    planner = KafkaStreamPlanner(parse_source_options({
        "kafka.bootstrap.servers": kafka_cluster.bootstrap, "subscribe": topic,
        "startingOffsets": "earliest", "commitOffsets": "false"}), source_schema(False))
    leader = None
    halt = threading.Event()
    failures: list[BaseException] = []
    query = _Query(planner)

    def loop() -> None:
        try:
            while not halt.is_set():
                query.round()
        except BaseException as exc:  # noqa: BLE001 -- reported by the test thread
            failures.append(exc)

    runner = threading.Thread(target=loop, name="leader-kill-query", daemon=True)
    try:
        runner.start()
        wait_for(lambda: _going(failures) and len(query.done) >= ROUNDS_BEFORE, 60,
                 f"{ROUNDS_BEFORE} rounds")
        leader = kafka_cluster.leader(topic, 0)
        at_kill = max(offsets[topic]["0"] for _, offsets in query.done)
        kafka_cluster.kill(leader)
        killed = time.monotonic()

        def within_bound(until: float, what: str) -> bool:
            gap = query.longest_gap(killed)
            assert gap <= STALL_BOUND_S, (
                f"no round completed for {gap:.1f} s {what} (node {leader} SIGKILLed "
                f"{time.monotonic() - killed:.1f} s ago; bound {STALL_BOUND_S:g} s)")
            return time.monotonic() >= until

        wait_for(lambda: _going(failures) and within_bound(killed, "after the kill")
                 and query.read_past(channel, at_kill, killed),
                 STALL_BOUND_S + 5, f"a round reading {channel} past {at_kill}")
        wait_for(lambda: _going(failures) and within_bound(killed + DOWN_S, "while the leader was down"),
                 DOWN_S + 5, "the leader's time down")
        kafka_cluster.start(leader)  # returns once it serves and is unfenced
        back = time.monotonic()
        wait_for(lambda: _going(failures) and within_bound(back + AFTER_S, "after the leader came back"),
                 AFTER_S + STALL_BOUND_S, "rounds after the restart")
    finally:
        halt.set()
        runner.join(60)
        planner.stop()
        producer.finish()
        if leader is not None:
            kafka_cluster.start(leader)
    assert failures == [], failures
    stall = query.longest_gap(killed)

    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    started = [m.groupdict() for line in lines if (m := _STARTED.match(line))]
    ended = [m.groupdict() for line in lines if (m := _ENDED.match(line))]
    assert started, f"no wait passed {WARN_AFTER_S:g} s after a leader kill: {lines}"
    for wait in started:
        ends = [e for e in ended if (e["where"], e["call"], e["partition"])
                == (wait["where"], wait["call"], wait["partition"])
                and float(e["took"]) >= float(wait["so_far"])]
        assert ends, f"a wait that was warned about has no end line: {wait}; lines: {lines}"
        assert ends[0]["outcome"] == "answered", ends[0]
    print(f"leader kill: longest gap between rounds {stall:.1f} s; waits: "
          + "; ".join(f"{e['where']} {e['call']} {e['took']} s" for e in ended))



def _going(failures: list[BaseException]) -> bool:
    """True while the query has not failed; raises its failure once it has."""
    if failures:
        raise AssertionError("the query failed") from failures[0]
    return True
