"""Small batches and the first batch: barrier-kafka against Spark's JVM source and the Python floor.

    .venv/bin/python benchmarks/bench_small_batches.py --spark-kafka-jars a.jar,b.jar,... \\
        [--rows-per-batch 300] [--batches 11] [--rounds 2] [--first-batch | --first-batch-warm]

Why: users compare a micro-batch of ``barrier-kafka`` with one of Spark's own
``format("kafka")`` at the same trigger. Every case runs in one Spark session, one after
the other in each round (so the machine's load hits them alike), at
``maxOffsetsPerTrigger=300`` on a 2-partition topic:

* ``jvm -> noop``: Spark's JVM Kafka source, the baseline;
* ``floor -> noop``: a Python streaming source that hands Spark pre-built Arrow batches
  of the same schema and size (no Kafka): what Spark's Python data source API costs on
  its own per batch (planner round trips to the Python planner, a Python worker per
  task, Arrow to rows), the floor under any Python source;
* ``barrier-kafka -> noop``, the same with ``kafkaConsumer.cacheTimeoutMs=0`` (a new
  consumer per task: what the consumer pool saves), and with ``commitOffsets=false`` (no
  group offsets committed, as the JVM source: what the group commit costs a batch);
* ``barrier-kafka -> floor sink``: a Python streaming sink that reads its batches and
  commits nothing: what Spark's Python sink API costs on its own (a second Python worker
  per task, the commit runner on the driver), the floor under any Python sink;
* ``floor -> floor sink``: both Python APIs' own cost, the floor under any pipeline of a
  Python source into a Python sink (the sink cases are compared with it too);
* ``floor -> put sink``: the floor source into a Python sink that puts the rows into
  HBase through Thrift1 (happybase, one batch per task, no commit protocol): what any
  Python sink writing these rows to HBase costs, with the HBase servers' own CPU on the
  same two cores (``barrier-hbase`` is compared with it too);
* ``barrier-kafka -> put sink``: the same put sink behind ``barrier-kafka`` (issue 49's
  baseline for ``barrier-hbase``: the same source, a sink without the protocol);
* ``barrier-kafka -> barrier-hbase`` and
  ``jvm + commit_kafka_offsets -> barrier-hbase``.

Printed per case: the median and p90 of Spark's ``triggerExecution`` per batch (warm-up
batches dropped), and the median of each phase Spark reports (``latestOffset``,
``queryPlanning``, ``getBatch``, ``walCommit``, ``addBatch``: the tasks and the sink's
commit, ``commitOffsets``), so the gap to the baseline has an address; and the ratio of
each median to the baseline's and to the floor's. ``--first-batch`` instead runs each case
in a fresh process (a new Spark session) and reports the wall time from ``start()`` to
its first completed batch. ``--first-batch-warm`` starts, in one session after a warm-up
round, a new query per round of ``barrier-kafka -> put sink`` and of ``barrier-kafka ->
barrier-hbase`` (the order alternating) and reports the same wall time and the ratio
(issue 57, item 9: what a sink's query start costs when the JVM and workers are warm).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sink_batch_latency import produce  # noqa: E402

WARMUP = 3
PHASES = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets")
CASES = ("jvm-noop", "floor-noop", "barrier-noop", "barrier-noop-nocache", "barrier-noop-nocommit",
         "floor-floorsink", "floor-putsink", "barrier-floorsink", "barrier-putsink", "barrier-hbase",
         "jvm-commits-hbase")


def register_floor(spark: Any, rows_per_batch: int) -> None:
    """``format("bench-small-floor")``: every trigger has ``rows_per_batch`` more rows."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.pandas.types import to_arrow_schema

    from sparkbarrier.connectors.kafka import source_schema

    class _Slice(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class _Reader(DataSourceStreamReader):
        def __init__(self) -> None:
            self.n = 0  # the planner instance lives as long as the query

        def initialOffset(self) -> dict:
            return {"o": 0}

        def latestOffset(self) -> dict:  # a topic that always has the next batch ready
            self.n += rows_per_batch
            return {"o": self.n}

        def partitions(self, start: dict, end: dict) -> list:
            rows = end["o"] - start["o"]
            return [_Slice(rows // 2 + (i < rows % 2)) for i in range(2)] if rows else []

        def read(self, partition: _Slice):
            schema = to_arrow_schema(source_schema(False, False), timezone="UTC")
            n = partition.rows
            columns = {"key": pa.array([b"k%d" % i for i in range(n)], pa.binary()),
                       "value": pa.array([b"x" * 100] * n, pa.binary()),
                       "topic": pa.array(["bench_topic"] * n, pa.string()),
                       "partition": pa.array([0] * n, pa.int32()),
                       "offset": pa.array(range(n), pa.int64()),
                       "timestamp": pa.array([1_700_000_000_000_000] * n, pa.int64()).cast(
                           schema.field("timestamp").type),
                       "timestampType": pa.array([0] * n, pa.int32())}
            yield pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-small-floor"

        def schema(self):
            return source_schema(False, False)

        def streamReader(self, schema):
            return _Reader()

    spark.dataSource.register(_Source)


def session(jars: str) -> Any:
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench-small-batches")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1").config("spark.jars", jars).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # As sparkbarrier.checkpointed_sink() does for a user's sink: the bench's own Python
    # sinks and the barrier formats then share one Python worker daemon (Spark keys them
    # by environment; an auto-discovered source carries another one than these).
    import sparkbarrier

    sparkbarrier.register(spark)
    return spark


def register_sinks(spark: Any) -> None:
    """The two baseline sinks.

    ``format("bench-small-floor-sink")`` takes every row, stores nothing and commits
    nothing: Spark's own cost of a Python sink. ``format("bench-small-put-sink")`` puts
    every row into HBase through Thrift1 (one batched ``mutateRows`` per task, happybase,
    no commit protocol): the least any Python sink writing these rows to HBase does --
    at-least-once, no placement, no commit.
    """
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class _FloorWriter(DataSourceStreamArrowWriter):
        def write(self, iterator):
            for _ in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages, batchId) -> None:
            pass

        def abort(self, messages, batchId) -> None:
            pass

    class _PutWriter(_FloorWriter):
        def __init__(self, options):
            self._host, self._port, self._table = options["host"], int(options["port"]), options["table"]

        def write(self, iterator):
            import happybase

            conn = happybase.Connection(self._host, self._port)
            try:
                with conn.table(self._table).batch() as batch:
                    for data in iterator:
                        for key, value in zip(data.column("id").to_pylist(), data.column("v").to_pylist()):
                            batch.put(key.encode(), {b"d:v": value.encode()})
            finally:
                conn.close()
            return WriterCommitMessage()

    class _FloorSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-small-floor-sink"

        def streamWriter(self, schema, overwrite):
            return _FloorWriter()

    class _PutSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-small-put-sink"

        def streamWriter(self, schema, overwrite):
            return _PutWriter(self.options)

    spark.dataSource.register(_FloorSink)
    spark.dataSource.register(_PutSink)


def start(spark: Any, case: str, ep: Any, rows: int, batches: int, topic: str | None = None) -> tuple[Any, Any]:
    """The query of ``case`` on a fresh topic (and the commit listener, if any).

    ``topic``: one already produced, whose table :func:`make_table` made, so that neither
    is timed (``--first-batch-warm``).
    """
    import sparkbarrier

    name = topic or new_topic(case)
    commits = None
    if case.startswith("floor"):
        df = spark.readStream.format("bench-small-floor").load()
    else:
        if topic is None:
            produce(ep.kafka_bootstrap, name, rows * (batches + WARMUP + 3))
        fmt = "kafka" if case.startswith("jvm") else "barrier-kafka"
        reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", ep.kafka_bootstrap)
                  .option("subscribe", name).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", str(rows)))
        if fmt == "barrier-kafka" and case != "barrier-noop-nocommit":
            reader = reader.option("kafka.group.id", name)
        if case == "barrier-noop-nocache":  # a consumer per task, as before the pool
            reader = reader.option("kafkaConsumer.cacheTimeoutMs", "0")
        if case == "barrier-noop-nocommit":  # no group offsets committed, like the JVM source
            reader = reader.option("commitOffsets", "false")
        df = reader.load()
        if case == "jvm-commits-hbase":
            commits = sparkbarrier.commit_kafka_offsets(spark, name, {"kafka.bootstrap.servers": ep.kafka_bootstrap})
    if case.endswith("putsink"):
        if topic is None:
            make_table(ep, case, name)
        writer = (df.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS v").writeStream
                  .format("bench-small-put-sink").option("host", ep.hbase_thrift[0])
                  .option("port", str(ep.hbase_thrift[1])).option("table", name))
    elif case.endswith("floorsink"):
        writer = (df.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS v").writeStream
                  .format("bench-small-floor-sink"))
    elif case.endswith("hbase"):
        writer = (df.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS v").writeStream
                  .format("barrier-hbase").option("hbase.thrift.host", ep.hbase_thrift[0])
                  .option("hbase.thrift.port", str(ep.hbase_thrift[1]))
                  .option("hbase.thrift2.port", str(ep.hbase_thrift2[1])).option("table", name)
                  .option("create.table", "true").option("rowkey", "id").option("sink.id", name))
    else:
        writer = df.writeStream.format("noop")
    return writer.option("checkpointLocation", tempfile.mkdtemp()).start(), commits


def make_table(ep: Any, case: str, name: str) -> None:
    """The case's target table: the put sink's through Thrift1; ``barrier-hbase``'s as its
    ``create.table=true`` makes it (``prepare_table``: Thrift2, 100 versions, deleted cells kept)."""
    if case.endswith("putsink"):
        import happybase

        conn = happybase.Connection(*ep.hbase_thrift)
        try:
            conn.create_table(name, {"d": {}})
        finally:
            conn.close()
    elif case.endswith("hbase"):
        from sparkbarrier.connectors.hbase._options import parse_sink_options
        from sparkbarrier.connectors.hbase.client._admin import prepare_table
        from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
        from sparkbarrier.connectors.hbase.client._thrift2 import Thrift2Admin

        opts = parse_sink_options({"hbase.thrift.host": ep.hbase_thrift[0],
                                   "hbase.thrift.port": str(ep.hbase_thrift[1]),
                                   "hbase.thrift2.port": str(ep.hbase_thrift2[1]), "table": name, "rowkey": "id"})
        conn, admin = HBaseConnection(opts), Thrift2Admin(opts)
        try:
            prepare_table(conn, name, [b"d"], create=True, thrift2=admin)
        finally:
            conn.close()
            admin.close()


def new_topic(case: str) -> str:
    """A fresh name for a case's topic, table and ``sink.id``."""
    return f"bench_small_{case.replace('-', '_')}_{uuid.uuid4().hex[:6]}"


def measure(spark: Any, case: str, ep: Any, rows: int, batches: int) -> dict[str, Any]:
    query, commits = start(spark, case, ep, rows, batches)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            done = [p for p in query.recentProgress if p["numInputRows"] > 0]
            if len(done) >= batches + WARMUP or query.exception() is not None:
                break
            time.sleep(0.2)
    finally:
        query.stop()
        if commits is not None:
            spark.streams.removeListener(commits)
            commits.close()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    done = [p for p in query.recentProgress if p["numInputRows"] > 0][WARMUP:WARMUP + batches]
    total = sorted(float(p["durationMs"]["triggerExecution"]) for p in done)
    phases = {ph: statistics.median(float(p["durationMs"].get(ph, 0)) for p in done) for ph in PHASES}
    return {"median_ms": statistics.median(total), "p90_ms": total[int(0.9 * (len(total) - 1))],
            "n": len(total), "phases_median_ms": phases}


def first_batch(case: str, jars: str, rows: int) -> float:
    """In this (fresh) process: seconds from ``start()`` to the first completed batch."""
    from sparkbarrier.devstack import Devstack

    ep = Devstack().up()
    spark = session(jars)
    register_floor(spark, rows)
    register_sinks(spark)
    t0 = time.monotonic()
    query, commits = start(spark, case, ep, rows, 1)
    try:
        while not [p for p in query.recentProgress if p["numInputRows"] > 0]:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.05)
        return time.monotonic() - t0
    finally:
        query.stop()
        if commits is not None:
            spark.streams.removeListener(commits)
            commits.close()
        spark.stop()


def first_batch_warm(spark: Any, case: str, ep: Any, rows: int, new_table: bool = False) -> dict[str, Any]:
    """In this warm session: seconds from ``start()`` of a new query to its first completed batch.

    Why: a user's second, third ... query in one driver does not pay for the JVM, the
    Python worker daemon or the imports, but does pay for whatever a sink does at a query's
    start (the table checks, the commit table, the plan epoch, the attempt's placement).
    The topic and the target table are made before the clock starts (a table HBase takes
    ~0.6 s to create is the same cost for any sink; ``barrier-hbase`` still runs with
    ``create.table=true``, so it checks the table as on every start). Returned: the wall
    time and the first batch's phases; ``triggerExecution`` is the batch alone (the issue's
    measure), the wall time adds Spark's own query start, the same for both sinks.
    ``new_table``: the table is created inside the clock instead, by the put sink's case
    just before ``start()``, by ``barrier-hbase`` in its first batch (the wall time then
    compares like with like, ``triggerExecution`` does not).
    """
    topic = new_topic(case)
    produce(ep.kafka_bootstrap, topic, rows * 4)
    if not new_table:
        make_table(ep, case, topic)
    t0 = time.monotonic()
    if new_table and case.endswith("putsink"):
        make_table(ep, case, topic)
    query, _ = start(spark, case, ep, rows, 1, topic=topic)
    try:
        while not (done := [p for p in query.recentProgress if p["numInputRows"] > 0]):
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.02)
        wall = time.monotonic() - t0
    finally:
        query.stop()
        drop_table(ep, topic)
    return {"first_batch_s": round(wall, 3),
            "phases_ms": {ph: done[0]["durationMs"].get(ph, 0) for ph in (*PHASES, "triggerExecution")}}


def drop_table(ep: Any, name: str) -> None:
    """Drop a case's table once its query stopped: a run makes two per round, and the
    devstack's standalone HBase master ran out of heap after some hundreds of tables."""
    import happybase

    conn = happybase.Connection(*ep.hbase_thrift)
    try:
        if name.encode() in conn.tables():
            conn.delete_table(name, disable=True)
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spark-kafka-jars", required=True)
    ap.add_argument("--rows-per-batch", type=int, default=300)
    ap.add_argument("--batches", type=int, default=11)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup-rounds", type=int, default=1,
                    help="rounds of every case run first and not reported (the JVM's JIT, pooled workers)")
    ap.add_argument("--first-batch", action="store_true")
    ap.add_argument("--first-batch-warm", action="store_true",
                    help="a new query's first batch in one warm session, barrier-putsink against barrier-hbase")
    ap.add_argument("--new-table", action="store_true",
                    help="with --first-batch-warm: each query's table is created inside the clock")
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated subset of the cases (jvm-noop and floor-noop always run)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one first-batch case in this process
    args = ap.parse_args()
    cases = [c for c in CASES if c in {"jvm-noop", "floor-noop", *args.cases.split(",")}]
    if args.one:
        print(json.dumps({"case": args.one, "first_batch_s": first_batch(args.one, args.spark_kafka_jars,
                                                                          args.rows_per_batch)}))
        return
    if args.first_batch:
        for round_ in range(1, args.rounds + 1):
            out = {}
            for case in cases:
                done = subprocess.run([sys.executable, __file__, "--spark-kafka-jars", args.spark_kafka_jars,
                                       "--rows-per-batch", str(args.rows_per_batch), "--one", case],
                                      capture_output=True, text=True, timeout=600, check=True)
                out[case] = json.loads(done.stdout.strip().splitlines()[-1])["first_batch_s"]
            base, floor = out["jvm-noop"], out["floor-noop"]
            pair = out.get("floor-floorsink")
            print(json.dumps({"round": round_, "first_batch_s": out,
                              "ratio_to_jvm_noop": {c: round(v / base, 2) for c, v in out.items()},
                              "ratio_to_floor": {c: round(v / floor, 2) for c, v in out.items()},
                              "ratio_to_floor_floorsink": {c: round(v / pair, 2) for c, v in out.items()
                                                           if pair and ("sink" in c or c.endswith("hbase"))}}),
                  flush=True)
        return

    from sparkbarrier.devstack import Devstack

    ep = Devstack().up()
    spark = session(args.spark_kafka_jars)
    register_floor(spark, args.rows_per_batch)
    register_sinks(spark)
    if args.first_batch_warm:
        pair = ("barrier-putsink", "barrier-hbase")
        for _ in range(args.warmup_rounds):
            for case in pair:
                measure(spark, case, ep, args.rows_per_batch, 2)
        for round_ in range(1, args.rounds + 1):
            order = pair if round_ % 2 else pair[::-1]
            out = {case: first_batch_warm(spark, case, ep, args.rows_per_batch, args.new_table) for case in order}
            hb, put = out["barrier-hbase"], out["barrier-putsink"]
            print(json.dumps({"round": round_, "order": order, **out,
                              "ratio_trigger": round(hb["phases_ms"]["triggerExecution"]
                                                     / put["phases_ms"]["triggerExecution"], 2),
                              "ratio_wall": round(hb["first_batch_s"] / put["first_batch_s"], 2)}), flush=True)
        spark.stop()
        return
    for _ in range(args.warmup_rounds):
        for case in cases:
            measure(spark, case, ep, args.rows_per_batch, 2)
    for round_ in range(1, args.rounds + 1):
        results = {case: measure(spark, case, ep, args.rows_per_batch, args.batches) for case in cases}
        base, floor = results["jvm-noop"]["median_ms"], results["floor-noop"]["median_ms"]
        pair = results.get("floor-floorsink", {}).get("median_ms")
        for case, r in results.items():
            r["ratio_to_jvm_noop"] = round(r["median_ms"] / base, 2)
            r["ratio_to_floor"] = round(r["median_ms"] / floor, 2)
            if pair and ("sink" in case or case.endswith("hbase")):
                if "floor-putsink" in results:
                    r["ratio_to_floor_putsink"] = round(r["median_ms"] / results["floor-putsink"]["median_ms"], 2)
                r["ratio_to_floor_floorsink"] = round(r["median_ms"] / pair, 2)
            if case == "barrier-hbase" and "barrier-putsink" in results:
                r["ratio_to_barrier_putsink"] = round(r["median_ms"] / results["barrier-putsink"]["median_ms"], 2)
            print(json.dumps({"round": round_, "case": case, **r}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
