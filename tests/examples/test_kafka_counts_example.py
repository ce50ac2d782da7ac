"""The update-mode example the README and the manual link (examples/kafka_counts_to_hbase.py), run as users run it.

A subprocess with its own SparkSession against the devstack: keyed records in a fresh
topic; the committed view equals the records counted per key, once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase,
              pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kafka_counts_to_hbase.py"
KEYS = ["ada", "bob", "ada", "cy", "ada", "bob"]


def test_readme_and_the_aggregations_page_link_the_example() -> None:
    assert "](examples/kafka_counts_to_hbase.py)" in (ROOT / "README.md").read_text()
    assert "](../examples/kafka_counts_to_hbase.py)" in (ROOT / "docs" / "hbase-aggregations.md").read_text()


def test_example_counts_each_key_once(kafka_bootstrap: str, hbase_thrift: tuple[str, int],
                                      hbase_thrift2: tuple[str, int], unique_name: Callable[[str], str],
                                      tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    from sparkbarrier.connectors.hbase import read_committed

    name = unique_name("counts")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        for key in KEYS:
            producer.send(name, key=key.encode(), value=b"{}")
        producer.flush(timeout=30)
    finally:
        producer.close()
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--topic", name, "--table", name, "--checkpoint", str(tmp_path / "ckpt"),
         "--bootstrap", kafka_bootstrap, "--hbase", "%s:%d" % hbase_thrift, "--hbase-thrift2", "%s:%d" % hbase_thrift2],
        cwd=tmp_path, env=dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"),
        capture_output=True, text=True, timeout=220)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    view = read_committed(*hbase_thrift, name, sink_id=f"{name}-counts").to_pylist()
    assert {r["user"]: r["n"] for r in view} == dict(Counter(KEYS))
    assert "| ada|  3|" in run.stdout  # the committed view the example shows
