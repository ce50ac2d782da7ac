"""Throughput of the barrier-kafka source next to a raw kafka-python drain and Spark's
built-in Kafka source, on the same topic, into Spark's no-op sink.

    python benchmarks/bench_kafka_source.py --records 1000000 \
        --bootstrap 127.0.0.1:9092 [--spark-kafka-version 4.2.0] [--skip-builtin]

Produces N records of ``--value-bytes`` bytes on 2 partitions (batched producer),
then measures, one after the other:

* raw      -- one kafka-python consumer draining both partitions (assign + seek);
* raw x2   -- one kafka-python consumer per partition in 2 processes (what Spark's
              local[2] parallelism can reach at best);
* barrier  -- ``format("barrier-kafka")``, ``Trigger.AvailableNow`` -> ``noop``;
* builtin  -- ``format("kafka")`` (spark-sql-kafka-0-10), same trigger and sink.

Spark timings span ``start()`` to termination of the query (planning included;
session start-up and a warm-up query on a small topic excluded). Prints records/s
and ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP

PARTITIONS = 2
WARMUP_RECORDS = 50_000


def produce(bootstrap: str, topic: str, records: int, value_bytes: int) -> float:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}},
                        wait_for_metadata=True)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, acks=1,
                             batch_size=1024 * 1024,
                             max_request_size=8 * 1024 * 1024)
    value = b"x" * value_bytes
    t0 = time.perf_counter()
    for i in range(records):
        producer.send(topic, value=value, partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    return records / (time.perf_counter() - t0)


def _drain(bootstrap: str, topic: str, partitions: list[int]) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_bytes=64 * 1024 * 1024,
                             max_partition_fetch_bytes=16 * 1024 * 1024,
                             max_poll_records=10_000, receive_buffer_bytes=4 * 1024 * 1024)
    tps = [KafkaTP(topic, p) for p in partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    count = 0
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for batch in consumer.poll(timeout_ms=200, max_records=10_000).values():
            count += len(batch)
    consumer.close()
    return count


def raw_drain(bootstrap: str, topic: str, records: int, processes: int) -> float:
    t0 = time.perf_counter()
    if processes == 1:
        count = _drain(bootstrap, topic, list(range(PARTITIONS)))
    else:
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            count = sum(pool.starmap(_drain, [(bootstrap, topic, [p]) for p in range(PARTITIONS)]))
    elapsed = time.perf_counter() - t0
    assert count == records, (count, records)
    return records / elapsed


def spark_session(kafka_package: str | None, kafka_jars: str | None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("bench-kafka-source")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "3g")
               .config("spark.sql.shuffle.partitions", "2"))
    if kafka_jars:
        builder = builder.config("spark.jars", kafka_jars)
    elif kafka_package:
        builder = builder.config("spark.jars.packages", kafka_package)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def spark_run(spark, fmt: str, options: dict[str, str], records: int) -> float:
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    with tempfile.TemporaryDirectory() as ckpt:
        t0 = time.perf_counter()
        query = (reader.load().writeStream.format("noop").option("checkpointLocation", ckpt)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        elapsed = time.perf_counter() - t0
        rows = sum(p["numInputRows"] for p in query.recentProgress)
    # barrier-kafka adds one marker row per partition and batch
    assert rows >= records, (fmt, rows, records)
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--bootstrap", default=os.environ.get("SPARKBARRIER_KAFKA_BOOTSTRAP"))
    parser.add_argument("--spark-kafka-version", default=None,
                        help="spark-sql-kafka-0-10 version (default: the pyspark version)")
    parser.add_argument("--spark-kafka-jars", default=None,
                        help="comma-separated local jars for the built-in source (instead of "
                             "resolving --spark-kafka-version through spark.jars.packages)")
    parser.add_argument("--skip-builtin", action="store_true")
    args = parser.parse_args()
    if not args.bootstrap:
        from sparkbarrier.devstack import Devstack

        args.bootstrap = Devstack().up().kafka_bootstrap

    topic = f"bench_{uuid.uuid4().hex[:8]}"
    print(f"producing {args.records:,} x {args.value_bytes} B to {topic} ...", flush=True)
    print(f"  produce  {produce(args.bootstrap, topic, args.records, args.value_bytes):>12,.0f} rec/s")
    warm_topic = topic + "_warmup"
    produce(args.bootstrap, warm_topic, WARMUP_RECORDS, args.value_bytes)
    results: dict[str, float] = {}
    results["raw"] = raw_drain(args.bootstrap, topic, args.records, 1)
    results["raw x2"] = raw_drain(args.bootstrap, topic, args.records, PARTITIONS)

    import pyspark

    package = None
    if not args.skip_builtin and not args.spark_kafka_jars:
        version = args.spark_kafka_version or pyspark.__version__
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
    spark = spark_session(package, None if args.skip_builtin else args.spark_kafka_jars)
    from sparkbarrier.connectors.kafka import register

    register(spark)
    common = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": topic,
              "startingOffsets": "earliest"}
    # Warm-up on a small topic: JVM JIT and Python worker start-up (~10 s on 2 cores) are
    # paid once per session, not per query; measured runs should not carry them.
    warm = {**common, "subscribe": warm_topic}
    spark_run(spark, "barrier-kafka", {**warm, "commitOffsets": "false"}, WARMUP_RECORDS)
    if package or (args.spark_kafka_jars and not args.skip_builtin):
        try:
            spark_run(spark, "kafka", warm, WARMUP_RECORDS)
        except Exception as exc:  # reported below when the measured run fails too
            print(f"  builtin  warm-up failed: {str(exc).splitlines()[0][:200]}")
    results["barrier"] = spark_run(
        spark, "barrier-kafka", {**common, "kafka.group.id": f"bench-{topic}"}, args.records)
    if package or (args.spark_kafka_jars and not args.skip_builtin):
        try:
            results["builtin"] = spark_run(spark, "kafka", common, args.records)
        except Exception as exc:  # report and go on: the other numbers still stand
            print(f"  builtin  failed: {str(exc).splitlines()[0][:300]}")
    spark.stop()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    admin.delete_topics([topic, warm_topic])  # do not leave gigabytes on a shared broker
    admin.close()

    for name, rate in results.items():
        print(f"  {name:<8} {rate:>12,.0f} rec/s")
    print(f"  barrier / raw    = {results['barrier'] / results['raw']:.2f}")
    print(f"  barrier / raw x2 = {results['barrier'] / results['raw x2']:.2f}")
    if "builtin" in results:
        print(f"  barrier / builtin = {results['barrier'] / results['builtin']:.2f}")


if __name__ == "__main__":
    main()
