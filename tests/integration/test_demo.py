"""The README's first command runs the main job; this keeps that job from rotting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase,
              pytest.mark.timeout(420)]

DEMO = Path(__file__).resolve().parents[2] / "demo" / "pipeline.py"


@pytest.mark.parametrize(("interrupt", "source"),
                         [(False, "barrier-kafka"), (True, "barrier-kafka"), (False, "kafka")],
                         ids=["stop-between-batches", "stop-mid-batch", "jvm-source"])
def test_demo_pipeline_verifies_exactly_once_and_group_offsets(
    kafka_bootstrap: str, hbase_thrift: tuple[str, int], hbase_thrift2: tuple[str, int], interrupt: bool,
    source: str
) -> None:
    host, port = hbase_thrift
    args = [sys.executable, str(DEMO), "--seconds", "12", "--rate", "200", "--bootstrap", kafka_bootstrap,
            "--hbase", f"{host}:{port}", "--hbase-thrift2", "%s:%d" % hbase_thrift2, "--source", source]
    if interrupt:
        args.append("--interrupt")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "[FAIL]" not in result.stdout and "PASSED" in result.stdout
    # What a new user reads (issue 21, item 11): the table is created right through Thrift2, so
    # no KEEP_DELETED_CELLS warning; no held-back keys warning (a task writes each key once
    # since issue 49); no Spark start-up notices.
    output = result.stdout + result.stderr
    assert output.count("KEEP_DELETED_CELLS => TRUE}") == 0, output[-4000:]
    assert "row key(s) were deleted and rewritten" not in output, output[-4000:]
    for notice in ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader"):
        assert notice not in output, output[-4000:]
