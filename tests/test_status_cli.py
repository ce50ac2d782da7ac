"""``python -m sparkbarrier status`` against the real Kafka and HBase servers.

The group offsets are committed by the source's own committer and the sink record is
written with the sink's commit-table helpers, so the CLI reads exactly what a pipeline
leaves behind -- without paying for a SparkSession.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hbase_clients import thrift1
from kafka import KafkaAdminClient, KafkaProducer

from sparkbarrier.__main__ import main
from sparkbarrier._endpoints import KAFKA_ENV
from sparkbarrier.connectors.hbase.sink._commit_table import (
    ATTEMPT_COLUMN,
    COMMIT_COLUMN,
    AttemptRecord,
    CommitRecord,
    ensure_commit_table,
    put_cell,
)
from sparkbarrier.connectors.kafka.commits._offset_committer import OffsetCommitter
from sparkbarrier.connectors.kafka._metrics import SourceMetrics
from sparkbarrier.connectors.kafka.client._positions import TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.hbase, pytest.mark.timeout(120)]

COMMIT_TABLE = "sparkbarrier_commits_status_test"


@pytest.fixture
def group_with_checkpoint(kafka_bootstrap: str, unique_name: Callable[[str], str]) -> tuple[str, str]:
    """A 2-partition topic with 10+5 records; the group holds checkpoint 3 at (7, 5)."""
    topic, group = unique_name("status"), unique_name("group")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}}, wait_for_metadata=True)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(15):
        producer.send(topic, value=b"%d" % i, partition=0 if i < 10 else 1)
    producer.flush()
    producer.close()
    committer = OffsetCommitter({"bootstrap_servers": kafka_bootstrap}, group, SourceMetrics())
    assert committer.commit(3, 1_700_000_000_123, {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 5})
    committer.close()
    return topic, group


@pytest.fixture
def committed_sink(hbase_thrift: tuple[str, int], unique_name: Callable[[str], str]) -> str:
    """A sink whose last commit is batch 4 (seq 100) with an attempt for batch 5 in flight."""
    sink_id = unique_name("sink")
    conn = thrift1(*hbase_thrift)
    try:
        ensure_commit_table(conn, COMMIT_TABLE)
        record = CommitRecord(sink_id=sink_id, table="orders_t", seq=100, query_id="q-1", batch_id=4,
                              ts_lo=1_700_000_000_400, ts_hi=1_700_000_000_417, read_bound=1_700_000_000_417,
                              offsets={"orders:0": 7, "orders:1": 5}, source_checkpoints=[2, 3],
                              committed_at_ms=1_700_000_000_456)
        put_cell(conn, COMMIT_TABLE, sink_id, COMMIT_COLUMN, record.to_bytes())
        # In flight: a different (query, batch) building on the last commit (prev_seq == seq).
        attempt = AttemptRecord(query_id="q-1", batch_id=5, base_ms=1_700_000_000_500, prev_seq=100)
        put_cell(conn, COMMIT_TABLE, sink_id, ATTEMPT_COLUMN, attempt.to_bytes())
    finally:
        conn.close()
    return sink_id


def _write(hbase: tuple[str, int], sink_id: str, commit: CommitRecord, attempt: AttemptRecord) -> None:
    conn = thrift1(*hbase)
    try:
        ensure_commit_table(conn, COMMIT_TABLE)
        put_cell(conn, COMMIT_TABLE, sink_id, COMMIT_COLUMN, commit.to_bytes())
        put_cell(conn, COMMIT_TABLE, sink_id, ATTEMPT_COLUMN, attempt.to_bytes())
    finally:
        conn.close()


def _endpoint_args(kafka: str, hbase: tuple[str, int]) -> list[str]:
    return ["--bootstrap", kafka, "--hbase", f"{hbase[0]}:{hbase[1]}", "--commit-table", COMMIT_TABLE]


def _spark_checkpoint(root: Path, topic: str) -> Path:
    """Spark's checkpoint layout: batches 0 and 1 planned, only batch 0 in the commit log."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch, (ckpt, offs) in enumerate([(1, (4, 2)), (2, (9, 5))]):
        source = {"version": 1, "checkpointId": ckpt, "timestampMs": 1_700_000_000_000 + batch,
                  "offsets": {topic: {"0": offs[0], "1": offs[1]}}}
        (root / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})
            + "\n" + json.dumps(source))
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_status_json_shape(kafka_bootstrap, hbase_thrift, group_with_checkpoint, committed_sink,
                           tmp_path: Path, capsys) -> None:
    topic, group = group_with_checkpoint
    ckpt = _spark_checkpoint(tmp_path / "ckpt", topic)
    code = main(["status", "--group", group, "--topic", topic, "--sink-id", committed_sink,
                 "--checkpoint-location", str(ckpt), "--json", *_endpoint_args(kafka_bootstrap, hbase_thrift)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"group", "sink", "checkpoint_log", "group_behind_checkpoint"}
    assert out["group_behind_checkpoint"] is None  # the group holds checkpoint 3, Spark 1
    g = out["group"]
    assert g["group"] == group and g["last_checkpoint_id"] == 3 and g["total_lag"] == 3 + 0
    assert g["last_batch_id"] is None  # a barrier-kafka group holds checkpoint ids only
    assert [(p["partition"], p["committed"], p["end"], p["lag"], p["checkpoint_id"], p["batch_id"])
            for p in g["partitions"]] == [(0, 7, 10, 3, 3, None), (1, 5, 5, 0, 3, None)]
    assert g["partitions"][0]["checkpoint_timestamp_ms"] == 1_700_000_000_123
    s = out["sink"]
    assert (s["sink_id"], s["table"], s["seq"], s["batch_id"], s["committed_at_ms"]) == (
        committed_sink, "orders_t", 100, 4, 1_700_000_000_456)
    assert s["offsets"] == {"orders:0": 7, "orders:1": 5} and s["checkpoint_ids"] == [2, 3]
    assert (s["attempt_batch_id"], s["attempt_seq"]) == (5, 101)
    log = out["checkpoint_log"]
    assert log["last_completed"] == {"batch_id": 0, "checkpoint_id": 1,
                                     "offsets": {f"{topic}:0": 4, f"{topic}:1": 2}}
    assert [(b["batch_id"], b["checkpoint_id"]) for b in log["pending"]] == [(1, 2)]


def test_status_table_shows_lag_commit_and_pending_not_available(
        kafka_bootstrap, hbase_thrift, group_with_checkpoint, committed_sink, capsys) -> None:
    topic, group = group_with_checkpoint
    assert main(["status", "--group", group, "--sink-id", committed_sink,
                 *_endpoint_args(kafka_bootstrap, hbase_thrift)]) == 0
    text = capsys.readouterr().out
    assert f"consumer group {group}: last completed checkpoint 3, total lag 3" in text
    assert any(line.split()[5:7] == ["checkpoint", "3"] for line in text.splitlines() if line.startswith(topic))
    assert f"sink {committed_sink} -> table orders_t" in text and "Spark batch 4" in text
    assert "in flight: batch 5" in text
    assert "pending checkpoints: not available" in text
    assert any(line.split()[:5] == [topic, "0", "7", "10", "3"] for line in text.splitlines())



def test_status_names_spark_kafkas_batch_id_as_a_batch(kafka_bootstrap, unique_name, capsys) -> None:
    """A group commit_kafka_offsets filled holds Spark's batch id: shown as "batch N", never a checkpoint."""
    topic, group = unique_name("spark"), unique_name("group")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    admin.close()
    committer = OffsetCommitter({"bootstrap_servers": kafka_bootstrap}, group, SourceMetrics(),
                                query_id="q", source="spark-kafka")
    assert committer.commit(4, 1_700_000_000_123, {TopicPartition(topic, 0): 0})
    committer.close()
    assert main(["status", "--group", group, "--topic", topic, "--bootstrap", kafka_bootstrap, "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["group"]
    assert (g["last_batch_id"], g["last_checkpoint_id"]) == (4, None)
    assert [(p["batch_id"], p["checkpoint_id"]) for p in g["partitions"]] == [(4, None)]
    assert main(["status", "--group", group, "--topic", topic, "--bootstrap", kafka_bootstrap]) == 0
    text = capsys.readouterr().out
    assert f"consumer group {group}: last completed batch 4, total lag 0" in text
    assert any(line.split()[5:7] == ["batch", "4"] for line in text.splitlines() if line.startswith(topic))
    assert "checkpoint 4" not in text

def test_unknown_group_is_a_clear_error(kafka_bootstrap, hbase_thrift, unique_name) -> None:
    env = dict(os.environ, **{KAFKA_ENV: kafka_bootstrap})
    group = unique_name("nobody")
    done = subprocess.run([sys.executable, "-m", "sparkbarrier", "status", "--group", group],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"consumer group '{group}' has no committed offsets" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_sink_is_a_clear_error(kafka_bootstrap, hbase_thrift, committed_sink, capsys) -> None:
    code = main(["status", "--sink-id", "no-such-sink", *_endpoint_args(kafka_bootstrap, hbase_thrift)])
    assert code == 1
    assert "sink 'no-such-sink' has no commit in 'sparkbarrier_commits_status_test'" in capsys.readouterr().err


def test_missing_endpoint_is_a_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.delenv(KAFKA_ENV, raising=False)
    assert main(["status", "--group", "g"]) == 2
    assert KAFKA_ENV in capsys.readouterr().err


def _record(sink_id: str, seq: int, batch_id: int) -> CommitRecord:
    return CommitRecord(sink_id=sink_id, table="orders_t", seq=seq, query_id="q-1", batch_id=batch_id,
                        ts_lo=1_700_000_000_000, ts_hi=1_700_000_000_009, read_bound=1_700_000_000_009,
                        offsets={"orders:0": 1}, source_checkpoints=[1], committed_at_ms=1_700_000_000_010)


@pytest.mark.parametrize("attempt, in_flight", [
    (AttemptRecord("q-1", 5, 1_700_000_000_020, prev_seq=3), True),    # next batch on top of seq 3
    (AttemptRecord("q-2", 4, 1_700_000_000_020, prev_seq=3), True),    # another query took over
    (AttemptRecord("q-1", 4, 1_700_000_000_000, prev_seq=2), False),   # the committed batch's own
    (AttemptRecord("q-1", 4, 1_700_000_000_000, prev_seq=3), False),   # same (query, batch) as the commit
    (AttemptRecord("q-1", 3, 1_700_000_000_000, prev_seq=1), False),   # an older, stale attempt
], ids=["next-batch", "other-query", "committed", "same-batch", "stale"])
def test_in_flight_attempt_rule(hbase_thrift, unique_name, attempt: AttemptRecord, in_flight: bool) -> None:
    from sparkbarrier import sink_status

    sink_id = unique_name("sink")
    _write(hbase_thrift, sink_id, _record(sink_id, 3, 4), attempt)
    status = sink_status(*hbase_thrift, sink_id, COMMIT_TABLE)
    assert status.seq == 3 and status.checkpoint_ids == [1]
    if in_flight:
        assert (status.attempt_batch_id, status.attempt_seq) == (attempt.batch_id, 4)
    else:
        assert (status.attempt_batch_id, status.attempt_seq) == (None, None)


def test_cli_help_imports_neither_pyspark_nor_the_clients() -> None:
    """``--help`` answers at once: the connectors load only when a command runs."""
    import subprocess
    import sys

    code = ("import sys\nfrom sparkbarrier.__main__ import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nprint(sorted(m for m in ('pyspark', 'kafka', 'happybase')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
