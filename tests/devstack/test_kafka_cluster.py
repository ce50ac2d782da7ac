"""The devstack's 3-node Kafka cluster (``devstack/_kafka_cluster.py``) does what failover
tests rely on: three registered brokers, fully replicated topics, a killed leader
replaced within seconds, a restarted node back in the ISR with its data, a graceful
stop that hands leadership over, group coordinators the tests can find.

Runs on the session's cluster (fixture ``kafka_cluster``, which starts it once).
"""

from __future__ import annotations

import re
import time

import pytest
from devstack_helpers import run_cli

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

_QUIET = {"request_timeout_ms": 10000, "reconnect_backoff_max_ms": 1000}


def _offsets_partition(group_id: str, partitions: int = 6) -> int:
    """The ``__consumer_offsets`` partition of an ASCII group id: Kafka's
    abs(String.hashCode) % n (Java's int arithmetic)."""
    h = 0
    for char in group_id:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def test_three_brokers_serve_a_fully_replicated_topic_and_name_group_coordinators(
        kafka_cluster, unique_name) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap.split(","), **_QUIET)
    try:
        brokers = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert sorted((b["broker_id"], b["is_fenced"]) for b in brokers) == [(1, False), (2, False), (3, False)]
    assert kafka_cluster.node_ids == [1, 2, 3]
    assert re.fullmatch(r"127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+", kafka_cluster.bootstrap)

    topic = kafka_cluster.create_topic(unique_name("rf3"), 3)
    assert [kafka_cluster.isr(topic, p) for p in range(3)] == [[1, 2, 3]] * 3
    assert kafka_cluster.leader(topic, 0) in (1, 2, 3)

    group = unique_name("group")
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap.split(","), group_id=group,
                             enable_auto_commit=False, **_QUIET)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(0, "", -1)})
    finally:
        consumer.close()
    coordinator = kafka_cluster.coordinator(group)
    assert coordinator == kafka_cluster.leader("__consumer_offsets", _offsets_partition(group))

    env = run_cli("cluster", "env", timeout=60)
    assert env.returncode == 0, env.stderr
    assert env.stdout == f"export SPARKBARRIER_KAFKA_CLUSTER_BOOTSTRAP={kafka_cluster.bootstrap}\n"
    status = run_cli("cluster", "status", timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert len(re.findall(r"kafka-cluster-\d\s+up\s+pid=\d+", status.stdout)) == 3, status.stdout


def test_a_killed_leader_is_replaced_and_its_node_rejoins_and_a_stop_hands_leadership_over(
        kafka_cluster, unique_name) -> None:
    from kafka import KafkaProducer

    topic = kafka_cluster.create_topic(unique_name("failover"), 1)
    leader = kafka_cluster.leader(topic, 0)
    meta = kafka_cluster.node_dir(leader) / "logs" / "meta.properties"
    identity = meta.read_text()

    # A crash: the controller fences the silent broker (session timeout 4 s) and
    # elects another in-sync replica; writes with acks=all go on with min ISR 2.
    assert kafka_cluster.kill(leader)
    killed = time.monotonic()
    successor = kafka_cluster.wait_leader(topic, 0, not_on=[leader], timeout_s=30)
    elected_s = time.monotonic() - killed
    assert successor != leader and elected_s < 20, elected_s
    kafka_cluster.wait_isr(topic, 2, timeout_s=30)
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap.split(","), acks="all", **_QUIET)
    try:
        producer.send(topic, b"written while a node is down").get(timeout=30)
    finally:
        producer.close(timeout=10)
    cli = run_cli("cluster", "status", timeout=60)
    assert cli.returncode == 3 and re.search(rf"kafka-cluster-{leader}\s+down", cli.stdout), cli.stdout
    assert run_cli("cluster", "env", timeout=60).returncode == 0  # a quorum still serves

    # Started again with its data: same storage identity (no format), back in the ISR.
    kafka_cluster.start(leader)
    kafka_cluster.wait_healthy(timeout_s=60)
    assert kafka_cluster.isr(topic, 0) == [1, 2, 3]
    assert meta.read_text() == identity

    # A graceful stop: controlled shutdown hands leadership over before the JVM exits
    # and leaves Kafka's clean-shutdown marker (a kill leaves none).
    current = kafka_cluster.leader(topic, 0)
    assert kafka_cluster.stop(current)
    assert (kafka_cluster.node_dir(current) / "logs" / ".kafka_cleanshutdown").exists()
    assert kafka_cluster.wait_leader(topic, 0, not_on=[current], timeout_s=10) != current
    kafka_cluster.start(current)
    kafka_cluster.wait_healthy(timeout_s=60)

    # One step of a rolling restart, on the leader of the moment.
    kafka_cluster.restart(kafka_cluster.leader(topic, 0))
    kafka_cluster.wait_healthy(timeout_s=60)
    assert kafka_cluster.isr(topic, 0) == [1, 2, 3]
    assert kafka_cluster.status().running
