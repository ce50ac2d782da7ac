"""The pipeline on a real multi-process Spark cluster (``local-cluster[1,1,1024]``).

Executors there are separate JVMs with their own Python workers, so this catches what
``local[2]`` hides: everything shipped to executors must pickle, and the package must be
importable by the executors' Python (it is installed in this venv, ``PYSPARK_PYTHON``).
The cluster runs in a subprocess (its own SparkSession, never the shared ``spark``
fixture's) bounded by a timeout; run twice on one checkpoint to cover resume.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from sparkbarrier import checkpoint_log_status, group_status, sink_status
from sparkbarrier.connectors.hbase import DEFAULT_COMMIT_TABLE, read_committed
from sparkbarrier.connectors.hbase.sink._commit_table import read_history
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options

pytestmark = [pytest.mark.kafka, pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.timeout(600)]

SCRIPT = Path(__file__).with_name("cluster_pipeline.py")
MASTER = "local-cluster[1,1,1024]"


def _produce(bootstrap: str, topic: str, start: int, count: int) -> list[tuple[str, dict, int, int]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    futures = []
    for i in range(start, start + count):
        key = f"k{i % 37:02d}"
        value = {"id": key, "op": "delete" if i % 7 == 3 else "upsert", "v": i,
                 "city": ("oslo", "graz", "cork")[i % 3], "ts": 0}
        futures.append((key, value, producer.send(topic, key=key.encode(), value=json.dumps(value).encode())))
    producer.flush()
    out = []
    for key, value, fut in futures:
        meta = fut.get(timeout=30)
        out.append((key, value, meta.partition, meta.offset))
    producer.close()
    return out


def _expected(events: list[tuple[str, dict, int, int]]) -> dict[str, dict]:
    state: dict[str, dict] = {}
    for key, value, part, off in sorted(events, key=lambda e: (e[2], e[3])):
        if value["op"] == "delete":
            state.pop(key, None)
        else:
            state[key] = {"v": value["v"], "city": value["city"].upper(), "src_partition": part,
                          "src_offset": off}
    return state


def _run_cluster(args: list[str]) -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, str(SCRIPT), MASTER, *args], env=env, capture_output=True,
                          text=True, timeout=360)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"cluster run failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return json.loads(lines[-1])


def test_pipeline_on_local_cluster_is_exactly_once(kafka_bootstrap, hbase_thrift, servers,
                                                   unique_name: Callable[[str], str], tmp_path: Path) -> None:
    topic, group = unique_name("cl"), unique_name("clg")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}}, wait_for_metadata=True)
    admin.close()
    hbase = f"{hbase_thrift[0]}:{hbase_thrift[1]}"
    args = [kafka_bootstrap, hbase, topic, group, topic, str(tmp_path / "ckpt")]
    if servers.hbase_thrift2 is not None and servers.hbase_thrift2[0] == hbase_thrift[0]:
        args.append(str(servers.hbase_thrift2[1]))  # the table gets KEEP_DELETED_CELLS

    events = _produce(kafka_bootstrap, topic, 0, 2500)
    first = _run_cluster(args)
    assert first["master"] == MASTER and first["executors"] >= 2  # driver + 1 executor
    assert len(first["batches"]) >= 3  # maxOffsetsPerTrigger=1000
    events += _produce(kafka_bootstrap, topic, 2500, 700)
    second = _run_cluster(args)  # resumes from the checkpoint
    assert second["batches"] and min(second["batches"]) > max(first["batches"])

    table = read_committed(hbase_thrift[0], hbase_thrift[1], topic, sink_id=topic)
    actual = {row.pop("id"): row for row in table.to_pylist()}
    assert actual == _expected(events)

    last = checkpoint_log_status(str(tmp_path / "ckpt")).last_completed
    group_view = group_status(kafka_bootstrap, group, [topic])
    ends = {f"{topic}:{p}": max(e[3] for e in events if e[2] == p) + 1 for p in (0, 1)}
    assert last is not None and last.offsets == ends
    assert group_view.offsets() == ends and group_view.total_lag == 0
    assert group_view.last_checkpoint_id == last.checkpoint_id
    sink = sink_status(hbase_thrift[0], hbase_thrift[1], topic, DEFAULT_COMMIT_TABLE)
    assert sink.offsets == ends
    conn = HBaseConnection(connection_options(host=hbase_thrift[0], port=hbase_thrift[1]))
    try:
        history = read_history(conn, DEFAULT_COMMIT_TABLE, topic)
    finally:
        conn.close()
    assert history and history[-1].offsets == ends
    assert max(history[-1].source_checkpoints) == last.checkpoint_id
    assert [r.seq for r in history] == list(range(1, len(history) + 1))
