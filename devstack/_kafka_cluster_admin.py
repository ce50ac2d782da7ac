"""Questions the failover tests ask the devstack's Kafka cluster between faults.

Who leads a partition, who is in sync, who coordinates a group, is every broker back:
each answer comes from a fresh request (Metadata, DescribeCluster, FindCoordinator),
never from a client's cached view, because the point of asking is that the answer
has just changed. Every wait polls a condition against a deadline and, when the
deadline passes, raises ``DevstackError`` naming what was still missing.

Built on kafka-python's admin client (``kafka``; already a dependency). One client is
kept open and dropped after any error, so the next question bootstraps afresh from
whichever brokers still answer.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._exceptions import DevstackError

__all__ = ["ClusterAdmin", "ClusterQuestions", "PartitionState", "poll"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_REQUEST_TIMEOUT_MS = 5000  # a dead broker must not stall a poll for the default 30 s
_POLL_S = 0.25
_FIX_NODES = "check that the nodes run: `python -m sparkbarrier.devstack cluster status`"


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster's metadata shows it; ``leader`` is None while no
    replica leads (Kafka's -1)."""

    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def fully_replicated(self) -> bool:
        """Led, and every replica in sync."""
        return self.leader is not None and set(self.isr) == set(self.replicas)


def poll(check: Callable[[], str | None], *, timeout_s: float, what: str, fix: str,
         before: Callable[[], None] | None = None) -> None:
    """Call ``check`` until it returns None ("done"); it returns what is still missing.

    ``before`` runs ahead of every attempt and may raise to give up early (a server
    process died). Kafka and socket errors count as "not yet". Raises
    ``DevstackError`` naming ``what`` and the last thing missing once ``timeout_s``
    has passed.
    """
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    missing: str | None = "not asked yet"
    while True:
        if before is not None:
            before()
        try:
            missing = check()
        except (KafkaError, OSError) as exc:
            missing = f"{type(exc).__name__}: {exc}"
        if missing is None:
            return
        if time.monotonic() >= deadline:
            raise DevstackError(f"{what} not reached within {timeout_s:.0f}s (still: {missing})", fix=fix)
        log.debug("waiting for %s: %s", what, missing)
        time.sleep(_POLL_S)


class ClusterAdmin:
    """Admin queries against ``bootstrap`` (``host:port`` of every broker); thread-safe."""

    def __init__(self, bootstrap: Sequence[str]) -> None:
        self._bootstrap = list(bootstrap)
        self._client: Any = None
        self._lock = threading.Lock()

    def _new_client(self) -> Any:
        from kafka import KafkaAdminClient

        # Short timeouts and reconnect backoff: a broker the test just killed must not
        # hold a question for kafka-python's defaults (30 s).
        return KafkaAdminClient(bootstrap_servers=self._bootstrap, client_id="sparkbarrier-devstack-cluster",
                                request_timeout_ms=_REQUEST_TIMEOUT_MS, bootstrap_timeout_ms=_REQUEST_TIMEOUT_MS,
                                reconnect_backoff_max_ms=1000)

    def _call(self, fn: Callable[[Any], T]) -> T:
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            try:
                return fn(self._client)
            except BaseException:
                self._close_client()
                raise

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            from kafka.errors import KafkaError

            try:
                client.close()
            except (KafkaError, OSError) as exc:  # its brokers died: nothing left to close
                log.debug("closing the cluster admin client: %r", exc)

    def close(self) -> None:
        """Close the kept client; idempotent (a later question opens a new one)."""
        with self._lock:
            self._close_client()

    # ------------------------------------------------------------------ questions
    def brokers(self) -> dict[int, bool]:
        """Registered broker id → fenced (a fenced broker is registered but may not lead)."""
        cluster = self._call(lambda admin: admin.describe_cluster())
        return {int(b["broker_id"]): bool(b.get("is_fenced", False)) for b in cluster["brokers"]}

    def partitions(self, topics: Iterable[str] | None = None) -> list[PartitionState]:
        """Every partition of ``topics`` (None: every topic, internal ones included).

        A named topic the answering broker does not know (yet) raises kafka-python's
        error for it, which ``poll`` counts as "not yet".
        """
        from kafka.errors import for_code

        wanted = None if topics is None else list(topics)
        described = self._call(lambda admin: admin.describe_topics(wanted))
        states = []
        for topic in described:
            if topic["error_code"] != 0:
                raise for_code(topic["error_code"])(f"topic {topic['name']!r}")
            for p in topic["partitions"]:
                leader = int(p["leader_id"])
                states.append(PartitionState(
                    topic=topic["name"], partition=int(p["partition_index"]),
                    leader=leader if leader >= 0 else None,
                    replicas=tuple(p["replica_nodes"]), isr=tuple(p["isr_nodes"])))
        return sorted(states, key=lambda s: (s.topic, s.partition))

    def partition(self, topic: str, partition: int) -> PartitionState:
        """One partition; ``DevstackError`` if the topic has no such partition."""
        found = [s for s in self.partitions([topic]) if s.partition == partition]
        if not found:
            raise DevstackError(f"topic {topic!r} has no partition {partition}",
                                fix="ask for a partition the topic has")
        return found[0]

    def coordinator(self, group_id: str) -> int:
        """The broker coordinating ``group_id`` now (a FindCoordinator request).

        A new client per question: kafka-python caches coordinators per client, and a
        cached answer is exactly what a test asking after a fault must not get.
        """
        admin = self._new_client()
        try:
            return int(admin._manager.run(admin._find_coordinator_id, group_id))
        finally:
            admin.close()

    def active_controller(self) -> int:
        """The node leading the KRaft quorum now (DescribeQuorum): the active controller."""
        quorum = self._call(lambda admin: admin.describe_metadata_quorum())
        return int(quorum["topics"][0]["partitions"][0]["leader_id"])

    def registered(self, node_ids: Iterable[int]) -> str | None:
        """None once every one of ``node_ids`` is registered and unfenced, else what is not."""
        brokers = self.brokers()
        missing = [n for n in node_ids if brokers.get(n, True)]
        return f"brokers {missing} not registered or fenced" if missing else None

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None, *, timeout_s: float = 30.0,
                     assignments: Mapping[int, Sequence[int]] | None = None) -> None:
        """Create ``name`` (an existing one is kept) and wait until every partition has a
        leader and its full ISR. ``assignments``: partition -> replicas, the first one the
        leader (every partition must be given; the counts then come from it)."""
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        spec: dict[str, Any] = {"num_partitions": partitions, "replication_factor": replication_factor,
                                "configs": dict(configs or {})}
        if assignments:
            spec.update(num_partitions=-1, replication_factor=-1,
                        assignments={p: list(r) for p, r in assignments.items()})

        def create() -> str | None:
            try:
                self._call(lambda admin: admin.create_topics({name: spec}, timeout_ms=_REQUEST_TIMEOUT_MS))
            except TopicAlreadyExistsError:
                log.info("topic %s exists already", name)
            except KafkaError as exc:
                # After restarts the client's cached controller may be a node id it no
                # longer knows (UnknownBrokerIdError); _call dropped the client, ask again.
                return f"create_topics failed: {exc!r}"
            return None

        poll(create, timeout_s=timeout_s, what=f"topic {name} created", fix=_FIX_NODES)

        def check() -> str | None:
            states = self.partitions([name])
            off = [s for s in states if not s.fully_replicated or len(s.replicas) != replication_factor]
            if len(states) != partitions or off:
                return f"{len(states)} partitions, out of sync: {[(s.partition, s.leader, s.isr) for s in off]}"
            return None

        poll(check, timeout_s=timeout_s, what=f"topic {name} with {partitions} fully replicated partitions",
             fix=_FIX_NODES)

    def wait_leader(self, topic: str, partition: int, *, not_on: Iterable[int] = (),
                    timeout_s: float = 30.0) -> int:
        """Wait until the partition has a leader that is none of ``not_on``; return it."""
        excluded, found = set(not_on), []

        def check() -> str | None:
            leader = self.partition(topic, partition).leader
            if leader is None or leader in excluded:
                return f"leader of {topic}-{partition} is {leader}"
            found.append(leader)
            return None

        poll(check, timeout_s=timeout_s, what=f"a leader of {topic}-{partition} other than {sorted(excluded)}",
             fix=_FIX_NODES)
        return found[-1]

    def wait_isr(self, topic: str, size: int, *, timeout_s: float = 60.0) -> None:
        """Wait until every partition of ``topic`` has exactly ``size`` in-sync replicas."""
        def check() -> str | None:
            off = [s for s in self.partitions([topic]) if len(s.isr) != size]
            return ", ".join(f"{s.topic}-{s.partition} isr {list(s.isr)}" for s in off) or None

        poll(check, timeout_s=timeout_s, what=f"an ISR of {size} for every partition of {topic}", fix=_FIX_NODES)

    def wait_coordinator(self, group_id: str, node_ids: Sequence[int], *, timeout_s: float = 30.0) -> int:
        """The coordinator of ``group_id``, waiting while FindCoordinator names none of
        ``node_ids`` (the coordinator is moving)."""
        found = []

        def check() -> str | None:
            node = self.coordinator(group_id)
            if node not in node_ids:
                return f"coordinator {node}"
            found.append(node)
            return None

        poll(check, timeout_s=timeout_s, what=f"a coordinator for group {group_id!r}", fix=_FIX_NODES)
        return found[-1]

    def problems(self, node_ids: Sequence[int]) -> str | None:
        """What keeps the cluster from being healthy, or None: every node registered and
        unfenced, every partition of every topic led with its full ISR."""
        missing = self.registered(node_ids)
        if missing is not None:
            return missing
        lagging = [s for s in self.partitions() if not s.fully_replicated]
        if lagging:
            shown = ", ".join(f"{s.topic}-{s.partition} leader {s.leader} isr {list(s.isr)} "
                              f"of {list(s.replicas)}" for s in lagging[:3])
            return f"{len(lagging)} partitions not fully in sync ({shown})"
        return None


class ClusterQuestions(abc.ABC):
    """The questions a failover test asks a cluster, for ``KafkaCluster`` to inherit.

    Each one is a fresh request through ``_admin_client()`` and waits (bounded) while
    the answer is in motion: a leader being elected, a coordinator moving.
    """

    @property
    @abc.abstractmethod
    def node_ids(self) -> list[int]:
        """Every node of the cluster."""

    @abc.abstractmethod
    def _admin_client(self) -> ClusterAdmin:
        """The admin client the questions go through."""

    def leader(self, topic: str, partition: int, *, timeout_s: float = 30.0) -> int:
        """The partition's leader now, waiting while it has none."""
        return self._admin_client().wait_leader(topic, partition, timeout_s=timeout_s)

    def wait_leader(self, topic: str, partition: int, *, not_on: Iterable[int] = (),
                    timeout_s: float = 30.0) -> int:
        """Wait until the partition has a leader that is none of ``not_on`` (say, the
        node just killed); return it."""
        return self._admin_client().wait_leader(topic, partition, not_on=not_on, timeout_s=timeout_s)

    def isr(self, topic: str, partition: int, *, timeout_s: float = 10.0) -> list[int]:
        """The partition's in-sync replicas now, sorted. A broker that has not yet heard
        of a topic just created (its metadata reaches the three nodes one by one) is
        asked again, for ``timeout_s`` at most."""
        found: list[int] = []

        def ask() -> str | None:
            found[:] = sorted(self._admin_client().partition(topic, partition).isr)
            return None

        poll(ask, timeout_s=timeout_s, what=f"the ISR of {topic}-{partition}", fix=_FIX_NODES)
        return found

    def wait_isr(self, topic: str, size: int, *, timeout_s: float = 60.0) -> None:
        """Wait until every partition of ``topic`` has exactly ``size`` in-sync replicas
        (3: all back in sync; 2: the ISR has shrunk after a node died)."""
        self._admin_client().wait_isr(topic, size, timeout_s=timeout_s)

    def coordinator(self, group_id: str, *, timeout_s: float = 30.0) -> int:
        """The node coordinating ``group_id`` now (FindCoordinator), waiting while it moves."""
        return self._admin_client().wait_coordinator(group_id, self.node_ids, timeout_s=timeout_s)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3, *,
                     configs: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                     assignments: Mapping[int, Sequence[int]] | None = None) -> str:
        """Create ``name`` (an existing one is kept) and wait until every partition has
        a leader and its full ISR; return ``name``. ``assignments``: partition ->
        replicas, the first one the partition's leader."""
        self._admin_client().create_topic(name, partitions, replication_factor, dict(configs or {}),
                                          timeout_s=timeout_s, assignments=assignments)
        return name

    def active_controller(self) -> int:
        """The node that is the active KRaft controller now."""
        return self._admin_client().active_controller()
