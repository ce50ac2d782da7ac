"""After installation Spark finds both formats without any register call."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    kafka = (
        spark.readStream.format("barrier-kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "t")
        .option("kafka.group.id", "g")
        .load()
    )
    print("KAFKA", ",".join(kafka.columns))
    print("STREAMING", kafka.isStreaming)
    try:
        spark.read.format("barrier-hbase").option("bogus.option", "1").load()
    except Exception as exc:  # the sink's own option check answers, not "not found"
        print("HBASE", "DATA_SOURCE_NOT_FOUND" if "DATA_SOURCE_NOT_FOUND" in str(exc) else
              ("options" if "bogus.option" in str(exc) else str(exc)[:200].replace(chr(10), " ")))
    spark.stop()
    """
)


def test_formats_resolve_without_register_call() -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=170
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    # By default exactly Spark's Kafka columns: a drop-in for format("kafka").
    assert lines["KAFKA"] == "key,value,topic,partition,offset,timestamp,timestampType"
    assert lines["STREAMING"] == "True"
    assert lines["HBASE"] == "options"
