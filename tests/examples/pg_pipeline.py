"""The PostgreSQL example pipeline, run as its own process: barrier-kafka → PostgresSink.

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

    spark = (SparkSession.builder.master(cfg["master"]).appName("sparkbarrier-pg-pipeline")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    sparkbarrier.checkpointed_sink(spark, "pg-exactly-once", PostgresSink)
    source = (spark.readStream.format("barrier-kafka").option("kafka.bootstrap.servers", cfg["bootstrap"])
              .option("subscribe", cfg["topic"]).option("kafka.group.id", cfg["group"])
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(cfg["max_offsets"]))
              .load())
    rows = keep_markers(source, F.col("partition"), F.col("offset"), F.col("value").cast("string").alias("value"))
    query = (rows.writeStream.format("pg-exactly-once").option("dsn", cfg["dsn"]).option("table", cfg["table"])
             .option("sink.id", cfg["sink_id"]).option("checkpointLocation", cfg["checkpoint"])
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
