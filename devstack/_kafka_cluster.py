"""The devstack's optional 3-node Kafka cluster, for failover tests.

Why a second Kafka: the stack's broker is a single node, so nothing on it can fail
over: a partition's leader, a group's coordinator and the active controller never
move, and killing the broker kills Kafka. Failover tests kill brokers under running
queries and need leaders and coordinators that move. So this is a cluster of three
KRaft nodes on 127.0.0.1, each broker and controller (a static 3-voter quorum),
PLAINTEXT only, with its own ports (``Port.KAFKA_CLUSTER_<n>``,
``Port.KAFKA_CLUSTER_CONTROLLER_<n>``) and data (``<home>/data/kafka-cluster/node-<n>``),
run on the stack's Kafka jars and Java. Its settings, which are the test contract
(RF 3, min ISR 2, no auto-created topics, fenced within ~4 s), are in
``_kafka_cluster_nodes`` (``profile="broker-defaults"`` keeps the durability but takes
Kafka's own failover timings, fenced after 9 s: what users' clusters run, for the
failover bench); the questions tests ask (leader, ISR, coordinator) are answered by
``_kafka_cluster_admin``.

Life cycle: ``up`` is idempotent. It leaves a cluster alone whose three nodes are
ours and serving (after a health check); otherwise it stops what is left and starts
afresh, wiping the data and formatting storage once for all three nodes (one cluster
id). ``kill`` (SIGKILL), ``stop`` (SIGTERM: controlled shutdown), ``freeze``/``thaw``
(SIGSTOP/SIGCONT: a broker that is there but mute) and ``start`` act on one node and
keep its data and ports, so a restart never formats. ``down`` stops the three; the
stack's ``down`` does too.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import DevstackError
from . import _kafka, _kafka_cluster_nodes as _nodes
from ._config import Paths, Port, port_requests
from ._jvm import Java, find_java, write_log4j_config
from ._kafka_cluster_admin import ClusterAdmin, ClusterQuestions, poll
from ._maven import Classpath, resolve_classpath
from ._process import (
    ProcessRecord,
    ProcessStatus,
    check_requested_ports,
    choose_ports,
    is_ours,
    kill_processes,
    log_tail,
    marker_for,
    port_accepts,
    spawn,
    stack_lock,
    stop_processes,
    stop_recorded,
)

__all__ = ["CLUSTER_PORTS", "KAFKA_CLUSTER_ENV", "NAMES", "NODE_IDS", "ClusterStatus", "KafkaCluster",
           "NodeStatus"]

log = logging.getLogger(__name__)

KAFKA_CLUSTER_ENV = "SPARKBARRIER_KAFKA_CLUSTER_BOOTSTRAP"
"""The cluster's bootstrap servers, ``127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>``."""

NAME = "kafka-cluster"
NODE_IDS = (1, 2, 3)
NAMES = tuple(f"{NAME}-{n}" for n in NODE_IDS)  # one process record per node
_NODE_PORTS: dict[int, tuple[Port, Port]] = {  # node id -> (broker, controller)
    1: (Port.KAFKA_CLUSTER_1, Port.KAFKA_CLUSTER_CONTROLLER_1),
    2: (Port.KAFKA_CLUSTER_2, Port.KAFKA_CLUSTER_CONTROLLER_2),
    3: (Port.KAFKA_CLUSTER_3, Port.KAFKA_CLUSTER_CONTROLLER_3),
}
CLUSTER_PORTS = tuple(port for pair in _NODE_PORTS.values() for port in pair)
_STOP_GRACE_S = 60.0  # controlled shutdown takes seconds; SIGKILL after this
# ``down`` stops all three at once: the last ones wait for a quorum that left, and ``up``
# wipes the data anyway, so a clean shutdown buys nothing there (it cost a test session 30 s).
_DOWN_GRACE_S = 5.0


@dataclass(frozen=True)
class NodeStatus(ProcessStatus):
    """One node's JVM (:class:`ProcessStatus`) and its node id."""

    node_id: int


@dataclass(frozen=True)
class ClusterStatus:
    home: Path
    nodes: tuple[NodeStatus, ...]
    bootstrap: str | None  # None until `up` has recorded every node's ports

    @property
    def running(self) -> bool:
        """Every node alive and serving."""
        return all(n.alive and n.serving for n in self.nodes)


class KafkaCluster(ClusterQuestions):
    """Handle on the 3-node cluster of the devstack in ``home`` (default: the stack's).

    ``ports`` maps ``Port`` to a number for explicit requests (they must be free);
    ``environ`` replaces ``os.environ``; ``profile`` (``_kafka_cluster_nodes.PROFILES``)
    picks the failover timings, and a running cluster made with another profile is
    started afresh by ``up`` (give a non-default profile its own ``home``, so it never
    replaces the tests' cluster). Creating the object touches nothing. Every
    method that waits has a bounded deadline and polls; none sleeps a fixed time. The
    questions (``leader``, ``isr``, ``coordinator``, ``create_topic``, ...) come from
    ``ClusterQuestions``.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None, *,
                 cache: str | os.PathLike[str] | None = None,
                 ports: Mapping[Port, int] | None = None,
                 environ: Mapping[str, str] | None = None,
                 start_timeout_s: float = 120.0, profile: str = "devstack") -> None:
        if profile not in _nodes.PROFILES:
            raise DevstackError(f"unknown kafka cluster profile {profile!r}",
                                fix=f"use one of {list(_nodes.PROFILES)}")
        self.profile = profile
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, cache, self._environ)
        requests = port_requests(ports, self._environ)
        self._port_requests = {p: requests[p] for p in CLUSTER_PORTS}
        self._start_timeout_s = start_timeout_s
        self._admin: ClusterAdmin | None = None
        self._admin_bootstrap: str | None = None
        self._jvm: tuple[Java, Classpath] | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}  # nodes this object started

    # ------------------------------------------------------------------ where things are
    @property
    def offsets_partitions(self) -> int:
        """``__consumer_offsets`` partitions: the coordinator of a group is the leader of
        partition ``abs(hash(group)) % offsets_partitions``."""
        return _nodes.OFFSETS_PARTITIONS[self.profile]

    @property
    def node_ids(self) -> list[int]:
        return list(NODE_IDS)

    def node_dir(self, node_id: int) -> Path:
        """A node's config and data: kept across its restarts, wiped by a fresh ``up``."""
        return self.paths.data(NAME) / f"node-{_check_node(node_id)}"

    def _log(self, node_id: int) -> Path:
        return self.paths.logs / f"{NAME}-{node_id}.log"

    def _records(self) -> dict[int, ProcessRecord | None]:
        return {n: ProcessRecord.load(self.paths.run, f"{NAME}-{n}") for n in NODE_IDS}

    def _record(self, node_id: int) -> ProcessRecord:
        record = ProcessRecord.load(self.paths.run, f"{NAME}-{_check_node(node_id)}")
        if record is None:
            raise DevstackError(f"the kafka cluster in {self.paths.home} is not up (no record of node {node_id})",
                                fix="run `python -m sparkbarrier.devstack cluster up` first")
        return record

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>``, nodes in id order; fixed for
        the cluster's life, whichever nodes are down. ``DevstackError`` before ``up``."""
        return ",".join(f"127.0.0.1:{self._record(n).ports[_NODE_PORTS[n][0].key]}" for n in NODE_IDS)

    def running_bootstrap(self) -> str | None:
        """The bootstrap while a quorum of nodes (two of three) runs, else None: what
        ``env`` prints. A node killed by a test does not make the cluster vanish."""
        records = self._records()
        if any(r is None for r in records.values()):
            return None
        alive = sum(1 for r in records.values() if r is not None and is_ours(r))
        return self.bootstrap if alive > len(NODE_IDS) // 2 else None

    def status(self) -> ClusterStatus:
        """What runs, from the pid records; cheap (no Kafka request)."""
        nodes = []
        for node_id, record in self._records().items():
            alive = record is not None and is_ours(record)
            nodes.append(NodeStatus(
                node_id=node_id, name=f"{NAME}-{node_id}", pid=record.pid if record else None, alive=alive,
                serving=alive and record is not None and all(port_accepts(p) for p in record.ports.values()),
                ports=dict(record.ports) if record else {}, log=str(self._log(node_id))))
        complete = all(n.ports for n in nodes)
        return ClusterStatus(self.paths.home, tuple(nodes), self.bootstrap if complete else None)

    @staticmethod
    def exports(bootstrap: str) -> str:
        """``export`` lines for ``eval "$(python -m sparkbarrier.devstack cluster env)"``."""
        return f"export {KAFKA_CLUSTER_ENV}={shlex.quote(bootstrap)}\n"

    # ------------------------------------------------------------------ whole cluster
    def up(self, timeout_s: float | None = None) -> str:
        """Start the cluster unless it already runs healthy; return its bootstrap.

        Idempotent. Raises ``DevstackError`` (after stopping whatever this call
        started) when a prerequisite is missing or a node does not come up in time.
        """
        timeout_s = self._start_timeout_s if timeout_s is None else timeout_s
        self.paths.ensure()
        with stack_lock(self.paths.run):
            records = self._records()
            if all(self._serving(n, r) for n, r in records.items()) and self._profile_matches():
                self._check_requested_ports(records)
                self.wait_healthy(timeout_s=min(timeout_s, 60.0))
                log.info("kafka cluster already running and healthy")
                return self.bootstrap
            if any(r is not None for r in records.values()):
                log.info("starting the kafka cluster afresh (not every node serves, or it "
                         "runs another profile than %s)", self.profile)
            self.close()
            stop_recorded(self.paths.run, NAMES, grace_s=_DOWN_GRACE_S)
            self._start_fresh(time.monotonic() + timeout_s)
        return self.bootstrap

    def down(self) -> list[str]:
        """Stop the three nodes (SIGTERM, SIGKILL after a bounded wait); idempotent.
        Returns the names of the nodes that were running."""
        self.close()
        with stack_lock(self.paths.run):
            stopped = stop_recorded(self.paths.run, NAMES, grace_s=_DOWN_GRACE_S)
        return [r.name for r in stopped]

    def close(self) -> None:
        """Close the admin client this object keeps; the servers keep running."""
        if self._admin is not None:
            self._admin.close()

    def heal(self, timeout_s: float = 120.0) -> None:
        """Start every node that is not running (keeping its data) and thaw any frozen
        one, then wait until the cluster is healthy: what a test that left a node down
        owes the next one. A cluster that was never started (or is down) is started
        with ``up``."""
        deadline = time.monotonic() + timeout_s
        records = self._records()
        if any(r is None for r in records.values()):
            self.up(timeout_s)
            return
        for node_id, record in records.items():
            if record is not None and is_ours(record):
                os.kill(record.pid, signal.SIGCONT)  # one a test left frozen; else a no-op
            elif record is not None:
                log.info("node %d of the kafka cluster is down; starting it", node_id)
                self.start(node_id, timeout_s=max(1.0, deadline - time.monotonic()))
        self.wait_healthy(timeout_s=max(1.0, deadline - time.monotonic()))

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """Wait until every node runs and is registered unfenced, and every partition of
        every topic (internal ones too) has a leader and its full ISR. Fails at once
        when a node's JVM is not running: that does not heal by waiting."""
        admin = self._admin_client()
        poll(lambda: admin.problems(NODE_IDS), timeout_s=timeout_s,
             what="a healthy kafka cluster (3 brokers unfenced, every partition with its full ISR)",
             fix=f"read {self.paths.logs}/{NAME}-<n>.log", before=self._require_alive(NODE_IDS))

    # ------------------------------------------------------------------ one node
    def kill(self, node_id: int) -> bool:
        """SIGKILL the node's JVM, a crash: no controlled shutdown, so its leaderships
        move only once the controller fences it (``broker.session.timeout.ms``). Returns
        when the process is gone (10 s at most); True if it was running."""
        killed = bool(kill_processes([self._record(node_id)]))
        log.info("kafka cluster node %d %s", node_id, "killed" if killed else "was not running")
        return killed

    def freeze(self, node_id: int) -> bool:
        """SIGSTOP the node's JVM: a broker that is there and says nothing (a long GC
        pause, a stopped VM, a half-open network). Its port still completes TCP
        handshakes (the kernel answers them) and its connections stay open, but no
        request is answered; the controller fences it after ``broker.session.timeout.ms``.
        True if it was running. :meth:`thaw` (or ``kill``) ends it."""
        return self._signal(node_id, signal.SIGSTOP, "frozen")

    def thaw(self, node_id: int) -> bool:
        """SIGCONT a node :meth:`freeze` stopped; True if it was running."""
        return self._signal(node_id, signal.SIGCONT, "thawed")

    def _signal(self, node_id: int, sig: signal.Signals, done: str) -> bool:
        record = self._record(node_id)
        if not is_ours(record):
            return False
        os.kill(record.pid, sig)
        log.info("kafka cluster node %d %s (%s)", node_id, done, sig.name)
        return True

    def stop(self, node_id: int, *, grace_s: float = _STOP_GRACE_S) -> bool:
        """SIGTERM: the node's controlled shutdown hands its leaderships over before it
        exits. SIGKILL if it is still there after ``grace_s``. True if it was running."""
        stopped = bool(stop_processes([self._record(node_id)], grace_s=grace_s))
        log.info("kafka cluster node %d %s", node_id, "stopped" if stopped else "was not running")
        return stopped

    def start(self, node_id: int, *, timeout_s: float = 60.0) -> None:
        """Start a stopped or killed node with its data and ports (never formatted
        again: it rejoins as the same replica and voter); a running node is left alone.

        Returns once the node itself answers and the cluster lists it unfenced; it
        may still be catching up as a follower (``wait_healthy`` waits for the ISR).
        """
        deadline = time.monotonic() + timeout_s
        with stack_lock(self.paths.run):
            record = self._record(node_id)
            if not is_ours(record):
                if not (self.node_dir(node_id) / "server.properties").is_file():
                    raise DevstackError(f"kafka cluster node {node_id} has no data in {self.node_dir(node_id)}",
                                        fix="run `python -m sparkbarrier.devstack cluster up` to start afresh")
                java, classpath = self._java()
                with open(self._log(node_id), "ab") as out:
                    out.write(f"--- devstack: starting node {node_id} again ---\n".encode())
                broker, controller = _NODE_PORTS[node_id]
                self._spawn(node_id, java, classpath, (record.ports[broker.key], record.ports[controller.key]))
        self._wait_serving(node_id, deadline)
        self._wait_unfenced(node_id, deadline)

    def restart(self, node_id: int, *, timeout_s: float = 120.0) -> None:
        """``stop`` then ``start``: one step of a rolling restart."""
        deadline = time.monotonic() + timeout_s
        self.stop(node_id)
        self.start(node_id, timeout_s=max(1.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ internals
    def _profile_matches(self) -> bool:
        """Every node's config was written for :attr:`profile` (one written before
        profiles existed counts as ``devstack``'s)."""
        for node_id in NODE_IDS:
            path = self.node_dir(node_id) / "server.properties"
            if not path.is_file() or (_nodes.profile_of(path.read_text()) or "devstack") != self.profile:
                return False
        return True

    def _serving(self, node_id: int, record: ProcessRecord | None) -> bool:
        expected = {p.key for p in _NODE_PORTS[node_id]}
        return (record is not None and is_ours(record) and expected <= set(record.ports)
                and all(port_accepts(p) for p in record.ports.values()))

    def _check_requested_ports(self, records: Mapping[int, ProcessRecord | None]) -> None:
        for node_id, record in records.items():
            if record is not None:  # serving implies a record
                check_requested_ports(f"kafka cluster node {node_id}", record, _NODE_PORTS[node_id],
                                      self._port_requests, "python -m sparkbarrier.devstack cluster down")

    def _java(self) -> tuple[Java, Classpath]:
        if self._jvm is None:
            java = find_java(self._environ)
            self._jvm = (java, resolve_classpath("kafka", self.paths, java))
        return self._jvm

    def _start_fresh(self, deadline: float) -> None:
        started = time.monotonic()
        java, classpath = self._java()
        chosen = choose_ports(self._port_requests)
        ports = {n: (chosen[b], chosen[c]) for n, (b, c) in _NODE_PORTS.items()}
        shutil.rmtree(self.paths.data(NAME), ignore_errors=True)
        for node_id in NODE_IDS:
            data = self.node_dir(node_id)
            data.mkdir(parents=True)
            (data / "server.properties").write_text(
                _nodes.server_properties(node_id, data, ports, self.profile))
            write_log4j_config(data)
            self._log(node_id).write_bytes(b"")
        _nodes.format_storage(java, classpath, {n: (self.node_dir(n), self._log(n)) for n in NODE_IDS})
        spawned: list[ProcessRecord] = []
        try:
            for node_id in NODE_IDS:  # side by side: JVM start-up dominates
                # a loop, not a comprehension: on a failure the except below stops those already spawned
                spawned.append(self._spawn(node_id, java, classpath, ports[node_id]))  # noqa: PERF401
            for node_id in NODE_IDS:
                self._wait_serving(node_id, deadline)
            admin = self._admin_client()
            poll(lambda: admin.registered(NODE_IDS), timeout_s=max(1.0, deadline - time.monotonic()),
                 what="three registered, unfenced brokers", fix=f"read {self.paths.logs}/{NAME}-<n>.log",
                 before=self._require_alive(NODE_IDS))
            # A produce/consume round trip with a group commit, as the stack's broker
            # gets at start: it also creates __consumer_offsets, so a test's first
            # group commit does not wait for it.
            admin.create_topic(_kafka.PROBE_TOPIC, 1, len(NODE_IDS),
                               timeout_s=max(1.0, deadline - time.monotonic()))
            _kafka.probe(self.bootstrap, deadline=deadline, check=self._require_alive(NODE_IDS))
            self.wait_healthy(timeout_s=max(1.0, deadline - time.monotonic()))
        except BaseException:
            log.info("kafka cluster start failed; stopping its nodes")
            self.close()
            stop_processes(spawned, grace_s=15.0)
            for record in spawned:
                ProcessRecord.remove(self.paths.run, record.name)
            raise
        log.info("kafka cluster serves on %s (started in %.1fs)", self.bootstrap, time.monotonic() - started)

    def _spawn(self, node_id: int, java: Java, classpath: Classpath, ports: tuple[int, int]) -> ProcessRecord:
        name = f"{NAME}-{node_id}"
        marker = marker_for(name, self.paths.home)
        cmd = _nodes.command(java, classpath, marker=marker, data=self.node_dir(node_id))
        log.info("starting %s (log: %s)", name, self._log(node_id))
        proc = spawn(cmd, log_path=self._log(node_id), cwd=self.node_dir(node_id), env=self._environ)
        broker, controller = _NODE_PORTS[node_id]
        record = ProcessRecord(name=name, pid=proc.pid, marker=marker, log=str(self._log(node_id)),
                               ports={broker.key: ports[0], controller.key: ports[1]}, started_at=time.time())
        record.save(self.paths.run)
        self._procs[node_id] = proc
        return record

    def _wait_serving(self, node_id: int, deadline: float) -> None:
        ports = list(self._record(node_id).ports.values())

        def check() -> str | None:
            closed = [p for p in ports if not port_accepts(p)]
            return f"ports {closed} closed" if closed else None

        poll(check, timeout_s=max(1.0, deadline - time.monotonic()), what=f"kafka cluster node {node_id} listening",
             fix=f"read {self._log(node_id)}", before=self._require_alive([node_id]))

    def _wait_unfenced(self, node_id: int, deadline: float) -> None:
        """Ask the node itself: a KRaft broker serves requests only once the controller
        has unfenced it, so its answer cannot be the registration of the JVM before."""
        own = ClusterAdmin([f"127.0.0.1:{self._record(node_id).ports[_NODE_PORTS[node_id][0].key]}"])
        try:
            poll(lambda: own.registered([node_id]), timeout_s=max(1.0, deadline - time.monotonic()),
                 what=f"kafka cluster node {node_id} registered and unfenced", fix=f"read {self._log(node_id)}",
                 before=self._require_alive([node_id]))
        finally:
            own.close()

    def _require_alive(self, node_ids: Iterable[int]) -> Callable[[], None]:
        """A check for ``poll``: raises when one of ``node_ids`` is not running (a dead
        JVM does not heal by waiting)."""
        wanted = list(node_ids)

        def check() -> None:
            for node_id in wanted:
                record = ProcessRecord.load(self.paths.run, f"{NAME}-{node_id}")
                proc = self._procs.get(node_id)
                if record is not None and proc is not None and proc.pid == record.pid:
                    # Our own child: ask it. Just after the fork, /proc/<pid>/cmdline may
                    # not show the JVM's arguments yet, so is_ours could say no.
                    code = proc.poll()
                    alive = code is None
                else:
                    code, alive = None, record is not None and is_ours(record)
                if not alive:
                    path = self._log(node_id)
                    raise DevstackError(
                        f"kafka cluster node {node_id} is not running (exit code {code}; log: {path})",
                        fix=f"read the log tail above; KafkaCluster.start({node_id}) or "
                        "`python -m sparkbarrier.devstack cluster up` starts it again",
                        log_path=str(path), log_tail=log_tail(path))
        return check

    def _admin_client(self) -> ClusterAdmin:
        """The kept admin client (a new one if a fresh ``up`` changed the ports)."""
        bootstrap = self.bootstrap
        if self._admin is None or self._admin_bootstrap != bootstrap:
            self.close()
            self._admin, self._admin_bootstrap = ClusterAdmin(bootstrap.split(",")), bootstrap
        return self._admin


def _check_node(node_id: int) -> int:
    if node_id not in NODE_IDS:
        raise DevstackError(f"no kafka cluster node {node_id!r}", fix=f"use one of {list(NODE_IDS)}")
    return node_id

