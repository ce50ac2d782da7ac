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
* **how:** through :class:`~._committer.OffsetCommitter`, the one owner of group
  commits, with the same versioned metadata as ``barrier-kafka`` (``src`` is
  ``spark-kafka``, ``checkpointId`` is Spark's batch id + 1, i.e. the number of
  completed batches, and ``queryId``);
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
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from ..._exceptions import ConfigError
from ..._faults import fault_point
from ._client_config import kafka_python_configs
from ._security import parse_security
from ._metrics import SourceMetrics
from ._positions import TopicPartition

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
            parsed = json.loads(end)
            pairs = [(TopicPartition(topic, int(p)), int(off))
                     for topic, parts in parsed.items() for p, off in parts.items()]
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
        """Nothing to convert: the listener ignores termination (see its docstring)."""

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class KafkaOffsetCommits(StreamingQueryListener):
    """The listener (and the handle returned to the caller).

    Which query: the one named ``query_name``, else the first query started after
    registration. Methods prefixed ``on`` are called by Spark's listener bus (driver, or
    the Connect server); :meth:`wait_for`, :meth:`stats` and :meth:`close` by the user.
    """

    def __init__(self, group_id: str, admin_configs: Mapping[str, Any],
                 query_name: str | None = None) -> None:
        self._group_id = group_id
        self._admin_configs = dict(admin_configs)
        self._query_name = query_name
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._query_id: str | None = None
        self._cond = threading.Condition()
        self._pending: tuple[int, dict[TopicPartition, int]] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._committer: Any = None
        self._metrics = SourceMetrics()
        self._last_batch = -1
        self._events = 0
        self._listener_s_total = 0.0
        self._listener_s_max = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {"group_id": self._group_id, "admin_configs": self._admin_configs,
                "query_name": self._query_name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._group_id = state["group_id"]
        self._admin_configs = state["admin_configs"]
        self._query_name = state["query_name"]
        self._init_runtime()

    @property
    def _jlistener(self) -> Any:
        """The JVM wrapper classic PySpark registers (``addListener``/``removeListener``);
        ours hands progress events over as JSON (:class:`_JsonEvents`). Not used on
        Spark Connect, whose client parses the events' JSON itself."""
        if getattr(self, "_jlistenerobj", None) is None:
            from pyspark import SparkContext

            self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(  # type: ignore[union-attr]
                _JsonEvents(self))
        return self._jlistenerobj

    def __repr__(self) -> str:  # never the client settings: they may hold secrets
        return f"KafkaOffsetCommits(group_id={self._group_id!r}, query_name={self._query_name!r})"

    # -- listener side (Spark's listener bus) ----------------------------------------

    def _mine(self, query_id: str, name: str | None) -> bool:
        if self._query_id is not None:
            return query_id == self._query_id
        if self._query_name is not None and name != self._query_name:
            return False
        self._query_id = query_id
        return True

    def onQueryStarted(self, event: Any) -> None:
        self._mine(str(event.id), event.name)

    def onQueryProgress(self, event: Any) -> None:
        started = time.perf_counter()
        progress = event.progress
        if not self._mine(str(progress.id), progress.name):
            return
        offsets = kafka_source_offsets([(s.description, s.endOffset) for s in progress.sources])
        with self._cond:
            if offsets and progress.batchId > self._last_batch_seen():
                self._pending = (progress.batchId, offsets)
                self._start_worker()
                self._cond.notify_all()
            spent = time.perf_counter() - started
            self._events += 1
            self._listener_s_total += spent
            self._listener_s_max = max(self._listener_s_max, spent)

    def onQueryIdle(self, event: Any) -> None:
        """Nothing to do: the last batch's progress event already queued its commit."""

    def onQueryTerminated(self, event: Any) -> None:
        """The query's last batch is queued already; the worker finishes it, then idles."""

    def _last_batch_seen(self) -> int:
        return self._pending[0] if self._pending else self._last_batch

    def _start_worker(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spark-kafka-commits",
                                            daemon=True)
            self._thread.start()

    # -- worker thread ----------------------------------------------------------------

    def _run(self) -> None:
        from ._committer import OffsetCommitter

        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                batch_id, offsets = self._pending
                self._pending = None
            fault_point("listener.before_group_commit")
            try:
                if self._committer is None:
                    self._committer = OffsetCommitter(self._admin_configs, self._group_id,
                                                      self._metrics, query_id=self._query_id,
                                                      source=_SOURCE)
                ok = self._committer.commit(batch_id + 1, int(time.time() * 1000), offsets)
            except Exception:  # noqa: BLE001 - logged and counted, see below
                # The committer handles Kafka's errors itself; anything else (a client
                # setting kafka-python rejects, a bug) would end this thread, and with it
                # every later commit, without a trace in stats(). Log it, count it, go on.
                log.exception("spark-kafka: committing batch %d to group %r failed",
                              batch_id, self._group_id)
                self._metrics.add("commits_failed")
                ok = False
            with self._cond:
                if ok:
                    self._last_batch = max(self._last_batch, batch_id)
                self._cond.notify_all()

    # -- user side --------------------------------------------------------------------

    def wait_for(self, batch_id: int, timeout_s: float) -> bool:
        """True once ``batch_id`` (or a later batch) is committed to the group."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._last_batch < batch_id:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def stats(self) -> dict[str, float]:
        """Commits succeeded/failed, last committed batch, listener time per event."""
        with self._cond:
            snap = self._metrics.snapshot()
            return {"commits_succeeded": snap["commits_succeeded"],
                    "commits_failed": snap["commits_failed"],
                    "last_committed_batch": self._last_batch,
                    "events": self._events,
                    "listener_s_total": self._listener_s_total,
                    "listener_s_max": self._listener_s_max}

    def finish(self, query: Any, timeout_s: float = 60.0) -> bool:
        """After ``query`` stopped: wait for its last batch's group commit, then :meth:`close`.

        ``awaitTermination`` returns before Spark has delivered the last progress events,
        so a driver that exits right after it would cut the last commit off (AvailableNow
        above all). True if the last batch (``query.lastProgress``) is committed.
        """
        last = query.lastProgress
        done = last is None or self.wait_for(int(last["batchId"]), timeout_s)
        self.close()
        return done

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish the pending commit (if any), stop the worker, close the admin client (idempotent)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._committer is not None:
            self._committer.close()
            self._committer = None  # idempotent: finish() closes, a finally may close again


def commit_kafka_offsets(spark: Any, group_id: str, options: Mapping[str, str], *,
                         query_name: str | None = None) -> KafkaOffsetCommits:
    """Commit each completed batch of a ``format("kafka")`` query to consumer group ``group_id``.

    Call before ``start()``. ``options`` are the ``kafka.*`` options given to the
    source (at least ``kafka.bootstrap.servers``; security settings as for
    ``barrier-kafka``); other keys are ignored. The listener binds to the query named
    ``query_name``, else to the first query started after this call -- one call per
    query, each with its own group. Remove it with ``spark.streams.removeListener``
    and :meth:`KafkaOffsetCommits.close` when done.
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
    client = {**kafka_python_configs(passthrough), **security.kafka_python()}
    admin = {"bootstrap_servers": bootstrap.split(","),
             **{k: v for k, v in client.items() if k in KafkaAdminClient.DEFAULT_CONFIG}}
    listener = KafkaOffsetCommits(group_id, admin, query_name)
    spark.streams.addListener(listener)
    return listener
