"""Per-batch latency with ``checkpointLocation`` on HDFS against a local one, side by side.

    .venv/bin/python benchmarks/bench_hdfs_checkpoint.py --spark-kafka-jars a.jar,b.jar,... \\
        [--rows-per-batch 300] [--batches 12] [--rounds 2]

Why: on HDFS Spark writes its offset and commit logs through the NameNode and a
DataNode, and the sink's commit worker reads the batch's offset-log entry through
WebHDFS (``connectors/storage/_files.py``) to record its Kafka offsets: two extra costs per
batch that a local checkpoint does not have. Measured: the median and p90 of Spark's
``triggerExecution`` per batch (warm-up batches dropped) for the same query with a local
and an HDFS checkpoint, alternating within one Spark session, for Spark's JVM source →
``noop`` (what HDFS costs Spark itself), Spark's JVM source + ``commit_kafka_offsets`` →
``barrier-hbase`` and ``barrier-kafka`` → ``barrier-hbase``. Uses the devstack's Kafka,
HBase and HDFS (started if needed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sink_batch_latency import latencies, produce, summary  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spark-kafka-jars", required=True)
    ap.add_argument("--rows-per-batch", type=int, default=300)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import sparkbarrier
    from sparkbarrier.devstack import Devstack
    from sparkbarrier.devstack._hdfs import Hdfs

    ep = Devstack().up()
    hdfs = Hdfs().up()
    os.environ["SPARKBARRIER_WEBHDFS"] = hdfs.webhdfs  # the commit workers inherit it
    spark = (SparkSession.builder.master("local[2]").appName("bench-hdfs-checkpoint")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.jars", args.spark_kafka_jars).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    per_trigger = str(args.rows_per_batch)
    needed = args.rows_per_batch * (args.batches + 5)

    def kafka(fmt: str, topic: str) -> Any:
        reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", ep.kafka_bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", per_trigger))
        if fmt == "barrier-kafka":
            reader = reader.option("kafka.group.id", topic)
        return reader.load().selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS v")

    def hbase(df: Any, name: str, checkpoint: str) -> Any:
        return (df.writeStream.format("barrier-hbase")
                .option("hbase.thrift.host", ep.hbase_thrift[0]).option("hbase.thrift.port", str(ep.hbase_thrift[1]))
                .option("hbase.thrift2.port", str(ep.hbase_thrift2[1])).option("table", name)
                .option("create.table", "true").option("rowkey", "id").option("sink.id", name)
                .option("checkpointLocation", checkpoint).start())

    def run(case: str, where: str) -> dict[str, float]:
        name = f"bench_hdfs_{case.replace('-', '_')}_{where}_{uuid.uuid4().hex[:6]}"
        produce(ep.kafka_bootstrap, name, needed)
        checkpoint = tempfile.mkdtemp() if where == "local" else f"{hdfs.uri}/bench/{name}"
        if case == "jvm-noop":
            query = (kafka("kafka", name).writeStream.format("noop")
                     .option("checkpointLocation", checkpoint).start())
        elif case == "jvm-hbase":
            commits = sparkbarrier.commit_kafka_offsets(spark, name, {"kafka.bootstrap.servers": ep.kafka_bootstrap})
            query = hbase(kafka("kafka", name), name, checkpoint)
            try:
                return summary(latencies(query, args.batches))
            finally:
                spark.streams.removeListener(commits)
                commits.close()
        else:
            query = hbase(kafka("barrier-kafka", name), name, checkpoint)
        return summary(latencies(query, args.batches))

    results: list[dict[str, Any]] = []
    for round_ in range(1, args.rounds + 1):
        for case in ("jvm-noop", "jvm-hbase", "barrier-kafka-hbase"):
            local = run(case, "local")
            remote = run(case, "hdfs")
            results.append({"round": round_, "case": case, "local": local, "hdfs": remote,
                            "median_ratio": round(remote["median_ms"] / local["median_ms"], 2)})
            print(json.dumps(results[-1]), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
