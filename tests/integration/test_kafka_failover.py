"""A 3-broker cluster fails over under running queries; none fails, nothing is lost or doubled.

Real brokers (the devstack's 3-node KRaft cluster, replication factor 3, min ISR 2),
SIGKILLed and restarted while a producer writes all along and four queries read: the
compiled (``native``), ``confluent`` and ``kafka-python`` paths of ``barrier-kafka``,
and Spark's own ``format("kafka")`` with ``commit_kafka_offsets``. In turn:

1. the leader of partition 0 is SIGKILLed, then started again;
2. the broker coordinating every query's group is SIGKILLed (the groups share a
   coordinator), then started again;
3. a rolling restart: each broker stopped (controlled shutdown) and started in turn.

Each step asserts that no query failed and that group commits resume within one batch
(after the coordinator kill: while the coordinator is still away). At the end: every
record in the topic is in each sink exactly once, every acked record is in the topic,
no group was ever ahead of its query's commit log, and each group equals the end.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from failover_kit import FailoverRun

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(1200)]


def _no_failures(run: FailoverRun, step: str) -> None:
    assert run.exceptions() == {}, f"after {step}"


def test_queries_survive_leader_and_coordinator_kills_and_a_rolling_restart(
        spark, kafka_cluster, tmp_path, unique_name) -> None:
    run = FailoverRun(spark, kafka_cluster, tmp_path, unique_name("failover")[:60])
    started = time.monotonic()
    try:
        run.start()
        run.wait_batches(2)

        leader = kafka_cluster.leader(run.topic, 0)
        kafka_cluster.kill(leader)
        # barrier-kafka's paths must ride through with the leader down. Spark's JVM source
        # is not waited for here: its AdminClient sometimes waits out its own 60 s
        # (default.api.timeout.ms) on a dead leader (RESULTS, issue 50), which would only
        # lengthen the suite; it resumes by the coordinator step below, which waits for
        # every path, and ends exact like the others.
        run.wait_batches(2, paths=[p for p in run.queries if p != "jvm"])
        _no_failures(run, f"killing leader {leader}")
        kafka_cluster.start(leader)
        kafka_cluster.wait_healthy()

        coordinator = kafka_cluster.coordinator(run.queries["native"].group)
        assert all(kafka_cluster.coordinator(q.group) == coordinator
                   for q in run.queries.values())
        kafka_cluster.kill(coordinator)
        run.check_commits_resume()  # with the coordinator's broker still down
        _no_failures(run, f"killing coordinator {coordinator}")
        kafka_cluster.start(coordinator)
        kafka_cluster.wait_healthy()
        run.check_commits_resume()

        for node in kafka_cluster.node_ids:
            kafka_cluster.restart(node)
            kafka_cluster.wait_healthy()
            run.wait_batches(1)
        _no_failures(run, "the rolling restart")

        ends = run.drain()
        _no_failures(run, "the drain")
    finally:
        finished = run.stop()
    print(f"failover scenario: {time.monotonic() - started:.0f} s, {run.producer.sent} records, "
          f"{run.samples} group samples")

    assert finished == {"jvm": True}, "commit_kafka_offsets' finish() after the drain"
    assert run.violations == [], run.violations[:5]
    assert run.samples > 10
    in_topic = Counter(run.topic_values())
    assert sum(in_topic.values()) == sum(ends.values())
    assert {int(v) for v in in_topic} >= run.producer.acked, "acked records lost by the cluster"
    for path in run.queries:
        in_sink = Counter(run.sink_values(path))
        assert in_sink == in_topic, (
            f"{path}: missing {sorted((in_topic - in_sink).elements())[:10]}, "
            f"doubled {sorted((in_sink - in_topic).elements())[:10]}")
