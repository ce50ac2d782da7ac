"""Kafka → HBase, exactly once: keyed JSON events upserted and deleted in HBase, then the committed view.

    python examples/kafka_to_hbase.py --topic orders --table orders [--checkpoint DIR]

Each Kafka record's value is ``{"id": ..., "amount": ..., "op": "upsert" | "delete"}``.
Endpoints: --bootstrap, --hbase (Thrift1 gateway list), --hbase-thrift2, else the devstack's
SPARKBARRIER_* variables (``python -m sparkbarrier.devstack env``). ``--source kafka`` reads
with Spark's own Kafka source instead, which must be on the classpath (``spark-submit
--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark version>``). The README shows
the part between the two ``# README`` lines; tests/examples/test_kafka_to_hbase_example.py
runs the file on the devstack, as a fresh shell would (the venv's Python run by its path).
"""
# README
import argparse
import os

from pyspark.sql import SparkSession, functions as F

import sparkbarrier  # before the session: points Spark's workers at this Python (PYSPARK_PYTHON)

env = os.environ.get  # the devstack's addresses: eval "$(.venv/bin/python -m sparkbarrier.devstack env)"
cli = argparse.ArgumentParser(description="Kafka -> HBase, exactly once")
cli.add_argument("--bootstrap", default=env("SPARKBARRIER_KAFKA_BOOTSTRAP", "localhost:9092"))
cli.add_argument("--hbase", default=env("SPARKBARRIER_HBASE_THRIFT", "localhost:9090"))
cli.add_argument("--hbase-thrift2", default=env("SPARKBARRIER_HBASE_THRIFT2", "localhost:9095"))
cli.add_argument("--topic", default="orders")
cli.add_argument("--table", default="orders")
cli.add_argument("--checkpoint", default="/tmp/sparkbarrier-example/orders")
cli.add_argument("--source", choices=["barrier-kafka", "kafka"], default="barrier-kafka")
args = cli.parse_args()
kafka = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": args.topic}
group = f"{args.table}-etl"  # receives the offsets of completed batches only

# Nothing else to configure: the installed sparkbarrier registers its formats.
spark = SparkSession.builder.appName("kafka-to-hbase").getOrCreate()
if args.source == "barrier-kafka":
    raw = (spark.readStream.format("barrier-kafka").options(**kafka)
           .option("kafka.group.id", group).option("startingOffsets", "group").load())
else:  # Spark's own source (its jars: spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark
    # version>); a listener commits the group after each completed batch
    commits = sparkbarrier.commit_kafka_offsets(spark, group, {"kafka.bootstrap.servers": args.bootstrap})
    raw = spark.readStream.format("kafka").options(**kafka).option("startingOffsets", "earliest").load()
orders = raw.select(F.from_json(F.col("value").cast("string"),
                                "id string, amount bigint, op string").alias("o")).select("o.*")

hbase = {"hbase.thrift.host": args.hbase, "table": args.table, "sink.id": f"{args.table}-sink"}
query = (orders.writeStream.format("barrier-hbase").options(**hbase)
         .option("rowkey", "id").option("op.column", "op")  # op: "upsert" (or null) or "delete"
         .option("delivery.guarantee", "exactly-once")      # the default
         .option("hbase.thrift2.host", args.hbase_thrift2).option("create.table", "true")
         .option("checkpointLocation", args.checkpoint)
         .trigger(availableNow=True).start())               # what Kafka holds now, then stop
query.awaitTermination()
if args.source == "kafka":
    commits.finish(query)  # waits for the last batch's group commit

committed = spark.read.format("barrier-hbase").options(**hbase).load()  # or .option("as.of.batch", n)
committed.orderBy("id").show(truncate=False)
spark.stop()
# README
