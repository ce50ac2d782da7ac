"""The PostgreSQL example pipeline, run as its own process: barrier-kafka (or Spark's own
``format("kafka")`` with ``commit_kafka_offsets``) → PostgresSink.

``python pg_pipeline.py '<json config>'`` with the keys of :class:`fault_kit.PipelineConfig`
plus ``dsn``: runs with ``Trigger.AvailableNow`` until everything available at start is
consumed (exit 0); the fault points SIGKILL its driver JVM.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(raw: str) -> int:
    cfg = json.loads(raw)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    example = str(Path(__file__).resolve().parents[2] / "examples" / "postgres")
    sys.path.insert(0, example)
    # Python workers unpickle PostgresSink by module name: let them import it too.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [example, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from postgres_sink import PostgresSink

    import sparkbarrier
    from sparkbarrier.connectors.hbase import keep_markers

    jvm_source = cfg.get("source", "barrier-kafka") == "kafka"
    builder = SparkSession.builder
    if jvm_source:
        from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars

        builder = builder.config("spark.jars", jvm_kafka_jars())
    spark = (builder.master(cfg["master"]).appName("sparkbarrier-pg-pipeline")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    sparkbarrier.checkpointed_sink(spark, "pg-exactly-once", PostgresSink)
    reader = (spark.readStream.format("kafka" if jvm_source else "barrier-kafka")
              .option("kafka.bootstrap.servers", cfg["bootstrap"]).option("subscribe", cfg["topic"])
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(cfg["max_offsets"])))
    commits = None
    if jvm_source:  # no markers: the adapter learns each batch's offsets from Spark's offset log
        commits = sparkbarrier.commit_kafka_offsets(spark, cfg["group"], {"kafka.bootstrap.servers": cfg["bootstrap"]})
    else:
        reader = reader.option("kafka.group.id", cfg["group"])
    rows = keep_markers(reader.load(), F.col("partition"), F.col("offset"),
                        F.col("value").cast("string").alias("value"))
    query = (rows.writeStream.format("pg-exactly-once").option("dsn", cfg["dsn"]).option("table", cfg["table"])
             .option("sink.id", cfg["sink_id"]).option("checkpointLocation", cfg["checkpoint"])
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
        if commits is not None:  # the last batch's group commit comes after termination
            commits.finish(query)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
