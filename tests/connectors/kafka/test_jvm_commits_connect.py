"""commit_kafka_offsets on Spark Connect: the same guarantees as on classic PySpark.

A Spark Connect server (``SparkConnectServer`` through ``spark-submit``, the JVM Kafka jars
on its classpath) is started once for this module in its own process, so it never meets
the suite's classic session; the client session is built with the Connect builder itself
(not ``SparkSession.builder.remote``), which would mark the whole test process as
Connect-only through ``SPARK_CONNECT_MODE_ENABLED``.

On PySpark 4.x the Connect client runs Python listeners in the *client* process: the
server streams the query events to it (``StreamingQueryListenerBus``). The handle's
counters and ``wait_for`` therefore work as on classic PySpark, which these tests check.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_testkit import KafkaTool, wait_for

from sparkbarrier import commit_kafka_offsets
from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

_SERVER_START_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark Connect client session on a local server started for this module (bounded)."""
    if importlib.util.find_spec("grpc") is None:
        pytest.fail("grpcio not installed (the test extra installs pyspark[connect]: ./dev)")
    import pyspark
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    home = Path(pyspark.__file__).parent
    port = _free_port()
    work = tmp_path_factory.mktemp("connect_server")
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [str(home / "bin" / "spark-submit"),
           "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
           "--master", "local[2]", "--jars", jvm_kafka_jars(),
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=1g",
           "--conf", "spark.sql.shuffle.partitions=2",
           "--conf", f"spark.sql.warehouse.dir={work / 'warehouse'}"]
    log = open(work / "server.log", "wb")  # noqa: SIM115 - closed in teardown
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work)
    session = None
    try:
        deadline = time.monotonic() + _SERVER_START_S
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                tail = (work / "server.log").read_bytes()[-3000:].decode(errors="replace")
                pytest.fail(f"Spark Connect server did not start on {port}:\n{tail}")
            time.sleep(0.5)
        session = ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").create()
        assert type(session).__module__.startswith("pyspark.sql.connect")
        yield session
    finally:
        if session is not None:
            for query in session.streams.active:
                query.stop()
            session.stop()
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
        log.close()


def _start(spark, kafka: KafkaTool, topics: list[str], group: str, name: str, ckpt: Path):
    opts = {"kafka.bootstrap.servers": kafka.bootstrap}
    handle = commit_kafka_offsets(spark, group, opts, query_name=name)
    query = (spark.readStream.format("kafka").options(**opts)
             .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest")
             .load().writeStream.format("noop").queryName(name).trigger(availableNow=True)
             .option("checkpointLocation", str(ckpt)).start())
    return handle, query


def test_connect_queries_commit_completed_batches_to_own_groups(
        connect_spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    spark = connect_spark
    a, b = kafka.create_topic(unique_name("a")), kafka.create_topic(unique_name("b"))
    kafka.produce(a, 10)
    kafka.produce(b, 4)
    g1, g2 = unique_name("g1"), unique_name("g2")
    h1, q1 = _start(spark, kafka, [a, b], g1, unique_name("q1"), tmp_path / "c1")
    h2, q2 = _start(spark, kafka, [b], g2, unique_name("q2"), tmp_path / "c2")
    try:
        assert q1.awaitTermination(120) and q2.awaitTermination(120)
        last1, last2 = q1.lastProgress["batchId"], q2.lastProgress["batchId"]
        # The listener runs in this (client) process: its handle sees the commits.
        assert h1.wait_for(last1, 60) and h2.wait_for(last2, 60)
        assert kafka.group_offsets(g1) == {(a, 0): 5, (a, 1): 5, (b, 0): 2, (b, 1): 2}
        assert kafka.group_offsets(g2) == {(b, 0): 2, (b, 1): 2}
        for group, query, last in ((g1, q1, last1), (g2, q2, last2)):
            meta = json.loads(kafka.group_metadata(group)[(b, 0)])
            assert meta["v"] == 2 and meta["src"] == "spark-kafka"
            assert meta["queryId"] == str(query.id) and meta["batchId"] == last
        # The group follows completed batches: a second run commits the new end offsets.
        kafka.produce(a, 4, start=100)
        h1b, q1b = _start(spark, kafka, [a, b], g1, q1.name, tmp_path / "c1")
        try:
            assert q1b.awaitTermination(120)
            last = q1b.lastProgress["batchId"]
            assert last > last1 and h1b.wait_for(last, 60)
            assert kafka.group_offsets(g1) == {(a, 0): 7, (a, 1): 7, (b, 0): 2, (b, 1): 2}
            assert json.loads(kafka.group_metadata(g1)[(a, 0)])["batchId"] == last
            stats = h1b.stats()
            assert stats["commits_failed"] == 0 and stats["events"] >= 1
        finally:
            spark.streams.removeListener(h1b)
            h1b.close()
    finally:
        for h in (h1, h2):
            spark.streams.removeListener(h)
            h.close()


def test_connect_commit_failure_is_counted_not_failing_the_query(
        connect_spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    spark = connect_spark
    topic = kafka.create_topic(unique_name("t"))
    kafka.produce(topic, 4)
    name = unique_name("q")
    handle = commit_kafka_offsets(
        spark, unique_name("g"), {"kafka.bootstrap.servers": "127.0.0.1:1",
                                  "kafka.bootstrap.timeout.ms": "500",
                                  "kafka.request.timeout.ms": "500"}, query_name=name)
    try:
        query = (spark.readStream.format("kafka")
                 .option("kafka.bootstrap.servers", kafka.bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").queryName(name).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / "c")).start())
        assert query.awaitTermination(120)
        assert query.exception() is None
        wait_for(lambda: handle.stats()["commits_failed"] >= 1, 60, "failure counted")
    finally:
        spark.streams.removeListener(handle)
        handle.close(timeout_s=1)  # the commit cannot land: do not wait close's 30 s for it
