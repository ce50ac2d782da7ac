"""The fault-suite pipeline, run as its own process: Kafka source → parse → barrier-hbase.

``sink`` ``aggregate``: counts per key in update mode through ``foreachBatch`` and
``sparkbarrier.hbase_batch_writer`` instead of the streaming sink.

``python _pipeline.py '<json config>'`` -- the config keys are those of
:class:`fault_kit.PipelineConfig`. ``source`` is ``barrier-kafka`` (commits its group
itself) or ``kafka``: Spark's own source (its jars on the session's classpath), whose
group commits come from ``commit_kafka_offsets`` and whose offsets reach the sink
through Spark's offset log (no markers). The process owns its SparkSession (the fault points
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
    if cfg.get("sink") == "notify":  # Python workers unpickle NotifySink by module name
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, here)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    local = cfg.get("local_dir")
    if local:  # every driver-local directory in one place, which the test wipes between runs
        os.makedirs(local, exist_ok=True)
        os.environ["TMPDIR"] = os.environ["SPARK_LOCAL_DIRS"] = local
        os.chdir(local)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sparkbarrier.connectors.hbase import keep_markers

    jvm_source = cfg.get("source", "barrier-kafka") == "kafka"
    builder = SparkSession.builder
    if jvm_source:
        from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars

        builder = builder.config("spark.jars", jvm_kafka_jars())
    if cfg.get("speculation"):
        builder = (builder.config("spark.speculation", "true").config("spark.speculation.interval", "100ms")
                   .config("spark.speculation.quantile", "0.5").config("spark.speculation.multiplier", "1.5")
                   .config("spark.speculation.minTaskRuntime", "200ms")
                   .config("spark.speculation.efficiency.enabled", "false")
                   .config("spark.executor.memory", "768m"))
    spark = (
        builder.master(cfg["master"])
        .appName("sparkbarrier-fault-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={local}" if local else "")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    if cfg.get("speculation"):  # the test counts the speculative copies in the log
        jvm = spark.sparkContext._jvm
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.scheduler.TaskSetManager", jvm.org.apache.logging.log4j.Level.INFO)
    reader = (
        spark.readStream.format("kafka" if jvm_source else "barrier-kafka")
        .option("kafka.bootstrap.servers", cfg["bootstrap"])
        .option("subscribe", cfg["topic"])
        .option("startingOffsets", cfg["starting_offsets"])
        .option("maxOffsetsPerTrigger", str(cfg["max_offsets"]))
    )
    if cfg.get("min_partitions"):
        reader = reader.option("minPartitions", str(cfg["min_partitions"]))
    commits = None
    if jvm_source:
        from sparkbarrier import commit_kafka_offsets

        commits = commit_kafka_offsets(spark, cfg["group"],
                                       {"kafka.bootstrap.servers": cfg["bootstrap"]})
    else:
        reader = reader.option("kafka.group.id", cfg["group"])
    source = reader.load()
    parsed = source.withColumn(
        "j", F.from_json(F.col("value").cast("string"), "id string, v string, op string"))
    rows = keep_markers(parsed, F.col("j.id").alias("id"), F.col("j.v").alias("v"),
                        F.col("j.op").alias("op"))
    if cfg.get("straggle_ms"):  # the first attempt of task 0 straggles; its copy does not
        delay = cfg["straggle_ms"] / 1000

        def straggle(key):  # noqa: ANN001, ANN202 -- a Python UDF
            import time

            from pyspark import TaskContext

            ctx = TaskContext.get()
            if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and not getattr(
                    straggle, "slept", False):
                straggle.slept = True
                time.sleep(delay)
            return key

        rows = rows.withColumn("id", F.udf(straggle, "string")(F.col("id")))
    if cfg.get("sink") == "notify":  # a two-phase-commit sink that records its notifications
        import sparkbarrier
        from notify_sink import NotifySink

        sparkbarrier.checkpointed_sink(spark, "notify-exactly-once", NotifySink)
        query = (rows.writeStream.format("notify-exactly-once").option("record", cfg["record"])
                 .option("sink.id", cfg["sink_id"]).option("checkpointLocation", cfg["checkpoint"])
                 .trigger(availableNow=True).start())
        return _finish(query, commits, spark)
    if cfg.get("sink") == "aggregate":  # update-mode counts per key through foreachBatch
        return _aggregate(cfg, rows, commits, spark)
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
    return _finish(query, commits, spark)


def _aggregate(cfg, rows, commits, spark) -> int:  # noqa: ANN001 -- Spark's objects
    """``groupBy(id).count()`` in update mode, into HBase by ``hbase_batch_writer`` (2 write tasks a batch)."""
    import sparkbarrier
    from pyspark.sql import functions as F

    host, port = cfg["thrift"]
    counts = rows.groupBy("id").agg(F.count("*").alias("n"))
    writer = sparkbarrier.hbase_batch_writer({
        "hbase.thrift.host": host, "hbase.thrift.port": str(port), "hbase.thrift2.port": str(cfg["thrift2"][1]),
        "table": cfg["table"], "rowkey": "id", "create.table": "true", "sink.id": cfg["sink_id"],
        "sink.buffer-flush.max-rows": "5"})
    query = (counts.writeStream.outputMode("update").foreachBatch(writer)
             .option("checkpointLocation", cfg["checkpoint"]).trigger(availableNow=True).start())
    return _finish(query, commits, spark)


def _finish(query, commits, spark) -> int:  # noqa: ANN001 -- Spark's objects
    try:
        query.awaitTermination()
        if commits is not None:  # the last batch's group commit comes after termination
            commits.finish(query)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
