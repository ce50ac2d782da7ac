"""One try of a driver lookup on kafka-python, bounded well below its request timeout.

Why: kafka-python waits for a request's answer until ``request_timeout_ms`` (30 s), on
the one broker it asked. A broker that holds the connection but does not answer -- one
that was just restarted and accepts TCP before it serves requests, one stopped by the
OS or its GC, a connection half-open after a network fault -- held a lookup for the
whole 30 s, and the batch with it, while the two other brokers could have answered
(issue 50: the default reader's stall ended ~30 s after the killed broker came back).
The Java client has the same request timeout but picks its metadata broker among
those without a request in flight, so one mute broker does not hold its refreshes.

So every lookup of :class:`._cluster.ClusterView` runs as tries of :data:`TRY_S`:

* a try that gets no answer in time raises kafka-python's retriable
  ``KafkaTimeoutError``, and the caller's failover retry (``failover.timeoutMs``)
  tries again;
* before that, :func:`drop_unanswered` closes every connection of the planner's
  client that holds a request older than the try: its requests fail, kafka-python
  asks for fresh metadata (it does on every connection closed with an error), and the
  next try's metadata request goes to a broker with an idle, working connection (its
  choice, ``least_loaded_node``, prefers those);
* a cluster that is only slow still gets its answer: after :data:`SHORT_TRIES` tries
  in a row without one, a try waits the full ``request_timeout_ms`` (:class:`TryBudget`).

The planner's client is group-less and never fetches, so a request in flight on it is
always one a lookup waits for: closing its connection loses nothing.

kafka-python 3 has no public call for a bounded, targeted metadata refresh;
:func:`refresh_topics` drives the consumer's own metadata cache (see there).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from kafka import KafkaConsumer
from kafka.errors import RequestTimedOutError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError

__all__ = ["SHORT_TRIES", "TRY_S", "TryBudget", "drop_unanswered", "forbid_auto_create",
           "refresh_topics"]

log = logging.getLogger(__name__)

TRY_S = 5.0
"""How long one try of a lookup waits for an answer (``kafka.request.timeout.ms`` when
shorter). A healthy cluster answers a metadata or ListOffsets request in milliseconds;
a broker restart or leader election needs seconds (fencing: 9 s by Kafka's default), so
a mute broker costs at most this much before another is asked."""

SHORT_TRIES = 3
"""Tries in a row without an answer before one try waits the full request timeout."""


class TryBudget:
    """How long the next try may wait: :data:`TRY_S`, or ``request_timeout_ms`` after
    :data:`SHORT_TRIES` unanswered tries in a row. One per planner client; the planner
    calls it from one thread at a time."""

    def __init__(self, request_timeout_ms: int) -> None:
        self.full_ms = int(request_timeout_ms)
        self.short_ms = min(self.full_ms, int(TRY_S * 1000))
        self.unanswered = 0

    def next_ms(self) -> int:
        return self.full_ms if self.unanswered >= SHORT_TRIES else self.short_ms

    def answered(self) -> None:
        self.unanswered = 0

    def timed_out(self) -> None:
        self.unanswered = 0 if self.unanswered >= SHORT_TRIES else self.unanswered + 1


def drop_unanswered(client: KafkaConsumer, older_than_s: float) -> list[str]:
    """Close each connection of ``client`` holding a request older than ``older_than_s``
    (sent, or queued while the connection was still being set up); return the nodes,
    as ``"node N"``, for the caller's log line.

    Runs on the client's IO thread (kafka-python's connections are not thread-safe).
    """
    manager = getattr(client, "_manager", None)
    net = getattr(client, "_net", None)
    if manager is None or net is None:
        return []  # another kafka-python layout: the try's own timeout still bounds it

    def drop() -> list[str]:
        now = time.monotonic()
        full_s = manager.config["request_timeout_ms"] / 1000
        dropped = []
        for node_id, conn in list(manager._conns.items()):
            sent = [entry[2] for entry in conn.in_flight_requests]
            # queued before the connection was up: (request, future, timeout_at)
            sent += [entry[2] - full_s for entry in conn._request_buffer]
            if sent and now - min(sent) >= older_than_s:
                conn.close(RequestTimedOutError(
                    f"no answer from node {node_id} within {older_than_s:g} s (barrier-kafka "
                    f"asks another broker)"))
                dropped.append(f"node {node_id}")
        return dropped

    try:
        dropped: list[str] = net.run(drop)
        return dropped
    except (AttributeError, TypeError, IndexError) as exc:  # another layout: nothing closed
        log.debug("barrier-kafka: cannot close unanswered connections: %s", exc)
        return []


def refresh_topics(client: KafkaConsumer, topics: list[str] | None, timeout_ms: int) -> bool:
    """Fetch fresh metadata for ``topics`` (every topic when None) into ``client``'s cache
    within ``timeout_ms`` (else kafka-python's retriable ``KafkaTimeoutError``); False
    when this kafka-python lays its consumer out otherwise (the caller then asks
    ``topics()``, bounded only by kafka-python).

    What ``KafkaConsumer.topics()`` does (kafka-python 3.0: wait for a refresh in
    flight, then request one and wait for it), with the consumer's tracked topics
    instead of all, and with a timeout instead of none. A request naming one topic
    fails its future with that topic's error: a topic that does not exist (yet) or may
    not be described is simply absent, as before.
    """
    if not forbid_auto_create(client):
        return False
    try:
        cluster, net, manager = client._cluster, client._net, client._manager
        deadline = time.monotonic() + timeout_ms / 1000
        if cluster.metadata_refresh_in_progress:
            net.run(manager.wait_for, cluster.request_update(), timeout_ms)
        every = cluster.need_all_topic_metadata
        if topics is None:
            cluster.need_all_topic_metadata = True
        for topic in topics or ():
            cluster.add_topic(topic)
        update = cluster.request_update
    except AttributeError:
        return False
    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
    try:
        with contextlib.suppress(UnknownTopicOrPartitionError, TopicAuthorizationFailedError):
            net.run(manager.wait_for, update(), left_ms)
    finally:
        cluster.need_all_topic_metadata = every
    return True


def forbid_auto_create(client: KafkaConsumer) -> bool:
    """Make ``client``'s metadata requests never create a topic; False when that cannot be said.

    kafka-python 3.0 builds a consumer's metadata cache without the consumer's
    ``allow_auto_create_topics`` (its default is True), so a request naming a missing
    topic creates it on a broker with ``auto.create.topics.enable`` (the broker's
    default): the planner would create the topic it waits for. The cache's own setting
    is the one its requests read.
    """
    config: Any = getattr(getattr(client, "_cluster", None), "config", None)
    if not isinstance(config, dict):
        return False
    config["allow_auto_create_topics"] = False
    return True
