"""Per-batch time of an aggregation into HBase: update mode through foreachBatch vs complete mode.

A file stream of ``(user, amount)`` rows, ``groupBy(user).agg(count, sum)``, one file per
micro-batch (``maxFilesPerTrigger=1``): the first file holds every key once (the state:
``--keys`` keys), each later one ``--changes`` rows over random keys. Side by side in one
run, for each state size, on fresh tables and checkpoints:

* ``update``   -- ``outputMode("update").foreachBatch(sparkbarrier.hbase_batch_writer(...))``:
  each batch writes the keys it changed;
* ``complete`` -- ``outputMode("complete").format("barrier-hbase")``: each batch writes the
  whole aggregate.

Per batch after the first: Spark's ``triggerExecution`` time from the query's progress
(planning, the aggregation, the write and the commit). Run:
``python benchmarks/bench_aggregation.py --host 127.0.0.1 --port 9090 --thrift2-port 9095
[--keys 10000,100000] [--changes 1000] [--batches 8] [--rounds 2]``. A first query warms the
session up (Python workers, JIT) and is not reported.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([("user", pa.string()), ("amount", pa.int64())])


def write_input(folder: Path, keys: int, changes: int, batches: int, seed: int = 7) -> None:
    folder.mkdir(parents=True)
    rnd = random.Random(seed)
    files = [[(f"u{k:06d}", 1) for k in range(keys)]]
    files += [[(f"u{rnd.randrange(keys):06d}", rnd.randrange(100)) for _ in range(changes)] for _ in range(batches)]
    for i, rows in enumerate(files):
        path = folder / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist([{"user": u, "amount": a} for u, a in rows], schema=SCHEMA), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def run(spark: Any, mode: str, folder: Path, hbase: dict[str, str], work: Path) -> list[float]:
    """Seconds per micro-batch (``triggerExecution``), batch 0 first."""
    from pyspark.sql import functions as F

    import sparkbarrier

    table = f"bench_agg_{mode}_{uuid.uuid4().hex[:6]}"
    options = {**hbase, "table": table, "rowkey": "user", "sink.id": table, "create.table": "true"}
    counts = (spark.readStream.schema("user string, amount bigint").option("maxFilesPerTrigger", 1)
              .parquet(str(folder)).groupBy("user").agg(F.count("*").alias("n"), F.sum("amount").alias("total")))
    writer = counts.writeStream.option("checkpointLocation", str(work / f"ckpt-{table}")).trigger(availableNow=True)
    if mode == "update":
        writer = writer.outputMode("update").foreachBatch(sparkbarrier.hbase_batch_writer(options))
    else:
        writer = writer.outputMode("complete").format("barrier-hbase").options(**options)
    query = writer.start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{mode}: {query.exception()}")
    return [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress
            if p.get("numInputRows", 0) > 0]


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--host", default="127.0.0.1")
    cli.add_argument("--port", type=int, default=9090)
    cli.add_argument("--thrift2-port", type=int, default=9095)
    cli.add_argument("--keys", default="10000,100000")
    cli.add_argument("--changes", type=int, default=1000)
    cli.add_argument("--batches", type=int, default=8)
    cli.add_argument("--rounds", type=int, default=2, help="rounds per state size, alternating the order")
    args = cli.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import sparkbarrier

    spark = (SparkSession.builder.master("local[2]").appName("bench-aggregation")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    sparkbarrier.register(spark)
    hbase = {"hbase.thrift.host": args.host, "hbase.thrift.port": str(args.port),
             "hbase.thrift2.port": str(args.thrift2_port)}
    print(f"changes per batch: {args.changes}; batches after the first: {args.batches}; "
          f"time per batch = Spark's triggerExecution")
    print("| keys of state | mode | first batch (s) | later batches: median (min–max) s | complete ÷ update |")
    print("| ---: | --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="bench-agg-") as tmp:
        write_input(Path(tmp) / "warm", 1000, 100, 2)
        for mode in ("update", "complete"):  # warm-up, not reported
            run(spark, mode, Path(tmp) / "warm", hbase, Path(tmp))
        for keys in (int(k) for k in args.keys.split(",")):
            folder = Path(tmp) / f"in-{keys}"
            write_input(folder, keys, args.changes, args.batches)
            for round_ in range(args.rounds):
                run_round(spark, keys, folder, hbase, Path(tmp), reverse=round_ % 2 == 1)
    spark.stop()
    return 0


def run_round(spark: Any, keys: int, folder: Path, hbase: dict[str, str], tmp: Path, *, reverse: bool) -> None:
    """Both modes on the same input; the second round of a size runs them in the other order."""
    medians: dict[str, float] = {}
    for mode in (("complete", "update") if reverse else ("update", "complete")):
        started = time.monotonic()
        times = run(spark, mode, folder, hbase, tmp)
        later = times[1:]
        medians[mode] = statistics.median(later)
        ratio = f"{medians['complete'] / medians['update']:.1f}×" if len(medians) == 2 else ""
        print(f"| {keys:,} | {mode} | {times[0]:.2f} | {medians[mode]:.2f} ({min(later):.2f}–"
              f"{max(later):.2f}) | {ratio} |  <!-- {len(times)} batches, {time.monotonic() - started:.0f} s -->",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
