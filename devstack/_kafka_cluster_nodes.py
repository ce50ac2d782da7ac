"""How one node of the devstack's Kafka cluster is made: its config, storage and command.

Kept apart from the life cycle (``_kafka_cluster``) because this is the part that
fixes the cluster's behaviour under faults. The settings below are the test
contract: what fails over, how fast, and what is never lost.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from .._exceptions import DevstackError
from . import _kafka
from ._jvm import Java
from ._maven import Classpath
from ._process import log_tail

__all__ = ["HEAP", "OFFSETS_PARTITIONS", "PROFILES", "command", "format_storage", "profile_of", "server_properties"]

HEAP = "384m"
# Small heaps, and C1 only: three brokers start side by side on two cores beside the
# stack and Spark; without C2 a fresh cluster is up in ~8 s instead of ~13 s, and test
# traffic never needs C2's code.
_JVM_OPTIONS = ("-Xms128m", "-XX:TieredStopAtLevel=1", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true")
_FORMAT_TIMEOUT_S = 120.0


# Failover in seconds: a silent broker is fenced after 4 s, a voter that hears no leader
# for 2 s starts an election, a follower 5 s behind leaves the ISR (and a restarted one is
# back in it as soon as it has caught up). Kafka's defaults are 2 s / 9 s / 1 s / 2 s / 30 s.
_FAST_FAILOVER = {
    "broker.heartbeat.interval.ms": 1000,
    "broker.session.timeout.ms": 4000,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "replica.lag.time.max.ms": 5000,
}
# Also small on the devstack only: the groups' and transactions' log partitions (Kafka's
# default is 50 each; the failover harness picks group ids on one coordinator from this
# count, see OFFSETS_PARTITIONS) and no initial rebalance delay (Kafka's: 3 s).
_SMALL_GROUPS = {
    "offsets.topic.num.partitions": 6,
    "transaction.state.log.num.partitions": 6,
    "group.initial.rebalance.delay.ms": 0,
}
PROFILES = ("devstack", "broker-defaults")
OFFSETS_PARTITIONS = {"devstack": 6, "broker-defaults": 50}
"""``__consumer_offsets`` partitions per profile: which broker coordinates a group."""
"""``devstack``: the test contract, failover in seconds (:data:`_FAST_FAILOVER`).
``broker-defaults``: the same durability, but Kafka's own failover timings, as users'
clusters run: what ``bench_failover.py --broker-defaults`` measures, because a stall
that only shows with a 9 s session timeout is invisible on the fast profile."""
_PROFILE_LINE = "# sparkbarrier devstack profile: "


def profile_of(properties: str) -> str | None:
    """The profile a ``server.properties`` written by :func:`server_properties` was made
    with (None: written before profiles existed, so ``devstack``'s or unknown)."""
    first = properties.split("\n", 1)[0]
    return first[len(_PROFILE_LINE):].strip() if first.startswith(_PROFILE_LINE) else None


def server_properties(node_id: int, data: Path, ports: Mapping[int, tuple[int, int]],
                      profile: str = "devstack") -> str:
    """``server.properties`` of node ``node_id``; ``ports``: node id -> (broker, controller).

    ``profile`` (:data:`PROFILES`) picks the failover timings; everything else is alike."""
    if profile not in PROFILES:
        raise DevstackError(f"unknown kafka cluster profile {profile!r}", fix=f"use one of {list(PROFILES)}")
    broker, controller = ports[node_id]
    settings = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": ",".join(f"{n}@127.0.0.1:{c}" for n, (_, c) in sorted(ports.items())),
        "listeners": f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": data / "logs",
        # Durability: three replicas, writes need two in sync, an out-of-sync replica
        # is never elected, and a topic exists only once a test has created it.
        "num.partitions": 1,
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
        "unclean.leader.election.enable": "false",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": 3,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.min.isr": 2,
        **(_FAST_FAILOVER | _SMALL_GROUPS if profile == "devstack" else {}),
        "controlled.shutdown.enable": "true",
        # Small: three of these run beside the stack and Spark on two cores.
        "num.network.threads": 2,
        "num.io.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
        "log.segment.bytes": 16 * 1024 * 1024,
        "log.retention.hours": 24,
    }
    return _PROFILE_LINE + profile + "\n" + "".join(f"{key}={value}\n" for key, value in settings.items())


def _options(data: Path) -> tuple[str, ...]:
    return (*_JVM_OPTIONS, f"-Dlog4j2.configurationFile={data / 'log4j2.properties'}")


def command(java: Java, classpath: Classpath, *, marker: str, data: Path) -> list[str]:
    """The node's server command (its config and log4j config live in ``data``)."""
    return java.command(marker=marker, heap=HEAP, classpath=classpath.as_arg(), main=_kafka.KAFKA_MAIN,
                        args=(str(data / "server.properties"),), options=_options(data))


def format_storage(java: Java, classpath: Classpath, nodes: Mapping[int, tuple[Path, Path]]) -> None:
    """``StorageTool format`` for every node side by side, with one new cluster id.

    ``nodes``: node id -> (data dir, log file the tool's output is appended to). Only a
    fresh cluster is formatted: a node that restarts keeps its storage. Raises
    ``DevstackError`` with the failing node's log tail.
    """
    cluster_id = _kafka._cluster_id()
    runs = {}
    for node_id, (data, log_path) in nodes.items():
        cmd = java.command(marker="-Dsparkbarrier.devstack.tool=kafka-cluster-storage-format", heap="256m",
                           classpath=classpath.as_arg(), main=_kafka.STORAGE_TOOL,
                           args=("format", "-t", cluster_id, "-c", str(data / "server.properties")),
                           options=_options(data))
        with open(log_path, "ab") as out:
            runs[node_id] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + _FORMAT_TIMEOUT_S
    try:
        for node_id, proc in runs.items():
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            if code != 0:
                log_path = nodes[node_id][1]
                raise DevstackError(f"kafka storage format of cluster node {node_id} failed (exit {code}; "
                                    f"log: {log_path})", fix="read the log tail above", log_path=str(log_path),
                                    log_tail=log_tail(log_path))
    except subprocess.TimeoutExpired as exc:
        raise DevstackError(f"kafka storage format of the cluster hung for {_FORMAT_TIMEOUT_S:.0f}s",
                            fix=f"read {nodes[min(nodes)][1]}") from exc
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
