"""Driver-side view of the cluster: partition discovery and offset lookups.

Wraps one group-less ``KafkaConsumer`` used only for metadata and ListOffsets
(it never fetches records and never joins a group). Created lazily by the
planner; all calls are synchronous, in tries bounded by :data:`._tries.TRY_S`.

Discovery runs every batch, so it refreshes the metadata of the subscribed or assigned
topics only, as Spark's JVM source describes only those: the consumer's ``topics()``
asks for every topic in the cluster (5-6 ms a batch at 150 topics, growing with the
cluster). Only ``subscribePattern`` needs every topic's name, as in Spark. kafka-python
3 has no public call for a targeted refresh, so :func:`._tries.refresh_topics` drives the
consumer's own metadata cache and falls back to ``topics()`` where a kafka-python
release lays it out differently. Not a ``KafkaAdminClient.describe_topics``: that
client stalled each lookup ~2 s whenever a broker restarted (measured in a rolling
restart; the consumer's refresh did not stall).

Two retry budgets, because two different things go wrong:

* until the cluster has answered once, a connection or retriable error is most likely
  a wrong ``kafka.bootstrap.servers``: retried ``fetchOffset.numRetries`` times,
  ``fetchOffset.retryIntervalMs`` apart, as Spark's Kafka source does, then the query
  fails naming the two options;
* once it has answered, the same errors mean the cluster is failing over (a leader
  election, a broker restarting): retried with backoff from 0.1 s (the Java client's
  ``retry.backoff.ms``) for ``failover.timeoutMs`` (:mod:`..client._failover`), logged once per
  problem. Most such failures are one broker refusing the connection while the others
  serve, and the next attempt asks another: waiting ``fetchOffset.retryIntervalMs``
  (1 s) first held up a batch planned while a broker restarted by at least a second.

Either way the query fails with :class:`SourceError` naming what was looked up and
the option, never with a bare client exception. Each attempt is one try of
:data:`._tries.TRY_S`, not kafka-python's 30 s request timeout: a broker that holds a
connection without answering costs one short try, then its connection is closed and
another broker is asked (:mod:`._tries`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from kafka import KafkaConsumer, TopicPartition as KafkaTP
from kafka.errors import KafkaError, KafkaTimeoutError

from ...._exceptions import SourceError
from .._options import KafkaSourceOptions
from ..client._failover import ProblemLog, retry_failover
from ..client._positions import TopicPartition
from ..client._secrets import install_client_log_redaction
from ..client._waits import waiting
from ._tries import TryBudget, drop_unanswered, forbid_auto_create, refresh_topics

__all__ = ["ClusterView"]

log = logging.getLogger(__name__)
T = TypeVar("T")

install_client_log_redaction()

_FAILOVER_FIRST_RETRY_S = 0.1


def _transient(exc: Exception) -> bool:
    """Connection refused/reset, timeouts, leader or coordinator moving: kafka-python
    marks these ``retriable`` (a broker restart produces exactly these)."""
    return isinstance(exc, KafkaError) and bool(getattr(exc, "retriable", False))


class PartitionsVanished(KafkaError):
    """A lookup failed because its topic was deleted meanwhile: not worth retrying; the
    planner rediscovers and reports the partitions as data loss."""

    retriable = False


class ClusterView:
    """Partitions the options select, and their earliest/latest/by-time offsets."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._consumer: KafkaConsumer | None = None
        # Like Spark (Java Pattern.matches): the pattern must match the whole topic name.
        self._regex = re.compile(options.pattern) if options.pattern else None
        self._answered = False
        self._problems = ProblemLog(log, "barrier-kafka")
        self._tries: TryBudget | None = None

    def _client(self) -> KafkaConsumer:
        if self._consumer is None:
            if self._options.security.protocol != "PLAINTEXT":
                # Logins and certificates fail here at once, not after the retries below.
                from ._preflight import check_access

                check_access(self._options, self._options.topics or
                             sorted({tp.topic for tp in self._options.assign}))
            self._consumer = KafkaConsumer(
                **self._options.consumer_configs(),
                enable_auto_commit=False,
                allow_auto_create_topics=False,
            )
            forbid_auto_create(self._consumer)  # its offset lookups request metadata too
        return self._consumer

    def _try(self, call: Callable[[KafkaConsumer, int], T]) -> T:
        """``call(client, timeout_ms)`` as one bounded try (:mod:`._tries`): on no answer,
        the connections still waiting are closed before the retriable timeout goes up."""
        client = self._client()
        if self._tries is None:
            self._tries = TryBudget(client.config["request_timeout_ms"])
        tries = self._tries
        timeout_ms = tries.next_ms()
        try:
            result = call(client, timeout_ms)
        except KafkaTimeoutError:
            tries.timed_out()
            # half the try: a request sent late in it (after a metadata wait) counts too
            dropped = drop_unanswered(client, timeout_ms / 2000)
            if dropped:
                log.debug("barrier-kafka: no answer within %d ms; closed the connections to %s",
                          timeout_ms, ", ".join(dropped))
            raise
        tries.answered()
        return result

    def _partitions(self, topics: list[str] | None) -> dict[str, set[int]]:
        """Partition ids of ``topics`` that exist now (every non-internal topic when
        None), from one fresh metadata request; a topic that does not exist, or that this
        client may not describe, is absent (as in the consumer's metadata)."""
        client = self._client()
        if not self._try(lambda c, ms: refresh_topics(c, topics, ms)):
            existing = client.topics()  # every topic (another kafka-python layout)
            return {t: set(client.partitions_for_topic(t) or ()) for t in existing
                    if topics is None or t in topics}
        cluster = client._cluster  # kafka-python's metadata cache: see refresh_topics
        if topics is None:
            return {t: set(cluster.partitions_for_topic(t) or ()) for t in cluster.topics()}
        found: dict[str, set[int]] = {}
        for topic in topics:
            ids = cluster.partitions_for_topic(topic)
            if ids is not None:
                found[topic] = set(ids)
        return found

    def _selected_topics(self) -> list[str] | None:
        if self._options.assign:
            return sorted({tp.topic for tp in self._options.assign})
        if self._regex is not None:
            return None
        return list(self._options.topics)

    def _retrying(self, what: str, call: Callable[[], T],
                  tps: Iterable[TopicPartition] = ()) -> T:
        """``call()`` under the two retry budgets (see the module docstring), as one
        named wait (:mod:`..client._waits`): a lookup that lasts is logged with its brokers."""
        tps = list(tps)
        partitions = ", ".join(sorted(str(tp) for tp in tps)) or "the topics"
        with waiting(what, partitions, lambda: self._leaders(tps)):
            return self._retrying_now(what, call, tps)

    def _leaders(self, tps: list[TopicPartition]) -> str:
        """The brokers ``tps`` are asked on now (the cached leaders), for a wait's log line."""
        consumer = self._consumer
        if consumer is None or not tps:
            return f"the cluster ({self._options.bootstrap_servers})"
        cluster = consumer._cluster  # kafka-python's metadata cache
        leaders: dict[str, list[str]] = {}
        for tp in tps:
            node = cluster.leader_for_partition(KafkaTP(tp.topic, tp.partition))
            meta = cluster.broker_metadata(node) if node is not None and node >= 0 else None
            name = (f"node {node} ({meta.host}:{meta.port})" if meta is not None
                    else "no known leader")
            leaders.setdefault(name, []).append(str(tp.partition))
        return "; ".join(f"{name} for partition {','.join(ps)}" for name, ps in leaders.items())

    def _retrying_now(self, what: str, call: Callable[[], T],
                      tps: Iterable[TopicPartition] = ()) -> T:
        if self._answered:
            options = self._options
            result = retry_failover(
                what, lambda: self._vanishing(what, call, tps),
                timeout_s=options.failover_timeout_ms / 1000,
                interval_s=min(_FAILOVER_FIRST_RETRY_S, options.fetch_offset_retry_interval_ms / 1000),
                problems=self._problems)
        else:
            result = self._first_contact(what, call, tps)
            self._answered = True
        return result

    def _vanishing(self, what: str, call: Callable[[], T], tps: Iterable[TopicPartition]) -> T:
        """``call()``; a retriable failure on a deleted topic becomes PartitionsVanished:
        a lookup on a deleted topic times out again and again, so say so now."""
        try:
            return call()
        except Exception as exc:  # classified right below
            tps = list(tps)
            if _transient(exc) and tps and self._vanished(tps):
                raise PartitionsVanished(f"cannot {what}: a topic of "
                                         f"{sorted(str(tp) for tp in tps)} is gone") from exc
            raise

    def _first_contact(self, what: str, call: Callable[[], T],
                       tps: Iterable[TopicPartition]) -> T:
        """Before the cluster ever answered: ``fetchOffset.numRetries`` attempts, as Spark."""
        options = self._options
        for attempt in range(options.fetch_offset_retries + 1):
            try:
                return self._vanishing(what, call, tps)
            except Exception as exc:  # classified right below
                if not _transient(exc):
                    raise
                if attempt == options.fetch_offset_retries:
                    raise SourceError(
                        f"cannot {what} from {options.bootstrap_servers} after "
                        f"{attempt + 1} attempts (fetchOffset.numRetries="
                        f"{options.fetch_offset_retries}, fetchOffset.retryIntervalMs="
                        f"{options.fetch_offset_retry_interval_ms}): "
                        f"{type(exc).__name__}: {exc}") from None
                # a line per attempt: few (fetchOffset.numRetries), and each one counts
                log.warning("barrier-kafka: cannot %s (attempt %d of %d): %s: %s; retrying",
                            what, attempt + 1, options.fetch_offset_retries + 1,
                            type(exc).__name__, exc)
                time.sleep(options.fetch_offset_retry_interval_ms / 1000)
        raise SourceError(f"cannot {what}: no attempt was made")  # numRetries >= 0: unreachable

    def _vanished(self, tps: list[TopicPartition]) -> bool:
        """True when a topic of ``tps`` no longer exists (fresh metadata); False when
        that cannot be told right now."""
        try:
            existing = self._partitions(sorted({tp.topic for tp in tps}))
        except Exception:  # noqa: BLE001 -- unknown: keep retrying as before
            return False
        return any(tp.topic not in existing for tp in tps)

    def discover(self) -> set[TopicPartition]:
        """Partitions currently selected by subscribe / subscribePattern / assign.

        Always refreshes metadata, so new partitions and topics are seen.
        """
        return self._retrying("list the topics' partitions", self._discover)

    def _discover(self) -> set[TopicPartition]:
        existing = self._partitions(self._selected_topics())  # remote call: fresh metadata
        if self._options.assign:
            return {tp for tp in self._options.assign
                    if tp.partition in existing.get(tp.topic, ())}
        regex = self._regex
        return {TopicPartition(t, p) for t, ids in existing.items()
                if regex is None or regex.fullmatch(t) for p in ids}

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets("earliest", lambda client, ktps, ms: client.beginning_offsets(ktps, timeout_ms=ms), tps)

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets; under ``read_committed`` the last stable offset."""
        return self._offsets("latest", lambda client, ktps, ms: client.end_offsets(ktps, timeout_ms=ms), tps)

    def _offsets(self, which: str, lookup: Callable[[KafkaConsumer, list[KafkaTP], int], dict[KafkaTP, int]],
                 tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """One ListOffsets lookup of ``tps`` under the retry budgets, each try bounded
        (``_try``); no request for none."""
        tps = list(tps)
        if not tps:
            return {}
        ktps = [KafkaTP(t.topic, t.partition) for t in tps]
        found = self._retrying(f"look up {which} offsets", lambda: self._try(
            lambda c, ms: lookup(c, ktps, ms)), tps)
        return {TopicPartition(k.topic, k.partition): v for k, v in found.items()}

    def for_times(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """First offset at/after each timestamp; None where no such record exists."""
        if not stamps:
            return {}
        kstamps = {KafkaTP(t.topic, t.partition): ts for t, ts in stamps.items()}
        found = self._retrying("look up offsets by timestamp", lambda: self._try(
            lambda c, ms: c.offsets_for_times(kstamps, timeout_ms=ms)))
        return {TopicPartition(k.topic, k.partition): (v.offset if v is not None else None)
                for k, v in found.items()}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

