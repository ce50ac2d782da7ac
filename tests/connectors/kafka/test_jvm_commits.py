"""commit_kafka_offsets: group commits for Spark's own format("kafka"), real broker and JVM source.

Unit tests read offsets out of progress-event fields without Spark; the integration
tests run the JVM source (tests/jvm_kafka.py puts it on the session's classpath).
"""

from __future__ import annotations

import json
import pickle
import time

import pytest
from kafka_testkit import KafkaTool, wait_for

from sparkbarrier import commit_kafka_offsets
from sparkbarrier.connectors.kafka.commits._jvm_commits import KafkaOffsetCommits, kafka_source_offsets
from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP


def test_offsets_matched_by_source_description_not_position() -> None:
    sources = [
        ("RateStreamV2[rowsPerSecond=1]", '{"0": 5}'),
        ("KafkaV2[Subscribe[b]]", '{"b":{"0":7}}'),
        ("KafkaV2[Subscribe[a]]", '{"a":{"1":3,"0":4}}'),
        ("KafkaV2[Subscribe[a]]", '{"a":{"0":2}}'),  # a second reader of a: smaller wins
        ("KafkaV2[Subscribe[c]]", None),
    ]
    assert kafka_source_offsets(sources) == {TP("b", 0): 7, TP("a", 1): 3, TP("a", 0): 2}


def test_listener_pickles_without_runtime_or_secrets_in_repr() -> None:
    listener = KafkaOffsetCommits("g", {"sasl_plain_password": "s3cr3t"}, "q")
    assert "s3cr3t" not in repr(listener)
    copy = pickle.loads(pickle.dumps(listener))
    assert copy.stats()["events"] == 0 and repr(copy) == repr(listener)


def _query(spark, kafka: KafkaTool, topics: list[str], group: str, name: str, path):
    frames = [spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", t).option("startingOffsets", "earliest").load()
              for t in topics]
    df = frames[0]
    for other in frames[1:]:
        df = df.union(other)
    handle = commit_kafka_offsets(spark, group, {"kafka.bootstrap.servers": kafka.bootstrap},
                                  query_name=name)
    query = (df.writeStream.format("noop").queryName(name).trigger(availableNow=True)
             .option("checkpointLocation", str(path)).start())
    return handle, query


@pytest.mark.kafka
def test_two_sources_and_two_queries_commit_completed_batches_to_own_groups(
        spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    a, b = kafka.create_topic(unique_name("a")), kafka.create_topic(unique_name("b"))
    kafka.produce(a, 10)
    kafka.produce(b, 4)
    g1, g2 = unique_name("g1"), unique_name("g2")
    h1, q1 = _query(spark, kafka, [a, b], g1, unique_name("q1"), tmp_path / "c1")
    h2, q2 = _query(spark, kafka, [b], g2, unique_name("q2"), tmp_path / "c2")
    try:
        q1.awaitTermination(120)
        q2.awaitTermination(120)
        wait_for(lambda: kafka.group_offsets(g1) == {(a, 0): 5, (a, 1): 5, (b, 0): 2, (b, 1): 2},
                 60, "g1 committed")
        wait_for(lambda: kafka.group_offsets(g2) == {(b, 0): 2, (b, 1): 2}, 60, "g2 committed")
        meta = json.loads(kafka.group_metadata(g1)[(a, 0)])
        assert meta["src"] == "spark-kafka" and meta["queryId"] == str(q1.id)
        assert meta["v"] == 2 and meta["batchId"] == q1.lastProgress["batchId"] and "checkpointId" not in meta
        # A second run in which only b has data: a's batch is skipped, a keeps its offsets.
        kafka.produce(b, 2, start=100)
        h1b, q1b = _query(spark, kafka, [a, b], g1, q1.name, tmp_path / "c1")
        try:
            q1b.awaitTermination(120)
            assert h1b.finish(q1b)  # returns once the last batch is in the group
            assert kafka.group_offsets(g1) == {(a, 0): 5, (a, 1): 5, (b, 0): 3, (b, 1): 3}
            assert h1b.stats()["commits_failed"] == 0
            _status_shows_group_and_checkpoint(kafka, g1, b, tmp_path / "c1",
                                               q1b.lastProgress["batchId"])
        finally:
            spark.streams.removeListener(h1b)
            h1b.close()
        stats = h1.stats()
        assert stats["commits_succeeded"] >= 1 and stats["events"] >= 1
    finally:
        for h in (h1, h2):
            spark.streams.removeListener(h)
            h.close()


def _status_shows_group_and_checkpoint(kafka: KafkaTool, group: str, topic: str, ckpt,
                                       last_batch: int) -> None:
    """The status CLI reads the JVM source's group and Spark checkpoint like barrier-kafka's."""
    import contextlib
    import io

    from sparkbarrier.__main__ import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["status", "--group", group, "--topic", topic, "--bootstrap",
                     kafka.bootstrap, "--checkpoint-location", str(ckpt), "--json"])
    assert code == 0
    got = json.loads(out.getvalue())
    assert got["group"]["last_batch_id"] == last_batch  # Spark's batch id, under its name
    assert got["group"]["last_checkpoint_id"] is None  # no barrier-kafka checkpoint here
    assert {p["batch_id"] for p in got["group"]["partitions"]} == {last_batch}
    assert got["group_behind_checkpoint"] is None
    assert got["group"]["total_lag"] == 0
    assert got["checkpoint_log"]["last_completed"]["batch_id"] == last_batch
    assert got["checkpoint_log"]["last_completed"]["offsets"][f"{topic}:0"] == 3


@pytest.mark.kafka
def test_unreachable_group_coordinator_is_counted_not_failing_the_query(
        spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    topic = kafka.create_topic(unique_name("t"))
    kafka.produce(topic, 4)
    handle = commit_kafka_offsets(
        spark, unique_name("g"), {"kafka.bootstrap.servers": "127.0.0.1:1",
                                  "kafka.bootstrap.timeout.ms": "500",
                                  "kafka.request.timeout.ms": "500"},
        query_name=unique_name("q"))
    try:
        query = (spark.readStream.format("kafka")
                 .option("kafka.bootstrap.servers", kafka.bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").queryName(handle._query_name)
                 .trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / "c")).start())
        query.awaitTermination(120)
        assert query.exception() is None
        wait_for(lambda: handle.stats()["commits_failed"] >= 1, 60, "failure counted")
    finally:
        spark.streams.removeListener(handle)
        handle.close(timeout_s=1)  # the commit cannot land: do not wait close's 30 s for it


class _Progress:
    """A progress event's fields the listener reads (a fake: no Spark in this unit test)."""

    def __init__(self, batch_id: int, offsets: str) -> None:
        self.progress = self
        self.id, self.name, self.batchId = "qid", "q", batch_id
        self.sources = [type("S", (), {"description": "KafkaV2[Subscribe[t]]",
                                       "endOffset": offsets})()]


class _FlakyCommitter:
    def __init__(self) -> None:
        self.calls: list[int] = []
        self.refused = False  # OffsetCommitter.refused: its failure is one a retry can heal

    def commit(self, completed_id: int, timestamp_ms: int, offsets) -> bool:
        self.calls.append(completed_id)
        if len(self.calls) == 1:
            raise RuntimeError("not a Kafka error")
        return True

    def close(self) -> None:
        pass


def test_unexpected_commit_error_is_counted_and_the_next_batch_commits() -> None:
    listener = KafkaOffsetCommits("g", {}, "q")
    committer = listener._committer = _FlakyCommitter()
    try:
        listener.onQueryProgress(_Progress(0, '{"t":{"0":3}}'))
        wait_for(lambda: listener.stats()["commits_failed"] == 1, 10, "failure counted")
        assert not listener.wait_for(0, 0.1)
        listener.onQueryProgress(_Progress(1, '{"t":{"0":5}}'))
        assert listener.wait_for(1, 10), "the worker thread died with the first error"
        assert committer.calls == [0, 1]  # batch ids, batch 0 included
    finally:
        listener.close()


@pytest.mark.kafka
def test_progress_event_comes_after_the_commit_log_entry(
        spark, kafka: KafkaTool, unique_name, tmp_path, monkeypatch) -> None:
    """What "commits only completed batches" rests on: Spark writes ``commits/<batch>``
    before it posts the batch's progress event (listeners are called in order, so this
    one sees what the commit listener sees). Also: the commit listener gets its events
    as JSON, not through PySpark's field-by-field py4j conversion (only the probe's
    events go through ``fromJObject``)."""
    from pyspark.sql.streaming import StreamingQueryListener
    from pyspark.sql.streaming.listener import QueryProgressEvent

    converted: list[int] = []
    from_jobject = QueryProgressEvent.fromJObject.__func__

    def counting(cls, jevent):
        converted.append(1)
        return from_jobject(cls, jevent)

    monkeypatch.setattr(QueryProgressEvent, "fromJObject", classmethod(counting))

    topic = kafka.create_topic(unique_name("t"))
    kafka.produce(topic, 6)
    ckpt = tmp_path / "c"
    seen: list[tuple[int, bool]] = []

    class CommitLogProbe(StreamingQueryListener):
        def onQueryStarted(self, event) -> None: ...
        def onQueryIdle(self, event) -> None: ...
        def onQueryTerminated(self, event) -> None: ...

        def onQueryProgress(self, event) -> None:
            batch = event.progress.batchId
            seen.append((batch, (ckpt / "commits" / str(batch)).exists()))

    probe = CommitLogProbe()
    name = unique_name("q")
    handle = commit_kafka_offsets(spark, unique_name("g"),
                                  {"kafka.bootstrap.servers": kafka.bootstrap}, query_name=name)
    spark.streams.addListener(probe)
    try:
        query = (spark.readStream.format("kafka")
                 .option("kafka.bootstrap.servers", kafka.bootstrap).option("subscribe", topic)
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "2")
                 .load().writeStream.format("noop").queryName(name).trigger(availableNow=True)
                 .option("checkpointLocation", str(ckpt)).start())
        assert query.awaitTermination(120)
        last = query.lastProgress["batchId"]
        assert handle.wait_for(last, 60)
        wait_for(lambda: len(seen) >= last + 1, 30, "every progress event delivered")
        assert last >= 2 and all(done for _, done in seen), seen
        assert handle.stats()["events"] == len(seen) == len(converted), \
            (handle.stats()["events"], len(seen), len(converted))
    finally:
        spark.streams.removeListener(probe)
        spark.streams.removeListener(handle)
        handle.close()


@pytest.mark.kafka
def test_secured_cluster_options_as_spark_takes_them_commit_over_sasl_ssl(
        spark, kafka: KafkaTool, unique_name, tmp_path, caplog) -> None:
    """The JVM source and the listener take the same Java security options (SCRAM JAAS
    line + JKS truststore): the group commit goes over the SASL_SSL listener, as reader."""
    import os
    from pathlib import Path

    from sparkbarrier.devstack import Devstack

    path = os.environ.get("SPARKBARRIER_KAFKA_SECURITY") or Devstack().up().env()["SPARKBARRIER_KAFKA_SECURITY"]
    m = json.loads(Path(path).read_text())
    secured = {"kafka.bootstrap.servers": m["sasl_ssl"], "kafka.security.protocol": "SASL_SSL",
               "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule "
                                          f'required username="reader" password="{m["users"]["reader"]}";'),
               "kafka.ssl.truststore.location": m["ca"]["jks"],
               "kafka.ssl.truststore.password": m["store_password"]}
    import uuid

    tag = uuid.uuid4().hex[:10]  # the reader's ACLs cover topics and groups named secure-*
    topic, group = kafka.create_topic(f"secure-jvm-{tag}"), f"secure-jvm-g-{tag}"
    kafka.produce(topic, 6)
    name = unique_name("q")
    handle = commit_kafka_offsets(spark, group, secured, query_name=name)
    try:
        df = (spark.readStream.format("kafka").options(**secured).option("kafka.group.id", f"secure-src-{tag}")
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
        query = (df.writeStream.format("noop").queryName(name).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / "c")).start())
        assert query.awaitTermination(120) and query.exception() is None
        wait_for(lambda: kafka.group_offsets(group) == {(topic, 0): 3, (topic, 1): 3}, 60, "secured commit")
        assert handle.stats()["commits_failed"] == 0
        assert m["users"]["reader"] not in repr(handle) and m["store_password"] not in caplog.text
    finally:
        spark.streams.removeListener(handle)
        handle.close()


@pytest.mark.kafka
@pytest.mark.timeout(240)
def test_an_unnamed_listener_commits_only_the_query_started_after_it_and_finish_skips_idle_progress(
        spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    """Two defects found on one broker: bound to whichever query posted progress first
    (the group got a running query's offsets), and ``finish`` waited for the batch an
    idle progress names (it never runs) and returned False after 60 s."""
    old_topic, new_topic = kafka.create_topic(unique_name("old")), kafka.create_topic(unique_name("new"))
    kafka.produce(old_topic, 6)
    kafka.produce(new_topic, 4)

    def start(topic: str, ckpt: str):
        return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest").load()
                .writeStream.format("noop").trigger(processingTime="500 milliseconds")
                .option("checkpointLocation", str(tmp_path / ckpt)).start())

    running = start(old_topic, "old")
    group = unique_name("g")
    handle = commit_kafka_offsets(spark, group, {"kafka.bootstrap.servers": kafka.bootstrap})
    try:
        wait_for(lambda: running.lastProgress and running.lastProgress["numInputRows"] > 0, 120,
                 "the query running before the call progresses")
        kafka.produce(old_topic, 6, start=100)  # more progress events of the old query
        query = start(new_topic, "new")
        wait_for(lambda: kafka.group_offsets(group) == {(new_topic, 0): 2, (new_topic, 1): 2},
                 120, "the new query's offsets in the group")
        last_ran = query.lastProgress["batchId"]
        # Spark reports an idle progress naming the next batch after ~10 s without data
        wait_for(lambda: query.lastProgress["batchId"] > last_ran, 60, "an idle progress")
        assert not (tmp_path / "new" / "commits" / str(query.lastProgress["batchId"])).exists()
        query.stop()
        asked = time.monotonic()
        assert handle.finish(query, 30) is True
        # It returns on the query's termination event, not when its timeout runs out (the
        # classic-PySpark wrapper used to drop that event: every finish() took its timeout).
        assert time.monotonic() - asked < 15, "finish() ran out its timeout: no termination event"
        assert set(kafka.group_offsets(group)) == {(new_topic, 0), (new_topic, 1)}
    finally:
        running.stop()
        spark.streams.removeListener(handle)
        handle.close()
