"""The PostgreSQL two-phase-commit example under the kill-and-restart fault harness.

The sink only appends (no key, no upsert), so a record applied twice shows up as a
duplicate row: exactly-once has to come from the protocol, not from idempotent writes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV, fired

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

PIPELINE = Path(__file__).with_name("pg_pipeline.py")
PARTITIONS = 2


def _fill(bootstrap: str, topic: str, n: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(n):
        producer.send(topic, value=f"r{i}".encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def _run(cfg: dict, workdir: Path, fault: str | None, timeout: float = 240) -> tuple[int, bool]:
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, FAULT_STATE_DIR_ENV)}
    state = workdir / "faults"
    if fault:
        env[FAULT_ENV], env[FAULT_STATE_DIR_ENV] = fault, str(state)
    log = workdir / f"run-{time.monotonic_ns()}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(PIPELINE), json.dumps(cfg)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"pipeline ran over {timeout}s: {log.read_text()[-3000:]}") from None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if code and not fault:
        raise AssertionError(f"pipeline failed: {log.read_text()[-3000:]}")
    return code, bool(fault) and fired(fault.split("@")[0], state)


def _rows(dsn: str, table: str) -> list[tuple[int, int, str]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(f'SELECT "partition", "offset", "value" FROM "{table}" '
                            'ORDER BY 1, 2').fetchall()


def _prepared(dsn: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts")]


# Behind barrier-kafka every point of the two-phase commit; behind Spark's own
# format("kafka") (no barrier markers: the adapter takes each batch's offsets from
# Spark's offset log) its driver-side points. Each source's points run as one crash
# sequence on one checkpoint, then one run to the end (a driver start costs ~25 s here):
# 30 offsets per batch leave room for every point, each after one more committed batch.
# A run without a fault stands alone.
SEQUENCES = {
    "barrier-kafka-none": ("barrier-kafka", ()),
    "barrier-kafka-every-point": ("barrier-kafka", (
        "sink.before_flush", "sink.after_flush_before_commit@2",
        "checkpointed.after_store_commit_before_ledger@2", "sink.after_commit_before_commitlog@2")),
    "kafka-every-driver-point": ("kafka", (
        "sink.after_flush_before_commit@2", "checkpointed.after_store_commit_before_ledger@2",
        "sink.after_commit_before_commitlog@2")),
}


@pytest.mark.timeout(420)
@pytest.mark.parametrize("case", list(SEQUENCES))
def test_every_record_lands_once_after_a_kill_at_any_point(
        case: str, kafka_bootstrap: str, postgres_dsn: str,
        unique_name: Callable[[str], str], tmp_path: Path) -> None:
    source, faults = SEQUENCES[case]
    n = 300
    topic = unique_name("pg")
    _fill(kafka_bootstrap, topic, n)
    cfg = {"master": "local[2]", "bootstrap": kafka_bootstrap, "topic": topic, "group": topic,
           "dsn": postgres_dsn, "table": topic, "sink_id": topic, "checkpoint": str(tmp_path / "ckpt"),
           "max_offsets": 30 if faults else 60, "source": source}
    expected = sorted((i % PARTITIONS, i // PARTITIONS, f"r{i}") for i in range(n))
    for fault in faults:
        code, did_fire = _run(cfg, tmp_path, fault)
        assert did_fire and code != 0, f"{fault} did not kill the driver"
        rows = _rows(postgres_dsn, topic)
        assert len(set(rows)) == len(rows) and set(rows) <= set(expected), f"duplicates after {fault}"
        assert len(rows) < n, f"{fault} came after the last batch"
    _run(cfg, tmp_path, None)  # to the end, on the same checkpoint
    rows = _rows(postgres_dsn, topic)
    assert rows == expected, f"{len(rows)} rows for {n} records (duplicates or losses)"
    assert not [g for g in _prepared(postgres_dsn) if f":{topic}:" in g], "prepared transactions left"
