"""The fault-suite pipeline, run as its own process: barrier-kafka → parse → barrier-hbase.

``python _pipeline.py '<json config>'`` -- the config keys are those of
:class:`fault_kit.PipelineConfig`. The process owns its SparkSession (the fault points
SIGKILL its driver JVM), runs the query with ``Trigger.AvailableNow`` until everything
available at start is consumed, and exits 0; any query failure exits 1 with the error
on stderr.
"""

from __future__ import annotations

import json
import os
import sys


def main(raw: str) -> int:
    cfg = json.loads(raw)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sparkbarrier.connectors.hbase import keep_markers

    spark = (
        SparkSession.builder.master(cfg["master"])
        .appName("sparkbarrier-fault-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    source = (
        spark.readStream.format("barrier-kafka")
        .option("kafka.bootstrap.servers", cfg["bootstrap"])
        .option("subscribe", cfg["topic"])
        .option("kafka.group.id", cfg["group"])
        .option("startingOffsets", cfg["starting_offsets"])
        .option("maxOffsetsPerTrigger", str(cfg["max_offsets"]))
        .load()
    )
    parsed = source.withColumn(
        "j", F.from_json(F.col("value").cast("string"), "id string, v string, op string"))
    rows = keep_markers(parsed, F.col("j.id").alias("id"), F.col("j.v").alias("v"),
                        F.col("j.op").alias("op"))
    host, port = cfg["thrift"]
    writer = rows.writeStream.format("barrier-hbase")
    if cfg.get("thrift2"):
        # The Thrift2 server (same host) lets the sink create the table with
        # KEEP_DELETED_CELLS=TRUE, which makes the committed view exact.
        thrift2_host, thrift2_port = cfg["thrift2"]
        assert thrift2_host == host, f"Thrift2 {thrift2_host} must be on the Thrift host {host}"
        writer = writer.option("hbase.thrift2.port", str(thrift2_port))
    if cfg.get("gateways"):  # a gateway list: tasks spread over them and fail over
        host = ",".join(f"{h}:{p}" for h, p in cfg["gateways"])
    query = (
        writer
        .option("hbase.thrift.host", host)
        .option("hbase.thrift.port", str(port))
        .option("table", cfg["table"])
        .option("rowkey", "id")
        .option("op.column", "op")
        .option("create.table", "true")
        .option("sink.id", cfg["sink_id"])
        .option("sink.buffer-flush.max-rows", "20")
        .option("checkpointLocation", cfg["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
