"""Counts per key from Kafka into HBase, exactly once, in update mode through ``foreachBatch``.

    python examples/kafka_counts_to_hbase.py --topic clicks --table click_counts [--checkpoint DIR]

Counts the records per Kafka key; each micro-batch writes only the keys it changed. Spark
refuses update mode for every Python streaming sink, so the batch goes through
``foreachBatch(sparkbarrier.hbase_batch_writer(...))``: docs/hbase-aggregations.md.
Endpoints: --bootstrap, --hbase, --hbase-thrift2, else the devstack's SPARKBARRIER_*
variables. The README and docs/hbase-aggregations.md link it;
tests/examples/test_kafka_counts_example.py runs the file on the devstack.
"""
import argparse
import os

from pyspark.sql import SparkSession, functions as F

import sparkbarrier

env = os.environ.get
cli = argparse.ArgumentParser(description="Kafka -> counts per key in HBase, exactly once")
cli.add_argument("--bootstrap", default=env("SPARKBARRIER_KAFKA_BOOTSTRAP", "localhost:9092"))
cli.add_argument("--hbase", default=env("SPARKBARRIER_HBASE_THRIFT", "localhost:9090"))
cli.add_argument("--hbase-thrift2", default=env("SPARKBARRIER_HBASE_THRIFT2", "localhost:9095"))
cli.add_argument("--topic", default="clicks")
cli.add_argument("--table", default="click_counts")
cli.add_argument("--checkpoint", default="/tmp/sparkbarrier-example/click-counts")
args = cli.parse_args()
spark = SparkSession.builder.appName("kafka-counts-to-hbase").getOrCreate()
kafka = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": args.topic, "startingOffsets": "earliest",
         "kafka.group.id": f"{args.table}-counts"}  # receives the offsets of completed batches only
hbase = {"hbase.thrift.host": args.hbase, "hbase.thrift2.host": args.hbase_thrift2, "create.table": "true"}
counts = (spark.readStream.format("barrier-kafka").options(**kafka).load()
          .groupBy(F.col("key").cast("string").alias("user")).agg(F.count("*").alias("n")))
query = (counts.writeStream.outputMode("update")  # Spark takes update mode only here
         .foreachBatch(sparkbarrier.hbase_batch_writer(
             hbase, table=args.table, rowkey="user", **{"sink.id": f"{args.table}-counts"}))
         .option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start())
query.awaitTermination()
spark.read.format("barrier-hbase").options(**{k: v for k, v in hbase.items() if k != "create.table"}) \
    .option("table", args.table).option("sink.id", f"{args.table}-counts").load().orderBy("user").show()
spark.stop()
