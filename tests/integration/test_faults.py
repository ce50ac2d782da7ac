"""Fault injection: kill the driver at each protocol step, restart, prove exactly-once.

Every case runs barrier-kafka → parse → barrier-hbase (exactly-once, explicit
``sink.id`` and ``kafka.group.id``) as a separate process over a topic of keyed
upserts and deletes, crashes it at a fault point (``sparkbarrier._faults``), checks
that the group offsets are not ahead of the sink's commit record and the committed view
holds exactly the committed records, restarts on the same checkpoint and checks: a plain
HBase scan and the committed view == last record per key (only ``d:v`` cells); the
visible versions == one per committed batch, inside that batch's timestamp range (no
record applied twice); timestamps near the wall clock; group offsets == end offsets.
The sink gets the Thrift2 port (``hbase.thrift2.port``), so it creates its table with
``KEEP_DELETED_CELLS=TRUE``.

Also: a write task failing mid-write (retried by Spark), a fresh query resuming from
the sink's commit record after the checkpoint is lost, and the Kafka broker and the
HBase Thrift server restarted mid-stream (on a private devstack: the shared one is
never restarted). Observed: the query rides through the broker restart; the Thrift
restart fails it with a ``SinkError`` ("cannot reach the HBase Thrift server"), and
the restarted query completes exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fault_kit import PipelineConfig, Scenario, wait_for
from server_restart import restart_server

from sparkbarrier.connectors import starting_offsets_from_sink

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase]

N_RECORDS = 360


def _scenario(tmp_path: Path, unique_name, bootstrap: str, thrift: tuple[str, int],
              thrift2: tuple[str, int] | None, **cfg: object) -> Scenario:
    name = unique_name("fault")
    config = PipelineConfig(bootstrap=bootstrap, thrift=tuple(thrift),
                            thrift2=tuple(thrift2) if thrift2 else None, topic=name,
                            group=f"{name}_group", table=name, sink_id=f"{name}_sink",
                            checkpoint=str(tmp_path / "checkpoint"), **cfg)  # type: ignore[arg-type]
    return Scenario(config, tmp_path)


# Hit numbers put each crash mid-stream, after at least one more committed batch: each
# point fires once per hit (per run), in the checkpointed-sink adapter; two write tasks per
# batch (one snapshot each), one sink commit per batch. 30 offsets per batch: 12 batches,
# room for every point in one crash sequence.
KILL_POINTS = [
    "sink.before_flush@3",
    "sink.after_flush_before_commit@2",
    "sink.after_commit_before_commitlog@2",
    "source.after_commitlog_before_kafka_commit@2",
]


# Alone it takes ~135 s; in the suite's two-worker run, beside another Spark group on two
# cores, 280 s (2026-11-28): a bound with room for that, not a timing.
@pytest.mark.timeout(480)
def test_driver_killed_at_every_fault_point_in_turn_resumes_exactly_once(
        tmp_path: Path, unique_name, kafka_bootstrap: str,
        hbase_thrift: tuple[str, int], hbase_thrift2: tuple[str, int]) -> None:
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2, max_offsets=30)
    sc.fill_topic(N_RECORDS)
    sc.crash_sequence(KILL_POINTS)
    sc.check_complete()


@pytest.mark.timeout(150)
def test_write_task_failing_mid_write_is_retried_exactly_once(
        tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2,
                   master="local[2,2]")
    sc.fill_topic(N_RECORDS)
    result = sc.run("hbase.after_partial_flush@2")  # raises FlushError once; Spark retries
    assert result.fired and result.returncode == 0, result.log[-3000:]
    assert "FlushError" in result.log
    sc.check_complete()


@pytest.mark.timeout(200)
def test_fresh_query_resumes_from_sink_commit_after_checkpoint_loss(
        tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2)
    sc.fill_topic(N_RECORDS)
    sc.resume_from_sink_after_checkpoint_loss("sink.after_commit_before_commitlog@2", hbase_thrift)
    sc.check_complete()


def test_resume_without_a_commit_is_a_clear_error(hbase_thrift: tuple[str, int], unique_name) -> None:
    from sparkbarrier import SinkError

    with pytest.raises(SinkError, match="committed nothing"):
        starting_offsets_from_sink(*hbase_thrift, unique_name("never_written"))


def _advanced(sc: Scenario, first: object, batches: int) -> bool:
    record = sc.commit_record()
    return record is not None and (record.offsets == sc.end_offsets()
                                   or record.batch_id >= getattr(first, "batch_id", -1) + batches)


@pytest.mark.timeout(420)
def test_broker_and_thrift_restarts_mid_stream_keep_exactly_once(
        tmp_path: Path, unique_name, private_stack) -> None:
    home, endpoints = private_stack
    sc = _scenario(tmp_path, unique_name, endpoints.kafka_bootstrap, endpoints.hbase_thrift,
                   endpoints.hbase_thrift2, max_offsets=15)
    sc.fill_topic(N_RECORDS)

    def restarts(alive: Callable[[], bool]) -> None:
        # Both servers are restarted whatever happens; the waits end early if the
        # query died (it then resumes below).
        first = wait_for(lambda: sc.commit_record() or not alive(), 120, "a first sink commit")
        restart_server(home, "kafka")
        wait_for(lambda: not alive() or _advanced(sc, first, 2), 120, "commits after the broker restart")
        restart_server(home, "hbase-thrift")

    first_run = sc.run(during=restarts, timeout=300)
    sc.check_group_not_ahead_of_sink()
    if first_run.returncode != 0:  # failed with an error rather than riding through: resume
        assert any(e in first_run.log for e in ("SinkError", "SourceError")), first_run.log[-3000:]
        assert sc.run(timeout=150).returncode == 0
    sc.check_complete()


@pytest.mark.timeout(300)
def test_broker_restart_while_reading_over_sasl_ssl_keeps_exactly_once(
        tmp_path: Path, private_stack, spark) -> None:
    """barrier-kafka over SASL_SSL (SCRAM-SHA-512, JKS truststore, as Spark users write
    it) rides through a broker restart, or fails and resumes: every record exactly once."""
    import json
    import threading
    import uuid

    from kafka import KafkaAdminClient, KafkaProducer

    from sparkbarrier.connectors.kafka import register

    home, endpoints = private_stack
    m = json.loads(Path(endpoints.kafka_security).read_text())
    topic, group = f"secure-restart-{uuid.uuid4().hex[:8]}", f"secure-g-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=endpoints.kafka_bootstrap)
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}},
                        wait_for_metadata=True)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap)
    for i in range(N_RECORDS):
        producer.send(topic, value=b"%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    register(spark)
    options = {"kafka.bootstrap.servers": m["sasl_ssl"], "kafka.security.protocol": "SASL_SSL",
               "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram."
               f'ScramLoginModule required username="reader" password="{m["users"]["reader"]}";',
               "kafka.ssl.truststore.location": m["ca"]["jks"],
               "kafka.ssl.truststore.password": m["store_password"],
               "subscribe": topic, "kafka.group.id": group, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": "20"}
    seen: list[bytes] = []
    lock = threading.Lock()

    def collect(batch, batch_id: int) -> None:  # noqa: ANN001
        rows = [bytes(r.value) for r in batch.select("value").collect()]
        with lock:
            seen.extend(rows)

    def run() -> object:
        reader = spark.readStream.format("barrier-kafka")
        for k, v in options.items():
            reader = reader.option(k, v)
        return (reader.load().writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(processingTime="200 milliseconds").start())

    query = run()
    try:
        wait_for(lambda: len(seen) >= 40 or not query.isActive, 120, "first batches over SASL_SSL")
        restart_server(home, "kafka")
        wait_for(lambda: len(seen) >= N_RECORDS or not query.isActive, 150,
                 "every record after the broker restart")
    finally:
        query.stop()
    if len(seen) < N_RECORDS:  # failed rather than riding through: resume on the checkpoint
        query = run()
        try:
            wait_for(lambda: len(seen) >= N_RECORDS, 120, "the rest after resuming")
        finally:
            query.stop()
    assert sorted(seen, key=int) == [b"%d" % i for i in range(N_RECORDS)]
