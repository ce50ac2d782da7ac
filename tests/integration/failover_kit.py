"""Streaming queries on the 3-broker cluster while brokers die: the failover harness.

Shared by tests/integration/test_kafka_failover.py (asserts) and
benchmarks/bench_failover.py (stall per fault). One :class:`FailoverRun` is one topic
with a producer writing all along, and one query per read path into its own Parquet
sink (Spark's file sink is exactly once by its own log), each committing to its own
consumer group:

* ``native``, ``confluent``, ``kafka-python`` -- ``barrier-kafka`` with that executor
  client (group commits built in);
* ``jvm`` -- Spark's own ``format("kafka")`` with ``commit_kafka_offsets``;
* ``native-nopool`` (optional, :data:`NO_POOL`) -- the compiled reader with its consumer
  pool off (``kafkaConsumer.cacheTimeoutMs=0``): every task makes a fresh consumer.

The shape of the load is the run's: partitions, the producer's rate,
``maxOffsetsPerTrigger`` and the sink (Parquet, or a ``foreachBatch`` that counts the
batch, as issue 44's user ran).

The groups are named so that one broker coordinates all of them (the same partition
of ``__consumer_offsets``), so killing that broker moves every group's coordinator.

What it records: every completed batch per query with the time it was first seen
(the stall per fault is the longest gap between two), and a monitor's samples of each
group's offsets against the newest batch in the query's commit log (read *after* the
group, so a sample that is ahead is a real violation).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka.errors import KafkaError

from sparkbarrier.connectors.storage._checkpoint_log import checkpoint_log_status, planned_batch
from sparkbarrier.connectors.kafka import commit_kafka_offsets
from polling import wait_for

__all__ = ["NO_POOL", "PATHS", "FailoverRun", "same_coordinator_groups"]

PATHS = ("native", "confluent", "kafka-python", "jvm")
NO_POOL = "native-nopool"
TRIGGER = "1 second"
SINKS = ("parquet", "foreachBatch")


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition (so the coordinator) of ``group``, as Kafka 4's
    group coordinator computes it: ``Math.abs(group.hashCode() % partitions)`` (Java's
    remainder takes the dividend's sign; checked against the devstack's cluster)."""
    return abs(_java_hash(group)) % partitions


def same_coordinator_groups(prefix: str, names: Iterable[str], offsets_partitions: int) -> dict[str, str]:
    """One group id per name, all on the same ``__consumer_offsets`` partition."""
    names = list(names)
    target = _offsets_partition(f"{prefix}-{names[0]}", offsets_partitions)
    out: dict[str, str] = {}
    for name in names:
        n = 0
        while _offsets_partition(group := f"{prefix}-{name}-{n}" if n else f"{prefix}-{name}",
                                 offsets_partitions) != target:
            n += 1
        out[name] = group
    return out


class _Producer(threading.Thread):
    """Writes ``"0", "1", ...`` all along (acks=all, idempotent); remembers what was acked."""

    def __init__(self, bootstrap: str, topic: str, per_tick: int = 20, tick_s: float = 0.1) -> None:
        super().__init__(name="failover-producer", daemon=True)
        self.topic, self.per_tick, self.tick_s = topic, per_tick, tick_s
        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all",
                                      enable_idempotence=True, retries=1_000_000,
                                      delivery_timeout_ms=300_000, request_timeout_ms=10_000,
                                      linger_ms=5)
        self.acked: set[int] = set()
        self.failed = 0
        self.sent = 0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def _ack(self, n: int) -> Callable[[Any], None]:
        def done(_: Any) -> None:
            with self._lock:
                self.acked.add(n)
        return done

    def _fail(self, _: Exception) -> None:
        with self._lock:
            self.failed += 1

    def run(self) -> None:
        while not self._halt.is_set():
            for _ in range(self.per_tick):
                n = self.sent
                self.producer.send(self.topic, key=str(n % 16).encode(), value=str(n).encode()) \
                    .add_callback(self._ack(n)).add_errback(self._fail)
                self.sent += 1
            self._halt.wait(self.tick_s)

    def finish(self) -> None:
        self._halt.set()
        self.join(30)
        self.producer.flush(120)
        self.producer.close(30)


def _count_batch(frame: Any, _batch_id: int) -> None:
    """A ``foreachBatch`` sink that reads every record of the batch and keeps nothing."""
    frame.count()


@dataclass
class _Query:
    path: str
    group: str
    checkpoint: Path
    sink: Path
    query: Any = None
    listener: Any = None
    batches: list[tuple[int, float]] = field(default_factory=list)  # (batch id, seen at)


class FailoverRun:
    """One topic, a producer, one query per path; see the module docstring."""

    def __init__(self, spark: Any, cluster: Any, workdir: Path, name: str,
                 paths: Iterable[str] = PATHS, partitions: int = 2,
                 offsets_partitions: int = 6, rate: int = 200,
                 max_offsets_per_trigger: int | None = None, sink: str = "parquet") -> None:
        """``rate``: records a second the producer writes (in ticks of 0.1 s);
        ``max_offsets_per_trigger``: that option on every query (None: unset);
        ``sink``: one of :data:`SINKS`."""
        if sink not in SINKS:
            raise ValueError(f"sink must be one of {SINKS}, got {sink!r}")
        self.spark, self.cluster, self.workdir, self.name = spark, cluster, workdir, name
        self.max_offsets_per_trigger, self.sink = max_offsets_per_trigger, sink
        self.topic = cluster.create_topic(name, partitions)
        groups = same_coordinator_groups(f"{name}-g", paths, offsets_partitions)
        self.queries = {p: _Query(p, groups[p], workdir / p / "checkpoint", workdir / p / "sink")
                        for p in paths}
        self.producer = _Producer(cluster.bootstrap, self.topic, per_tick=max(1, rate // 10))
        self.violations: list[str] = []
        self.samples = 0
        self._halt = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- running --------------------------------------------------------------------

    def start(self) -> None:
        self.producer.start()
        for q in self.queries.values():
            self._start_query(q)
        for target in (self._watch_batches, self._watch_groups):
            thread = threading.Thread(target=target, daemon=True, name=target.__name__)
            thread.start()
            self._threads.append(thread)

    def _start_query(self, q: _Query) -> None:
        bootstrap = self.cluster.bootstrap
        qname = f"{self.name}_{q.path.replace('-', '_')}"
        if q.path == "jvm":
            q.listener = commit_kafka_offsets(self.spark, q.group,
                                              {"kafka.bootstrap.servers": bootstrap},
                                              query_name=qname)
            reader = (self.spark.readStream.format("kafka")
                      .option("kafka.bootstrap.servers", bootstrap))
        else:
            reader = (self.spark.readStream.format("barrier-kafka")
                      .option("kafka.bootstrap.servers", bootstrap)
                      .option("kafka.group.id", q.group)
                      .option("kafkaConsumer.client", "native" if q.path == NO_POOL else q.path))
            if q.path == NO_POOL:
                reader = reader.option("kafkaConsumer.cacheTimeoutMs", "0")
        if self.max_offsets_per_trigger is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets_per_trigger))
        frame = (reader.option("subscribe", self.topic).option("startingOffsets", "earliest")
                 .load().selectExpr("CAST(value AS STRING) AS v", "partition", "offset"))
        writer = frame.writeStream.queryName(qname).option("checkpointLocation", str(q.checkpoint))
        if self.sink == "foreachBatch":
            writer = writer.foreachBatch(_count_batch)
        else:
            writer = writer.format("parquet").option("path", str(q.sink))
        q.query = writer.trigger(processingTime=TRIGGER).start()

    def _watch_batches(self) -> None:
        while not self._halt.is_set():
            for q in self.queries.values():
                progress = q.query.lastProgress if q.query is not None else None
                if progress and progress["numInputRows"] > 0 and (
                        not q.batches or progress["batchId"] > q.batches[-1][0]):
                    q.batches.append((progress["batchId"], time.monotonic()))
            self._halt.wait(0.1)

    def _watch_groups(self) -> None:
        admin = None
        while not self._halt.is_set():
            try:
                if admin is None:
                    admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap.split(","),
                                             request_timeout_ms=5000)
                for q in self.queries.values():
                    self._check_not_ahead(admin, q)
                self.samples += 1
            except Exception:  # noqa: BLE001 -- a broker is being killed: sample later
                if admin is not None:
                    admin.close()
                admin = None
            self._halt.wait(0.5)
        if admin is not None:
            admin.close()

    def _check_not_ahead(self, admin: KafkaAdminClient, q: _Query) -> None:
        group = self.group_offsets(q.path, admin)
        if not group or not (q.checkpoint / "offsets").is_dir():
            return
        done = checkpoint_log_status(str(q.checkpoint)).last_completed  # read after the group
        limit = done.offsets if done else {}
        ahead = {tp: off for tp, off in group.items() if off > limit.get(tp, -1)}
        if ahead:
            self.violations.append(f"{q.path}: group {ahead} ahead of the last completed batch "
                                   f"{limit}")

    # -- reading --------------------------------------------------------------------

    def group_offsets_now(self, path: str) -> dict[str, int]:
        """:meth:`group_offsets`, or ``{}`` while a broker it asks is down (for polling)."""
        try:
            return self.group_offsets(path)
        except KafkaError:
            return {}

    def group_offsets(self, path: str, admin: KafkaAdminClient | None = None) -> dict[str, int]:
        own = admin is None
        admin = admin or KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap.split(","),
                                          request_timeout_ms=5000)
        try:
            found = admin.list_group_offsets({self.queries[path].group: None})
            found = found.get(self.queries[path].group, {})
        finally:
            if own:
                admin.close()
        return {f"{tp.topic}:{tp.partition}": meta.offset for tp, meta in found.items()
                if meta is not None and meta.offset is not None and meta.offset >= 0}

    def end_offsets(self) -> dict[str, int]:
        consumer = KafkaConsumer(bootstrap_servers=self.cluster.bootstrap.split(","))
        try:
            tps = [KafkaTP(self.topic, p) for p in consumer.partitions_for_topic(self.topic)]
            return {f"{tp.topic}:{tp.partition}": off for tp, off in consumer.end_offsets(tps).items()}
        finally:
            consumer.close()

    def topic_values(self) -> list[str]:
        """Every record in the topic (the producer may have written one twice on a retry:
        the sink must then hold it twice too)."""
        ends = self.end_offsets()
        consumer = KafkaConsumer(bootstrap_servers=self.cluster.bootstrap.split(","),
                                 enable_auto_commit=False, consumer_timeout_ms=10_000)
        tps = [KafkaTP(self.topic, int(ch.rsplit(":", 1)[1])) for ch in ends]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        values: list[str] = []
        try:
            while any(consumer.position(tp) < ends[f"{tp.topic}:{tp.partition}"] for tp in tps):
                for records in consumer.poll(timeout_ms=1000).values():
                    values.extend(r.value.decode() for r in records)
        finally:
            consumer.close()
        return values

    def sink_values(self, path: str) -> list[str]:
        return [r.v for r in self.spark.read.parquet(str(self.queries[path].sink)).collect()]

    def completed_batches(self, path: str) -> int:
        q = self.queries[path]
        return q.batches[-1][0] if q.batches else -1

    def wait_batches(self, more: int, timeout: float = 180, paths: Iterable[str] | None = None) -> None:
        """Until every query (or each of ``paths``) completed ``more`` further batches with data."""
        chosen = list(self.queries if paths is None else paths)  # a path not run fails, never waits vacuously
        base = {p: self.completed_batches(p) for p in chosen}
        wait_for(lambda: all(self.completed_batches(p) >= base[p] + more for p in chosen),
                 timeout, f"{more} more batches on {'every path' if paths is None else chosen} (from {base})")

    def check_commits_resume(self, timeout: float = 180) -> None:
        """A commit lands within one batch: once a query completed batch B+2 after now,
        its group holds at least batch B+1's end offsets (a few seconds' slack for the
        commit's round trip)."""
        marks = {p: self.completed_batches(p) for p in self.queries}
        self.wait_batches(2, timeout)
        for path, mark in marks.items():
            q = self.queries[path]
            want = planned_batch(str(q.checkpoint), mark + 1)
            assert want is not None, f"{path}: batch {mark + 1} not in the offset log"
            wait_for(lambda: all(self.group_offsets_now(path).get(tp, -1) >= off
                                 for tp, off in want.offsets.items()),
                     15, f"{path}: group commit of batch {mark + 1} ({want.offsets})")

    def stall_s(self, path: str, since: float, until: float) -> float:
        """Longest gap between completed batches of ``path`` within ``[since, until]``."""
        times = [since] + [t for _, t in self.queries[path].batches if since < t < until]
        after = [t for _, t in self.queries[path].batches if t >= until]
        times.append(after[0] if after else until)
        return max(b - a for a, b in zip(times, times[1:]))

    # -- ending ---------------------------------------------------------------------

    def drain(self, timeout: float = 240) -> dict[str, int]:
        """Stop producing; wait until every group holds the topic's end; stop the queries."""
        self.producer.finish()
        ends = self.end_offsets()
        for path in self.queries:
            wait_for(lambda: self.group_offsets_now(path) == ends, timeout,
                     f"{path}: group at the end {ends}")
        return ends

    def stop(self) -> dict[str, bool]:
        """Stop everything; ``{path: finish() result}`` for the listener paths."""
        self._halt.set()
        for thread in self._threads:
            thread.join(10)
        finished = {}
        for q in self.queries.values():
            if q.query is not None:
                q.query.stop()
            if q.listener is not None:
                finished[q.path] = q.listener.finish(q.query, 60)
                self.spark.streams.removeListener(q.listener)
        if self.producer.is_alive():
            self.producer.finish()
        return finished

    def exceptions(self) -> dict[str, str]:
        return {p: str(q.query.exception()) for p, q in self.queries.items()
                if q.query is not None and q.query.exception() is not None}
