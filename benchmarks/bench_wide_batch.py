"""One batch of thousands of write tasks, committed (issue 57: the width of a real cluster).

    .venv/bin/python benchmarks/bench_wide_batch.py [--tasks 10000] [--threads 8] [--rows-per-task 2]

Without Spark: ``--tasks`` ``HBaseTaskWriter``s, as the checkpointed-sink adapter runs them,
``--threads`` at a time (executors), each writing ``--rows-per-task`` keyed rows (keys
shared by neighbouring tasks, as ``minPartitions`` splits share them), with
``sink.max-write-tasks`` set to ``--tasks``; then the driver's commit. Printed: the write
phase and the commit's wall time, the batch's timestamp span, how far its last cell was
ahead of the wall clock at the commit, and that the committed view holds every key.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from sparkbarrier.connectors.hbase._options import parse_sink_options
from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rows-per-task", type=int, default=2)
    args = ap.parse_args()

    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkbarrier.connectors.hbase import read_committed
    from sparkbarrier.devstack import Devstack

    ep = Devstack().up()
    table = f"bench_wide_{uuid.uuid4().hex[:6]}"
    raw = {"hbase.thrift.host": ep.hbase_thrift[0], "hbase.thrift.port": str(ep.hbase_thrift[1]),
           "hbase.thrift2.port": str(ep.hbase_thrift2[1]), "table": table, "rowkey": "id",
           "create.table": "true", "sink.id": table, "commit.table": f"{table}_commits",
           "sink.max-write-tasks": str(args.tasks)}
    fn = HBaseSinkFunction()
    fn.validate(raw, from_arrow_schema(SCHEMA))
    fn.start(raw, from_arrow_schema(SCHEMA))
    opts = parse_sink_options(raw)
    plan = "e0000000000000000001@%d" % (time.time() * 1000)

    def task(p: int) -> object:
        rows = [{"id": f"k{(p * args.rows_per_task + i) // (args.rows_per_task + 1)}", "v": p}
                for i in range(args.rows_per_task)]
        writer = HBaseTaskWriter(opts, TaskIdentity("bench-wide", 0, p, plan))
        try:
            writer.begin()
            writer.add(pa.RecordBatch.from_pylist(rows, schema=SCHEMA))
            return writer.snapshot(final=True)
        finally:
            writer.close()

    started = time.monotonic()
    with ThreadPoolExecutor(args.threads) as pool:
        msgs = list(pool.map(task, range(args.tasks)))
    written = time.monotonic() - started
    started = time.monotonic()
    committer = fn.committer()
    try:
        record = committer.commit(msgs, 0)
    finally:
        committer.close()
    commit_s = time.monotonic() - started
    now = int(time.time() * 1000)
    rows = read_committed(ep.hbase_thrift[0], ep.hbase_thrift[1], table, sink_id=table,
                          commit_table=f"{table}_commits").num_rows
    keys = len({(p * args.rows_per_task + i) // (args.rows_per_task + 1)
                for p in range(args.tasks) for i in range(args.rows_per_task)})
    print(json.dumps({"tasks": args.tasks, "threads": args.threads, "write_s": round(written, 1),
                      "commit_s": round(commit_s, 2), "committed_seq": record.seq if record else None,
                      "span_ms": record.ts_hi - record.ts_lo if record else None,
                      "last_cell_ahead_of_clock_at_commit_ms": (record.ts_hi - now) if record else None,
                      "committed_rows": rows, "keys": keys}), flush=True)


if __name__ == "__main__":
    main()
