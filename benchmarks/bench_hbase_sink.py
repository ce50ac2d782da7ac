"""Throughput of the barrier-hbase sink vs. hand-written happybase writers.

N rows of 10 columns (string key, 3 bigint, 3 double, 3 string) go into fresh HBase
tables, side by side in one run:

* ``raw client``     -- a happybase ``Table.batch(batch_size=1000)`` put loop over the
  same rows (values encoded inline), no Spark: the ceiling for one Python writer;
* ``task writer``    -- our executor writer class alone (exactly-once), no Spark;
* ``foreachBatch``   -- Spark file stream + ``foreachBatch`` + happybase put loop;
* ``sink eo`` / ``sink alo`` -- Spark file stream → ``barrier-hbase``
  (exactly-once / at-least-once).

Ratios: task writer / raw client (target >= 0.9), sink eo / foreachBatch, and
sink eo / sink alo (exactly-once costs <= 10%). Run:
``python benchmarks/bench_hbase_sink.py --host 127.0.0.1 --port 9090 [--rows N]``.
``--gateways [--tasks K]``: 1 vs 2 Thrift gateways and TLS vs plaintext instead (``_gateway_bench``).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

import happybase
import pyarrow.parquet as pq

from _hbase_rows import make_rows, write_task
from sparkbarrier.connectors.hbase import parse_sink_options, register
from sparkbarrier.connectors.hbase.sink._commit_table import ensure_commit_table
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase.sink._writer import TaskIdentity


def new_table(host: str, port: int) -> str:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    conn = happybase.Connection(host, port)
    conn.create_table(name, {"d": {"max_versions": 10}})
    conn.close()
    return name


def put_partition(host: str, port: int, table: str, rows: list[dict]) -> None:
    conn = happybase.Connection(host, port)
    t = conn.table(table)
    pack_i, pack_f = struct.Struct(">q").pack, struct.Struct(">d").pack
    with t.batch(batch_size=1000) as b:
        for r in rows:
            data = {}
            for k in range(3):
                data[f"d:i{k}".encode()] = pack_i(r[f"i{k}"])
                data[f"d:f{k}".encode()] = pack_f(r[f"f{k}"])
                data[f"d:s{k}".encode()] = r[f"s{k}"].encode()
            b.put(r["id"].encode(), data)
    conn.close()


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9090)
    ap.add_argument("--thrift2-port", type=int, default=9095, help="on --host; exactly once needs Thrift2")
    ap.add_argument("--files", type=int, default=2, help="input files = Spark tasks")
    ap.add_argument("--gateways", action="store_true",
                    help="instead: 1 vs 2 Thrift gateways and TLS, with gateway CPU per row (benchmarks/_gateway_bench.py)")
    ap.add_argument("--tasks", type=int, default=2, help="with --gateways: parallel task processes")
    args = ap.parse_args()
    if args.gateways:
        from _gateway_bench import run

        run("write", args.rows, args.tasks)
        return
    host, port, n = args.host, args.port, args.rows
    data = make_rows(n)
    results: dict[str, float] = {}

    results["raw client"] = n / timed(lambda: put_partition(host, port, new_table(host, port), data.to_pylist()))

    opts = parse_sink_options({"hbase.thrift.host": host, "hbase.thrift.port": str(port),
                               "hbase.thrift2.port": str(args.thrift2_port), "table": new_table(host, port), "rowkey": "id",
                               "commit.table": "sparkbarrier_commits_bench"})
    ensure_commit_table(HBaseConnection(connection_options(host=host, port=port)), opts.commit_table)
    results["task writer"] = n / timed(lambda: write_task(opts, TaskIdentity("bench", 0, 0),
                                                           data.to_batches(max_chunksize=10_000)))

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    tmp = tempfile.mkdtemp(prefix="bench_hbase_")
    per_file = -(-n // args.files)
    os.makedirs(f"{tmp}/in")
    for i in range(args.files):
        pq.write_table(data.slice(i * per_file, per_file), f"{tmp}/in/part-{i}.parquet")
    source = lambda: spark.readStream.schema(spark.read.parquet(f"{tmp}/in").schema).parquet(f"{tmp}/in")  # noqa: E731

    def run(writer: object, tag: str) -> None:
        q = writer.option("checkpointLocation", f"{tmp}/ckpt-{tag}").trigger(availableNow=True).start()
        try:
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))
        finally:
            q.stop()

    fb_table = new_table(host, port)

    def fb(df, _batch_id):  # noqa: ANN001
        df.foreachPartition(lambda it: put_partition(host, port, fb_table, [r.asDict() for r in it]))

    results["foreachBatch"] = n / timed(lambda: run(source().writeStream.foreachBatch(fb), "fb"))
    for tag, guarantee in (("sink eo", "exactly-once"), ("sink alo", "at-least-once"), ("sink eo#2", "exactly-once")):
        w = (source().writeStream.format("barrier-hbase").option("hbase.thrift.host", host)
             .option("hbase.thrift.port", str(port)).option("hbase.thrift2.port", str(args.thrift2_port))
             .option("table", f"bench_{uuid.uuid4().hex[:8]}").option("create.table", "true").option("rowkey", "id")
             .option("delivery.guarantee", guarantee).option("commit.table", "sparkbarrier_commits_bench"))
        results[tag] = n / timed(lambda w=w, tag=tag: run(w, tag.replace(" ", "_").replace("#", "")))
    spark.stop()

    print(f"rows={n} columns=10 spark_tasks={args.files}")
    for name, rate in results.items():
        print(f"  {name:<12} {rate:>10,.0f} rows/s")
    eo = max(results["sink eo"], results["sink eo#2"])
    print(f"  task writer / raw client : {results['task writer'] / results['raw client']:.2f}x (target >= 0.9)")
    print(f"  sink eo / foreachBatch   : {eo / results['foreachBatch']:.2f}x")
    print(f"  sink eo / sink alo       : {eo / results['sink alo']:.2f}x (target >= 0.9)")


if __name__ == "__main__":
    main()
