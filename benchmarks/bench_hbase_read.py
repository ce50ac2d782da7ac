"""Read rate of the committed view vs. a raw happybase scan of the same table.

One table of N rows × 10 columns (the shape of ``bench_hbase_sink.py``), pre-split into
``--regions`` regions through Thrift2 and written and committed by the sink's own task
writer. Measured side by side in one run, each as rows/s and client CPU µs per row:

* ``raw scan``        -- happybase ``Table.scan(batch_size=1000)`` over the whole table,
  values left as bytes: the ceiling for one Python reader (one core);
* ``committed view``  -- :func:`iter_committed` over the same table in the same process
  (time-range scan + Arrow decoding of every column): the per-core rate of our reader;
* ``spark read``      -- ``spark.read.format("barrier-hbase")`` with ``local[2]``: one
  partition per region, summed with ``count()`` after a full decode (``cache``-free).

Ratio: committed view / raw scan (target >= 0.8 per core). Run:
``python benchmarks/bench_hbase_read.py --host 127.0.0.1 --port 9090 --thrift2-port 9095``.
``--gateways [--tasks K]``: 1 vs 2 Thrift gateways and TLS vs plaintext instead (``_gateway_bench``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import happybase

from _hbase_rows import make_rows, spark_schema_json, write_task
from sparkbarrier.connectors.hbase import parse_sink_options
from sparkbarrier.connectors.hbase.sink._commit_table import ensure_commit_table
from sparkbarrier.connectors.hbase.sink._committer import Committer
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase.read._reader import find_commit, iter_committed
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells, Thrift2Admin
from sparkbarrier.connectors.hbase.sink._writer import TaskIdentity

COMMITS = "sparkbarrier_commits_bench"


def fill(host: str, port: int, thrift2_port: int, n: int, regions: int) -> str:
    table = f"bench_read_{uuid.uuid4().hex[:8]}"
    splits = [f"row{(n * i // regions):09d}".encode() for i in range(1, regions)]
    with Thrift2Admin(connection_options({"hbase.thrift2.host": f"{host}:{thrift2_port}"})) as admin:
        admin.create_table(table, {"d": FamilySpec(max_versions=10, keep_deleted_cells=KeepDeletedCells.TRUE)},
                           split_keys=splits)
    opts = parse_sink_options({"hbase.thrift.host": host, "hbase.thrift.port": str(port), "table": table,
                               "hbase.thrift2.host": f"{host}:{thrift2_port}",
                               "rowkey": "id", "commit.table": COMMITS, "sink.id": table,
                               "sink.buffer-flush.max-rows": "5000"})
    conn = HBaseConnection(connection_options(host=host, port=port))
    ensure_commit_table(conn, COMMITS)
    data = make_rows(n)
    msg = write_task(opts, TaskIdentity("bench", 0, 0), data.to_batches(max_chunksize=10_000))
    columns = [[f, "d", f] for f in data.schema.names[1:]]
    Committer(conn, COMMITS, table, fenced=True, schema_json=spark_schema_json(data.schema), rowkey="id",
              columns=columns).commit([msg], 0)
    conn.close()
    return table


def measure(fn: object) -> tuple[float, float, int]:
    """(seconds, client CPU seconds, rows)."""
    wall, cpu = time.perf_counter(), time.process_time()
    rows = fn()  # type: ignore[operator]
    return time.perf_counter() - wall, time.process_time() - cpu, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9090)
    ap.add_argument("--thrift2-port", type=int, default=9095)
    ap.add_argument("--regions", type=int, default=2)
    ap.add_argument("--gateways", action="store_true",
                    help="instead: 1 vs 2 Thrift gateways and TLS, with gateway CPU per row (benchmarks/_gateway_bench.py)")
    ap.add_argument("--tasks", type=int, default=2, help="with --gateways: parallel task processes")
    args = ap.parse_args()
    if args.gateways:
        from _gateway_bench import run

        run("read", args.rows, args.tasks)
        return
    host, port, n = args.host, args.port, args.rows
    table = fill(host, port, args.thrift2_port, n, args.regions)

    def raw() -> int:
        conn = happybase.Connection(host, port)
        count = sum(1 for _ in conn.table(table).scan(batch_size=1000))
        conn.close()
        return count

    def view() -> int:
        conn = HBaseConnection(connection_options(host=host, port=port))
        record = find_commit(conn, COMMITS, table, table)
        count = sum(b.num_rows for b in iter_committed(conn, record))
        conn.close()
        return count

    results = {}
    for name, fn in (("raw scan", raw), ("committed view", view), ("raw scan#2", raw), ("committed view#2", view)):
        results[name] = measure(fn)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    from sparkbarrier.connectors.hbase import register

    register(spark)
    df = (spark.read.format("barrier-hbase").option("hbase.thrift.host", host).option("hbase.thrift.port", str(port))
          .option("table", table).option("sink.id", table).option("commit.table", COMMITS).load())
    results["spark read"] = measure(lambda: df.selectExpr("sum(length(s0)) + sum(i0) as x").collect() and n)
    partitions = df.rdd.getNumPartitions()
    spark.stop()

    print(f"rows={n} columns=10 regions={args.regions} spark_partitions={partitions}")
    for name, (wall, cpu, rows) in results.items():
        assert rows == n, (name, rows)
        cpu_note = f"{cpu / rows * 1e6:6.1f} µs client CPU/row" if name != "spark read" else "(workers)"
        print(f"  {name:<17} {rows / wall:>10,.0f} rows/s  {cpu_note}")
    raw_best = max(n / results[k][0] for k in ("raw scan", "raw scan#2"))
    view_best = max(n / results[k][0] for k in ("committed view", "committed view#2"))
    print(f"  committed view / raw scan (one core each): {view_best / raw_best:.2f}x (target >= 0.8)")
    print(f"  spark read ({partitions} partitions) / raw scan: {n / results['spark read'][0] / raw_best:.2f}x")


if __name__ == "__main__":
    main()
