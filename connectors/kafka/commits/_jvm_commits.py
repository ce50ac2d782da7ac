"""Group commits for queries that read with Spark's own ``format("kafka")`` (the JVM source).

Spark's Kafka source never commits to a consumer group, so lag tools (``kafka-consumer-groups``,
Burrow, exporters) see nothing. :func:`commit_kafka_offsets` adds a
``StreamingQueryListener`` that commits each *completed* batch's end offsets:

* **when:** on the query-progress event, which Spark posts only after the batch's
  entry is in the commit log -- so the group's offsets always describe a completed
  batch, never one ahead of the checkpoint;
* **which offsets:** taken from each Kafka source's ``endOffset`` JSON in the progress
  event, which is keyed by topic and partition. Sources are recognised by their
  description (``KafkaV2[...]``), never by position, so several Kafka sources and
  batches that skip a source commit the right partitions. If two sources read the
  same partition, the smaller offset wins (the group never claims more than both read);
* **how:** through :class:`~._offset_committer.OffsetCommitter`, the one owner of group
  commits, with versioned metadata as ``barrier-kafka``'s, naming its own id: ``src`` is
  ``spark-kafka``, ``batchId`` the batch id of the batch whose offsets are committed
  (version 2; version 1 stored batch id + 1 as ``checkpointId``), and ``queryId``;
* **failures:** logged and counted by the committer, never raised into Spark; the
  next completed batch commits again with newer offsets;
* **cost:** the listener only parses the event and hands the offsets to a
  background thread (newest wins); the admin round trip never runs on Spark's
  listener-bus thread. :meth:`KafkaOffsetCommits.stats` reports the time spent in
  the listener per event.

On Spark Connect (PySpark 4.x) the listener runs in the client process: the server
streams the query events to the client's listener bus, so the handle's ``stats`` and
``wait_for`` work as on classic PySpark (tests/connectors/kafka/test_jvm_commits_connect.py).
The listener stays picklable (threads and clients are created on first use) for
deployments that ship listeners elsewhere.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from ...._exceptions import ConfigError
from ...._faults import fault_point
from ....state._json import json_int, json_object, parse_json
from .._metrics import SourceMetrics
from ..client._client_config import KAFKA_PYTHON_DEFAULTS, kafka_python_configs
from ..client._positions import TopicPartition
from ._background_commits import BackgroundCommits

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.listener import (
        QueryIdleEvent,
        QueryProgressEvent,
        QueryStartedEvent,
        QueryTerminatedEvent,
    )

    from ._offset_committer import OffsetCommitter
from ..client._security import parse_security

__all__ = ["KafkaOffsetCommits", "commit_kafka_offsets", "kafka_source_offsets"]

log = logging.getLogger(__name__)

_KAFKA_DESCRIPTIONS = ("KafkaV2[", "KafkaSourceV1[", "KafkaSource[")
_SOURCE = "spark-kafka"


def kafka_source_offsets(sources: list[tuple[str, str | None]]) -> dict[TopicPartition, int]:
    """Offsets to commit from a progress event's ``(description, endOffset)`` pairs.

    Only Kafka sources count (recognised by description); each one's ``endOffset`` is
    Spark's ``{"topic": {"partition": next_offset}}``. A partition read by two sources
    gets the smaller offset. Other sources and unparsable offsets are ignored (logged).
    """
    out: dict[TopicPartition, int] = {}
    for description, end in sources:
        if not description.startswith(_KAFKA_DESCRIPTIONS) or not end:
            continue
        try:
            pairs = [(TopicPartition(topic, int(p)), json_int(off))
                     for topic, parts in json_object(parse_json(end), "end offsets").items()
                     for p, off in json_object(parts, topic).items()]
        except (ValueError, AttributeError, TypeError):
            log.warning("spark-kafka: cannot read end offsets of source %s", description)
            continue
        for tp, off in pairs:
            if off >= 0:  # Spark writes -1/-2 only for start positions, never for ends
                out[tp] = min(off, out.get(tp, off))
    return out


class _JsonEvents:
    """Py4J side of the listener on classic PySpark: progress events arrive as one JSON string.

    PySpark's own wrapper converts every progress event field by field over py4j
    (``QueryProgressEvent.fromJObject``: dozens of JVM round trips) before the listener
    runs. Measured 2026-11-23 on the loaded 2-core machine: median 108 ms per event (max
    1.8 s) against 0.5 ms in the listener, and 16-29 % more JVM CPU per record into
    ``noop`` (benchmarks/RESULTS.md). One ``json()`` call and a local parse replace it.
    Called on the py4j callback thread, in order, as Spark's listener bus posts.
    """

    def __init__(self, listener: KafkaOffsetCommits) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        from pyspark.sql.streaming.listener import QueryStartedEvent

        self.listener.onQueryStarted(QueryStartedEvent.fromJObject(jevent))  # once per query

    def onQueryProgress(self, jevent: Any) -> None:
        from pyspark.sql.streaming.listener import QueryProgressEvent

        self.listener.onQueryProgress(QueryProgressEvent.fromJson(json.loads(jevent.json())))

    def onQueryIdle(self, jevent: Any) -> None:
        """Nothing to convert: the listener ignores idle events."""

    def onQueryTerminated(self, jevent: Any) -> None:
        """Passed on (a few fields, once per query): :meth:`KafkaOffsetCommits.finish` waits
        for it to know the query's last completed batch. Dropped here, ``finish`` ran out
        its whole timeout on classic PySpark (60 s at every AvailableNow exit)."""
        from pyspark.sql.streaming.listener import QueryTerminatedEvent

        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJObject(jevent))

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class KafkaOffsetCommits(StreamingQueryListener):
    """The listener (and the handle returned to the caller).

    Which query: the one named ``query_name``; else the first query *started* after
    registration (bound on its start event: progress events of queries that were
    running before, or of a second query started later, are never committed to this
    group; the second start is logged as an error naming ``query_name``). Methods
    prefixed ``on`` are called by Spark's listener bus (driver, or the Connect
    client); :meth:`wait_for`, :meth:`stats`, :meth:`finish` and :meth:`close` by the
    user. Commits run on :class:`~._background_commits.BackgroundCommits`.
    """

    def __init__(self, group_id: str, admin_configs: Mapping[str, Any],
                 query_name: str | None = None,
                 running_before: frozenset[str] = frozenset()) -> None:
        self._group_id = group_id
        self._admin_configs = dict(admin_configs)
        self._query_name = query_name
        self._running_before = running_before
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._query_id: str | None = None
        self._cond = threading.Condition()
        self._committer: OffsetCommitter | None = None
        self._metrics = SourceMetrics()
        self._commits = BackgroundCommits(
            self._make_committer, name="spark-kafka-commits", id_name="batch",
            before_commit=lambda: fault_point("listener.before_group_commit"),
            metrics=self._metrics)
        self._last_progress = -1
        self._terminated: set[str] = set()  # ids of queries whose termination event arrived
        self._ambiguous_warned = False
        self._events = 0
        self._listener_s_total = 0.0
        self._listener_s_max = 0.0

    def _make_committer(self) -> OffsetCommitter:
        from ._offset_committer import OffsetCommitter

        if self._committer is None:
            self._committer = OffsetCommitter(self._admin_configs, self._group_id,
                                              self._metrics, query_id=self._query_id,
                                              source=_SOURCE)
        return self._committer

    def __getstate__(self) -> dict[str, object]:
        return {"group_id": self._group_id, "admin_configs": self._admin_configs,
                "query_name": self._query_name, "running_before": self._running_before}

    def __setstate__(self, state: dict[str, object]) -> None:
        group_id, configs, name = state["group_id"], state["admin_configs"], state["query_name"]
        running = state.get("running_before", frozenset())
        # Only __getstate__ writes this state: a wrong type is a bug here, not a user's error.
        if not (isinstance(group_id, str) and isinstance(configs, dict) and isinstance(name, (str, type(None)))
                and isinstance(running, frozenset)):
            raise TypeError(f"not the pickled state of {type(self).__name__}: {sorted(state)}")
        self._group_id = group_id
        self._admin_configs = configs
        self._query_name = name
        self._running_before = running
        self._init_runtime()

    @property
    def _jlistener(self) -> Any:
        """The JVM wrapper classic PySpark registers (``addListener``/``removeListener``);
        ours hands progress events over as JSON (:class:`_JsonEvents`). Not used on
        Spark Connect, whose client parses the events' JSON itself."""
        if getattr(self, "_jlistenerobj", None) is None:
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            if jvm is None:  # explicit: classic PySpark asks for it with its context running
                raise ConfigError("commit_kafka_offsets: no running SparkContext to register the "
                                  "listener with")
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonEvents(self))
        return self._jlistenerobj

    def __repr__(self) -> str:  # never the client settings: they may hold secrets
        return f"KafkaOffsetCommits(group_id={self._group_id!r}, query_name={self._query_name!r})"

    # -- listener side (Spark's listener bus) ----------------------------------------

    def _mine(self, query_id: str, name: str | None, *, started: bool) -> bool:
        """Is this event of the bound query? Binds on the first eligible start event.

        A named listener binds to its name on any event (a name is unambiguous). An
        unnamed one binds only on a start event of a query that was not running at
        registration: progress events come in the order queries post them, so binding
        on progress picked whichever query finished a batch first.
        """
        with self._cond:
            if self._query_id is not None:
                if query_id != self._query_id and started and self._query_name is None \
                        and not self._ambiguous_warned:
                    self._ambiguous_warned = True
                    log.error("spark-kafka: commit_kafka_offsets for group %r is bound to "
                              "query %s; query %s started after it is not committed. Call "
                              "commit_kafka_offsets once per query with query_name= (the "
                              "query's queryName) to commit both", self._group_id,
                              self._query_id, query_id)
                return query_id == self._query_id
            if self._query_name is not None:
                if name != self._query_name:
                    return False
            elif not started or query_id in self._running_before:
                return False
            self._query_id = query_id
            return True

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        self._mine(str(event.id), event.name, started=True)

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        started = time.perf_counter()
        progress = event.progress
        if not self._mine(str(progress.id), progress.name, started=False):
            return
        offsets = kafka_source_offsets([(s.description, s.endOffset) for s in progress.sources])
        if offsets:
            batch_id = progress.batchId  # the batch whose end offsets these are
            self._commits.submit(batch_id, int(time.time() * 1000), offsets)
        with self._cond:
            self._last_progress = max(self._last_progress, progress.batchId)
            spent = time.perf_counter() - started
            self._events += 1
            self._listener_s_total += spent
            self._listener_s_max = max(self._listener_s_max, spent)

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        """Nothing to do: the last batch's progress event already queued its commit."""

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        """Every progress event of the query came before this one (the bus is ordered):
        :meth:`finish` waits for it to know the query's last completed batch. Recorded for
        any query: ``finish(query)`` may be called before this listener saw ``query`` start."""
        with self._cond:
            self._terminated.add(str(event.id))
            self._cond.notify_all()

    # -- user side --------------------------------------------------------------------

    def wait_for(self, batch_id: int, timeout_s: float) -> bool:
        """True once ``batch_id`` (or a later batch) is committed to the group."""
        return self._commits.wait_for(batch_id, timeout_s)

    def stats(self) -> dict[str, float]:
        """Commits succeeded/failed, last committed batch id (-1: none yet), listener time per event."""
        with self._cond:
            snap = self._metrics.snapshot()
            return {"commits_succeeded": snap["commits_succeeded"],
                    "commits_failed": snap["commits_failed"],
                    "last_committed_batch": -1 if (done := self._commits.committed) is None else done,
                    "events": self._events,
                    "listener_s_total": self._listener_s_total,
                    "listener_s_max": self._listener_s_max}

    def finish(self, query: StreamingQuery, timeout_s: float = 60.0) -> bool:
        """After ``query`` stopped: wait for its last completed batch's group commit, then
        :meth:`close`. True if that batch is in the group (or ``query`` completed none).

        Why not ``query.lastProgress``: after about 10 s without data Spark reports an
        idle progress naming the *next* batch, which never ran and never commits. The
        last completed batch is the last one whose progress event reached this
        listener before the query's termination event (Spark posts a batch's progress
        only after its commit-log entry, and the bus delivers in order). So: wait for
        ``query``'s termination event, by ``query.id`` (``awaitTermination`` returns
        before the bus delivers it, and a short query's start event may not have
        reached the listener yet either), then for that batch. A ``query`` this listener
        is not bound to is logged as an error and has nothing to wait for; the
        listener is closed all the same.
        """
        query_id = str(query.id)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while query_id not in self._terminated:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            bound = self._query_id
            last = self._last_progress if bound == query_id else -1
        if bound != query_id:
            log.error("spark-kafka: finish(query %s) on the commit_kafka_offsets listener of group %r, "
                      "which commits %s: nothing of that query to wait for", query_id, self._group_id,
                      f"query {bound}" if bound is not None else "no query (none bound)")
        done = last < 0 or self.wait_for(last, max(deadline - time.monotonic(), 0))
        self.close()
        return done

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish the pending commit (if any), stop the worker, close the admin client (idempotent)."""
        self._commits.close(timeout_s)


def commit_kafka_offsets(spark: SparkSession, group_id: str, options: Mapping[str, str], *,
                         query_name: str | None = None) -> KafkaOffsetCommits:
    """Commit each completed batch of a ``format("kafka")`` query to consumer group ``group_id``.

    Call before ``start()``. ``options`` are the ``kafka.*`` options given to the
    source (at least ``kafka.bootstrap.servers``; security settings as for
    ``barrier-kafka``); other keys are ignored. The listener binds to the query named
    ``query_name``, else to the first query started after this call (queries already
    running are never bound) -- one call per query, each with its own group. When the
    query has stopped, :meth:`KafkaOffsetCommits.finish` waits for its last completed
    batch to reach the group; remove the listener with ``spark.streams.removeListener``.
    """
    if not group_id:
        raise ConfigError("commit_kafka_offsets needs a group_id")
    passthrough = {k: str(v) for k, v in options.items() if k.startswith("kafka.")}
    bootstrap = passthrough.pop("kafka.bootstrap.servers", None)
    if not bootstrap:
        raise ConfigError("commit_kafka_offsets needs option 'kafka.bootstrap.servers'",
                          option="kafka.bootstrap.servers")
    from kafka import KafkaAdminClient

    # The security options as barrier-kafka takes them (Spark's Java names: SCRAM and
    # GSSAPI JAAS lines, JKS/PKCS12/PEM stores), parsed and checked here, at registration.
    security = parse_security(passthrough)
    client = {**KAFKA_PYTHON_DEFAULTS, **kafka_python_configs(passthrough), **security.kafka_python()}
    admin = {"bootstrap_servers": bootstrap.split(","),
             **{k: v for k, v in client.items() if k in KafkaAdminClient.DEFAULT_CONFIG}}
    running = frozenset(str(q.id) for q in spark.streams.active)
    listener = KafkaOffsetCommits(group_id, admin, query_name, running)
    spark.streams.addListener(listener)
    return listener
