"""The default reader keeps completing batches after a partition leader is SIGKILLed early.

Issue 44: on the default (compiled, pooled) reader a leader SIGKILL in the first minute
of a query stopped batches for about a minute, while the other clients and Spark's JVM
source rode through in 10-15 s. Here, on the devstack's 3-broker cluster (RF 3, min ISR
2), a query of the default reader reads a 4-partition topic that a producer fills at
~250 records/s (``maxOffsetsPerTrigger`` 1000, 1 s trigger, as the issue's user ran);
the leader of partition 0 is SIGKILLed about 15 s into the query. Within 30 s of the
kill a batch must complete that read partition 0 past the end it had at the kill: the
partition whose leader died made progress, not only the others. 30 s is a generous
bound on progress (polled, not slept); the ratio to the JVM source is the benchmark's
(benchmarks/bench_failover.py --issue44).

Issue 50, the second test: the same query, the leader SIGKILLed after a few batches and
started again 20 s later, as a crashed broker comes back. The longest time without a
completed batch, from the kill until a batch has read past the restart, must stay within
:data:`JVM_BOUND_S`. The bound comes from Spark's JVM source on this very cluster
(``broker.session.timeout.ms`` 4 s): it resumes once the controller has fenced the dead
broker and its consumer's next metadata answer names the new leader, about 4 s + 1 s,
plus a 1 s trigger and a batch: measured 5.3-6.8 s after a leader SIGKILL
(benchmarks/RESULTS.md, 2026-11-25 and 2026-11-26, devstack cluster; leaving out the
rounds where its AdminClient waited out its own 60 s). Twice the worst of those, for
a 2-core machine shared with Spark and the cluster: 14 s. That is below the 20 s the
broker stays down, so a reader that waits on the dead broker until it is back (the issue's
52-56 s) fails here, whatever happens after the restart; the stall is watched all along
(polled), not only at the end.
"""

from __future__ import annotations

import time

import pytest
from failover_kit import FailoverRun
from polling import wait_for

from sparkbarrier.connectors.storage._checkpoint_log import planned_batch

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(300)]

KILL_AT_QUERY_AGE_S = 15.0
PROGRESS_WITHIN_S = 30.0
JVM_BOUND_S = 14.0  # see the module docstring: 2 x the JVM source's worst 6.8 s here
DOWN_S = 20.0       # how long the killed leader stays down (the user: 20 s)


def test_a_batch_reads_past_a_killed_leaders_partition_within_30_s(
        spark, kafka_cluster, tmp_path, unique_name) -> None:
    run = FailoverRun(spark, kafka_cluster, tmp_path, unique_name("liveness")[:60],
                      paths=("native",), partitions=4, rate=250,
                      max_offsets_per_trigger=1000)
    q = run.queries["native"]
    channel = f"{run.topic}:0"
    started = time.monotonic()
    leader = None
    try:
        run.start()
        run.wait_batches(2, timeout=60)
        assert time.monotonic() - started < 60, "the query's first batches took a minute"
        # the kill's schedule in the query's life, not a wait for a condition
        time.sleep(max(0.0, started + KILL_AT_QUERY_AGE_S - time.monotonic()))
        at_kill = run.end_offsets()[channel]
        leader = kafka_cluster.leader(run.topic, 0)
        kafka_cluster.kill(leader)
        killed = time.monotonic()

        def read_past_the_kill() -> bool:
            done = [batch for batch, seen in q.batches if seen > killed]
            plan = planned_batch(str(q.checkpoint), done[-1]) if done else None
            return plan is not None and plan.offsets.get(channel, -1) > at_kill

        wait_for(read_past_the_kill, PROGRESS_WITHIN_S,
                 f"a batch reading {channel} past {at_kill} within {PROGRESS_WITHIN_S:g} s of "
                 f"SIGKILLing its leader (node {leader})")
        assert run.exceptions() == {}
    finally:
        run.stop()
        if leader is not None:
            kafka_cluster.start(leader)


def _newest_batch_at(q, since: float) -> float:
    """When ``q`` last completed a batch with data, or ``since`` if none since then."""
    return max([since] + [seen for _, seen in q.batches if seen > since])


@pytest.mark.timeout(360)
def test_batches_resume_within_the_jvm_bound_when_a_killed_leader_comes_back_20_s_later(
        spark, kafka_cluster, tmp_path, unique_name) -> None:
    run = FailoverRun(spark, kafka_cluster, tmp_path, unique_name("comeback")[:60],
                      paths=("native",), partitions=4, rate=250,
                      max_offsets_per_trigger=1000, sink="foreachBatch")
    q = run.queries["native"]
    channel = f"{run.topic}:0"
    leader = None
    try:
        run.start()
        run.wait_batches(3, timeout=120)
        leader = kafka_cluster.leader(run.topic, 0)
        at_kill = run.end_offsets()[channel]
        kafka_cluster.kill(leader)
        killed = time.monotonic()

        def within_bound(until: float, what: str) -> None:
            """Poll until ``until``: the newest batch never older than the bound."""
            def over() -> bool:
                gap = time.monotonic() - _newest_batch_at(q, killed)
                assert gap <= JVM_BOUND_S, (
                    f"no batch for {gap:.1f} s {what} (node {leader} SIGKILLed "
                    f"{time.monotonic() - killed:.1f} s ago; bound {JVM_BOUND_S:g} s)")
                return time.monotonic() >= until
            wait_for(over, until - time.monotonic() + 5, what)

        def read_past(offset: int, after: float) -> bool:
            done = [batch for batch, seen in q.batches if seen > after]
            plan = planned_batch(str(q.checkpoint), done[-1]) if done else None
            return plan is not None and plan.offsets.get(channel, -1) > offset

        wait_for(lambda: read_past(at_kill, killed), JVM_BOUND_S,
                 f"a batch reading {channel} past {at_kill} within {JVM_BOUND_S:g} s of "
                 f"SIGKILLing its leader (node {leader})")
        within_bound(killed + DOWN_S, "while the leader was down")
        kafka_cluster.start(leader)  # returns once it serves and is unfenced
        restarted = time.monotonic()
        at_restart = run.end_offsets()[channel]
        wait_for(lambda: read_past(at_restart, restarted), JVM_BOUND_S,
                 f"a batch reading {channel} past {at_restart} within {JVM_BOUND_S:g} s "
                 f"of node {leader}'s restart")
        within_bound(time.monotonic() + 5, "after the leader came back")
        stall = run.stall_s("native", killed, time.monotonic())
        assert stall <= JVM_BOUND_S, f"stalled {stall:.1f} s (bound {JVM_BOUND_S:g} s)"
        assert run.exceptions() == {}
    finally:
        run.stop()
        if leader is not None:
            kafka_cluster.start(leader)
