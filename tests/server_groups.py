"""Session servers that live only as long as the tests that use them (tests only).

A session-scoped server fixture registers its stop with :func:`stop_when_unused`; it
then stops right after the last collected test that uses it (``tests/conftest.py``'s
hooks call :func:`note_users` and :func:`stop_after`), not at the end of the session, so
a group's servers (the fault suite's private stack, the 3-node Kafka cluster, HDFS, the
KDC and its Kerberized servers) do not share the two cores with every later group.
Dependents stop before what they depend on (the KDC last). A fixture's own ``finally``
calls the same stop, which runs once.

Two workers (pytest-xdist, ``./dev test``): :func:`worker_groups` puts every test of a
file, and every file that uses one of these servers (or the example sink's PostgreSQL),
into one ``xdist_group``, so each session server starts in one worker only, a
module-scoped server (a test file's own HDFS) once, and its last user runs where it
started. Why two workers on two cores: most of a server test's time is waiting (a JVM
starting, a trigger, a poll), so two queues fill the cores the suite left idle.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

GROUPED_SERVERS = ("private_stack", "kafka_cluster", "hdfs", "kerberos_hbase", "kerberos_kafka", "kdc")
# Session servers that are not stopped early but must still run in one worker only.
_ONE_WORKER = (*GROUPED_SERVERS, "postgres_dsn")
_last_user: dict[str, pytest.Item] = {}  # the item itself: xdist's loadgroup renames nodeids
_stops: dict[str, Callable[[], None]] = {}


# Seconds each file's tests took in a two-worker run (setup included; 2026-11-28, two
# cores, other work beside it), for the order of the groups only: a stale or missing figure
# can only make the run's end less even, never change what runs. Files under 20 s are left
# out; a slow test of a file not listed counts as _UNMEASURED_SLOW_S.
_MEASURED_S = {
    "tests/integration/test_faults.py": 680,
    "tests/integration/test_hdfs_checkpoints.py": 623,
    "tests/examples/test_postgres_sink.py": 421,
    "tests/integration/test_faults_aggregation.py": 391,
    "tests/integration/test_faults_jvm_source.py": 382,
    "tests/integration/test_kafka_failover.py": 149,
    "tests/integration/test_demo.py": 143,
    "tests/devstack/test_stack.py": 129,
    "tests/integration/test_gateway_failover.py": 113,
    "tests/connectors/kafka/test_source_edges.py": 102,
    "tests/integration/test_cluster.py": 92,
    "tests/integration/test_hdfs_ha.py": 91,
    "tests/integration/test_speculation.py": 88,
    "tests/connectors/hbase/test_attempts.py": 87,
    "tests/integration/test_kafka_leader_kill_liveness.py": 85,
    "tests/connectors/kafka/test_secured_source.py": 79,
    "tests/devstack/test_hdfs.py": 78,
    "tests/examples/test_kafka_to_hbase_example.py": 63,
    "tests/connectors/kafka/test_source_reads.py": 63,
    "tests/examples/test_kafka_counts_example.py": 61,
    "tests/connectors/hbase/test_kerberos_sink.py": 61,
    "tests/test_notebook.py": 53,
    "tests/connectors/kafka/test_kerberos_source.py": 45,
    "tests/connectors/hbase/test_aggregations.py": 44,
    "tests/integration/test_hdfs_ha_kerberos.py": 37,
    "tests/devstack/test_hbase_kerberos.py": 36,
    "tests/integration/test_hdfs_namenode_restarts.py": 35,
    "tests/connectors/kafka/test_cluster_leader_kill.py": 35,  # 2026-11-29, alone
    "tests/integration/test_kerberos_pipeline.py": 32,
    "tests/connectors/kafka/test_jvm_commits.py": 32,
    "tests/devstack/test_kafka_cluster.py": 29,
    "tests/connectors/hbase/test_spark_sink.py": 28,
    "tests/connectors/kafka/test_jvm_commits_connect.py": 27,
    "tests/connectors/kafka/test_source_options_spark.py": 25,
    "tests/connectors/test_resume.py": 24,
    "tests/connectors/kafka/test_cluster_mute_broker.py": 24,
    "tests/connectors/kafka/test_partition_reader.py": 23,
    "tests/test_layout.py": 22,
    "tests/test_static_checks.py": 20,
}
_UNMEASURED_SLOW_S = 10.0


def note_users(items: list[pytest.Item]) -> None:
    for item in items:
        for name in GROUPED_SERVERS:
            if name in getattr(item, "fixturenames", ()):
                _last_user[name] = item


def stop_after(item: pytest.Item) -> None:
    for name in GROUPED_SERVERS:
        if _last_user.get(name) is item and name in _stops:
            _stops.pop(name)()


def stop_when_unused(name: str, stop: Callable[[], None]) -> Callable[[], None]:
    """Register ``stop`` for after the last test using ``name``; returns what the fixture's
    own ``finally`` calls (a no-op once it ran)."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            stop()

    _stops[name] = once
    return once


def worker_groups(items: list[pytest.Item]) -> None:
    """Mark each item with the ``xdist_group`` of its file, files joined by the session
    servers their tests use (union-find over files and server names); then move the
    groups that hold a slow test (``slow``, or under tests/integration or tests/examples)
    ahead of the rest, the longest first (``_MEASURED_S``), each group's own order kept.

    Why the order: xdist hands out groups in this order (``configure_xdist`` turns off its
    own reordering by test count, which put the few-test slow groups last), so the slow
    groups run while the many short ones fill in around them and end the run: longest
    first, no worker left alone with a slow group at the end."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for item in items:
        file = item.nodeid.split("::", 1)[0]
        find(file)
        for name in _ONE_WORKER:
            if name in getattr(item, "fixturenames", ()):
                parent[find(file)] = find(f"server:{name}")
    weight: dict[str, float] = {}
    for file in {item.nodeid.split("::", 1)[0] for item in items}:
        weight[find(file)] = weight.get(find(file), 0.0) + _MEASURED_S.get(file, 0.0)
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        root = find(file)
        item.add_marker(pytest.mark.xdist_group(root.replace("/", ".")))
        if file not in _MEASURED_S and (item.get_closest_marker("slow")
                                        or file.startswith(("tests/integration/", "tests/examples/"))):
            weight[root] += _UNMEASURED_SLOW_S
    items.sort(key=lambda item: -weight[find(item.nodeid.split("::", 1)[0])])


def configure_xdist(config: pytest.Config) -> None:
    """Keep the group order :func:`worker_groups` chose: xdist's loadgroup otherwise
    sorts groups by their number of tests, most first."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
