"""Fault injection behind Spark's own ``format("kafka")``: barrier-hbase stays exactly once.

The same kill → restart harness as test_faults.py (``fault_kit``), with the pipeline
reading through the JVM source (``PipelineConfig.source = "kafka"``): no barrier markers,
so the sink learns each batch's Kafka offsets from Spark's offset log, and group commits
come from ``commit_kafka_offsets``. Each case crashes the driver at a sink commit point
(or at the listener's commit), checks that the group is not ahead of the sink's commit
record and the committed view holds exactly the committed records, restarts on the same
checkpoint and checks the plain scan, the committed view, one version per batch and the
group == end offsets (``Scenario.check_complete``). A write task failing mid-write is
retried by Spark and still applied once; a fresh query on a new checkpoint resumes from
the sink's commit record (``starting_offsets_from_sink``).

A replay after a driver restart may run a Kafka partition under another Spark task id
(the JVM source plans offset ranges in no fixed order): the replay writes in a new
attempt above the abandoned one (``connectors/hbase/sink/_attempts.py``), so every version
is checked here as with barrier-kafka, with ``minPartitions`` splits too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fault_kit import PipelineConfig, Scenario


pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase]

N_RECORDS = 300
SEQUENCE_RECORDS = 360  # the kill-point sequence: 12 batches of 30


def _scenario(tmp_path: Path, unique_name, bootstrap: str, thrift: tuple[str, int],
              thrift2: tuple[str, int], **cfg: object) -> Scenario:
    name = unique_name("jvmfault")
    config = PipelineConfig(bootstrap=bootstrap, thrift=tuple(thrift), thrift2=tuple(thrift2),
                            topic=name, group=f"{name}_group", table=name,
                            sink_id=f"{name}_sink", checkpoint=str(tmp_path / "checkpoint"),
                            source="kafka", **cfg)  # type: ignore[arg-type]
    return Scenario(config, tmp_path)


# Hit numbers put each crash mid-stream, after at least one more committed batch: each
# point fires once per hit (per run; one owner, the checkpointed-sink adapter); two write
# tasks per batch pass sink.before_flush once each (hit 3 is the run's second batch's
# first), the driver each other sink.* point once per batch, the listener commits once
# per batch. One crash sequence on one checkpoint (30 offsets per batch: room for all).
KILL_POINTS = [
    "sink.before_flush@3",
    "sink.after_flush_before_commit@2",
    "sink.after_commit_before_commitlog@2",
    "listener.before_group_commit@2",
]


@pytest.mark.timeout(300)
def test_jvm_source_driver_killed_at_every_fault_point_in_turn_resumes_exactly_once(
        tmp_path: Path, unique_name, kafka_bootstrap: str,
        hbase_thrift: tuple[str, int], hbase_thrift2: tuple[str, int]) -> None:
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2, max_offsets=30)
    sc.fill_topic(SEQUENCE_RECORDS)
    sc.crash_sequence(KILL_POINTS, timeout=180)
    sc.check_complete()


@pytest.mark.timeout(240)
def test_jvm_source_min_partitions_driver_killed_mid_write_resumes_exactly_once(
        tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    """minPartitions=6 on 2 Kafka partitions: a key in two splits of one batch ends with the later
    split's value. The driver dies in the second batch after some of its splits wrote (six
    tasks per batch pass sink.before_flush once each: hit 9 is the second batch's third);
    the replay runs the splits under other task ids, and every value and version is
    checked against Kafka order (the case issue 31 measured with a stale value)."""
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2, min_partitions=6)
    sc.fill_topic(N_RECORDS, keys=12)
    sc.crash_then_resume("sink.before_flush@9", timeout=180, mid_stream=True)
    sc.check_complete(one_task_per_key=False)


@pytest.mark.timeout(200)
def test_jvm_source_write_task_failing_mid_write_is_retried_exactly_once(
        tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2,
                   master="local[2,2]")
    sc.fill_topic(N_RECORDS)
    result = sc.run("hbase.after_partial_flush@2", timeout=180)  # FlushError once; retried
    assert result.fired and result.returncode == 0, result.log[-3000:]
    assert "FlushError" in result.log
    sc.check_complete()


@pytest.mark.timeout(240)
def test_jvm_source_fresh_query_resumes_from_sink_commit_after_checkpoint_loss(
        tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    """starting_offsets_from_sink is Spark's startingOffsets JSON: the JVM source takes it."""
    sc = _scenario(tmp_path, unique_name, kafka_bootstrap, hbase_thrift, hbase_thrift2)
    sc.fill_topic(N_RECORDS)
    sc.resume_from_sink_after_checkpoint_loss("sink.after_commit_before_commitlog@2", hbase_thrift,
                                              timeout=180)
    sc.check_complete()
