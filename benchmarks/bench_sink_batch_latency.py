"""Per-batch latency of barrier-kafka -> barrier-hbase at small batches, beside a micro-batch's floor.

    .venv/bin/python benchmarks/bench_sink_batch_latency.py --spark-kafka-jars a.jar,b.jar,... \\
        [--rows-per-batch 300] [--batches 15]

Why: before issue 20 the sink's ``start()`` (table checks, commit-table setup) ran twice
per micro-batch (planning worker and commit worker) on the latency path of every batch.
Measured: the median and p90 of Spark's ``triggerExecution`` per batch (warm-up batches
dropped) for barrier-kafka -> barrier-hbase, and for Spark's JVM Kafka source -> ``noop``
in the same session as the floor of a micro-batch on this machine; the ratio to that
floor is what compares across runs. Run it from each worktree (its own .venv) to compare
code versions. Uses the devstack (started if needed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from typing import Any

WARMUP = 3


def produce(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        p.produce(topic, key=str(i).encode(), value=b"x" * 100, partition=i % 2)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(60)


def latencies(query: Any, batches: int) -> list[float]:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        done = [p for p in query.recentProgress if p["numInputRows"] > 0]
        if len(done) >= batches + WARMUP or query.exception() is not None:
            break
        time.sleep(0.5)
    query.stop()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    done = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return [float(p["durationMs"]["triggerExecution"]) for p in done[WARMUP:WARMUP + batches]]


def summary(ms: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(ms), "p90_ms": sorted(ms)[int(0.9 * (len(ms) - 1))], "n": len(ms)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spark-kafka-jars", required=True)
    ap.add_argument("--rows-per-batch", type=int, default=300)
    ap.add_argument("--batches", type=int, default=15)
    args = ap.parse_args()

    import os
    import sys

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import sparkbarrier  # noqa: F401  (registers barrier-kafka and barrier-hbase)
    from sparkbarrier.devstack import Devstack

    ep = Devstack().up()
    topic = f"bench-latency-{uuid.uuid4().hex[:8]}"
    produce(ep.kafka_bootstrap, topic, args.rows_per_batch * (args.batches + WARMUP + 2))
    spark = (SparkSession.builder.master("local[2]").appName("bench-sink-batch-latency")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.jars", args.spark_kafka_jars).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    per_trigger = str(args.rows_per_batch)
    floor_q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", ep.kafka_bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", per_trigger).load()
               .writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp()).start())
    floor = latencies(floor_q, args.batches)
    table = f"bench_latency_{uuid.uuid4().hex[:8]}"
    sink_q = (spark.readStream.format("barrier-kafka").option("kafka.bootstrap.servers", ep.kafka_bootstrap)
              .option("subscribe", topic).option("kafka.group.id", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", per_trigger).load()
              .selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS v")
              .writeStream.format("barrier-hbase")
              .option("hbase.thrift.host", ep.hbase_thrift[0]).option("hbase.thrift.port", str(ep.hbase_thrift[1]))
              .option("hbase.thrift2.port", str(ep.hbase_thrift2[1])).option("table", table)
              .option("create.table", "true").option("rowkey", "id").option("sink.id", table)
              .option("checkpointLocation", tempfile.mkdtemp()).start())
    sink = latencies(sink_q, args.batches)
    spark.stop()
    f, s = summary(floor), summary(sink)
    print(json.dumps({"rows_per_batch": args.rows_per_batch, "jvm_kafka_noop": f, "barrier_kafka_hbase": s,
                      "median_ratio_to_floor": round(s["median_ms"] / f["median_ms"], 2)}))


if __name__ == "__main__":
    main()
