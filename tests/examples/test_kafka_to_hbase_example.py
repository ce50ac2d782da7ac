"""The README's Kafka → HBase example (examples/kafka_to_hbase.py), run as users run it.

A subprocess with its own SparkSession against the devstack (or the servers the endpoint
variables name): keyed JSON upserts and deletes in a fresh topic; the committed view it
prints and the one read back equal the events applied in Kafka order. Once with
``barrier-kafka`` (endpoints as arguments) and once with Spark's own source plus
``commit_kafka_offsets`` (endpoints from the SPARKBARRIER_* variables, its jars through
PYSPARK_SUBMIT_ARGS as for any ``python app.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkbarrier._endpoints import HBASE_ENV, HBASE_THRIFT2_ENV, KAFKA_ENV

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase,
              pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kafka_to_hbase.py"
# Keys spread over both partitions; per key the order is Kafka's (one partition per key).
EVENTS = [
    {"id": "a", "amount": 10, "op": "upsert"},
    {"id": "b", "amount": 20, "op": "upsert"},
    {"id": "a", "amount": 11, "op": "upsert"},
    {"id": "c", "amount": 30},                      # no op: an upsert
    {"id": "b", "amount": None, "op": "delete"},
    {"id": "d", "amount": 40, "op": "upsert"},
    {"id": "c", "amount": 31, "op": None},
    {"id": "d", "amount": None, "op": "delete"},
    {"id": "d", "amount": 41, "op": "upsert"},
    {"id": "e", "amount": 50, "op": "upsert"},
    {"id": "e", "amount": None, "op": "delete"},
]


def _example_code() -> str:
    """The code between the file's two ``# README`` lines."""
    return EXAMPLE.read_text().split("# README\n")[1]


def _applied(events: list[dict]) -> dict[str, int]:
    state: dict[str, int] = {}
    for e in events:
        if e.get("op") == "delete":
            state.pop(e["id"], None)
        else:
            state[e["id"]] = e["amount"]
    return state


def _produce(bootstrap: str, topic: str, events: list[dict]) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for e in events:  # keyed: every event of a key lands in one partition, in order
            producer.send(topic, key=e["id"].encode(), value=json.dumps(e).encode())
        producer.flush(timeout=30)
    finally:
        producer.close()


def _shown(stdout: str) -> dict[str, int]:
    """The rows of ``DataFrame.show()``'s table: ``|id |amount|``."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in stdout.splitlines() if line.startswith("|")]
    assert rows and rows[0] == ["id", "amount"], stdout
    return {key: int(amount) for key, amount in rows[1:]}


def test_readme_shows_the_example_excerpt_verbatim() -> None:
    assert f"```python\n{_example_code()}```\n" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("source", ["barrier-kafka", "kafka"])
def test_example_writes_the_events_applied_in_kafka_order_and_prints_the_committed_view(
        source: str, kafka_bootstrap: str, hbase_thrift: tuple[str, int], hbase_thrift2: tuple[str, int],
        unique_name: Callable[[str], str], tmp_path: Path) -> None:
    from sparkbarrier.connectors.hbase import read_committed

    name = unique_name(source)
    _produce(kafka_bootstrap, name, EVENTS)
    args = [sys.executable, str(EXAMPLE), "--topic", name, "--table", name,
            "--checkpoint", str(tmp_path / "checkpoint"), "--source", source]
    # A fresh user's shell (issue 59): the venv's Python run by its path, the venv not on
    # PATH, no PYSPARK_PYTHON (the suite's conftest sets one).
    venv_bin = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env.update(PATH=path, SPARK_LOCAL_IP="127.0.0.1")
    if source == "barrier-kafka":
        args += ["--bootstrap", kafka_bootstrap, "--hbase", "%s:%d" % hbase_thrift,
                 "--hbase-thrift2", "%s:%d" % hbase_thrift2]
    else:
        from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars

        # Spark's own source needs its jars: the README and the example say so.
        env.update({KAFKA_ENV: kafka_bootstrap, HBASE_ENV: "%s:%d" % hbase_thrift,
                    HBASE_THRIFT2_ENV: "%s:%d" % hbase_thrift2,
                    "PYSPARK_SUBMIT_ARGS": f"--jars {jvm_kafka_jars()} pyspark-shell"})
    run = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=360)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]

    expected = _applied(EVENTS)
    assert expected == {"a": 11, "c": 31, "d": 41}
    assert _shown(run.stdout) == expected
    view = read_committed(*hbase_thrift, name, sink_id=f"{name}-sink")
    assert view.column_names == ["id", "amount"]
    assert dict(zip(view.column("id").to_pylist(), view.column("amount").to_pylist(), strict=True)) == expected
