"""A batch of millions of distinct keys, killed after all its writes, replayed, committed (issue 49).

    .venv/bin/python benchmarks/bench_task_scale.py [--keys 5000000] [--tasks 1] [--max-memory 256mb] \
        [--delete-workers N]

Without Spark: ``--tasks`` ``HBaseTaskWriter``s (as the checkpointed-sink adapter runs them,
one after the other in this process) write ``--keys`` distinct 16-byte binary keys in all,
with a 24-byte value each; the driver "dies" before
the commit; a replay (a new plan) abandons that attempt, writes the batch again above it,
and the driver commits, removing every version the abandoned attempt noted. Printed: each
phase's wall time, the task process's peak RSS growth (``ru_maxrss``) while the task ran,
the spilled runs, the largest row of the commit table (bytes, polled during the run and
after), and the abandoned attempt's versions left (a sample of keys read back: none).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_large_batch import RowWatch  # noqa: E402

from sparkbarrier.connectors.hbase.sink import _buffer  # noqa: E402
from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction  # noqa: E402
from sparkbarrier.connectors.hbase._options import parse_sink_options  # noqa: E402
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity  # noqa: E402

SCHEMA = pa.schema([("id", pa.binary()), ("v", pa.binary())])
CHUNK = 50_000


def batches(keys: int, seed: int) -> Iterator[pa.RecordBatch]:
    import random

    rnd = random.Random(seed)
    for start in range(0, keys, CHUNK):
        n = min(CHUNK, keys - start)
        ids = [rnd.randbytes(12) + i.to_bytes(4, "big") for i in range(start, start + n)]
        yield pa.RecordBatch.from_arrays([pa.array(ids, pa.binary()),
                                          pa.array([b"v%023d" % i for i in range(start, start + n)], pa.binary())],
                                         schema=SCHEMA)


def run_task(opts, plan: str, keys: int, tasks: int = 1) -> tuple[list[object], float, int, int]:  # noqa: ANN001
    spills = []
    spill = _buffer.MutationBuffer._spill

    def counted(self: _buffer.MutationBuffer) -> None:
        spills.append(1)
        spill(self)

    _buffer.MutationBuffer._spill = counted  # type: ignore[method-assign]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    msgs = []
    try:
        per_task = keys // tasks
        for task in range(tasks):
            writer = HBaseTaskWriter(opts, TaskIdentity("bench-q", 0, task, plan))
            try:
                writer.begin()
                for batch in batches(per_task, seed=task + 1):
                    writer.add(batch)
                msgs.append(writer.snapshot(final=True))
            finally:
                writer.close()
    finally:
        _buffer.MutationBuffer._spill = spill  # type: ignore[method-assign]
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return msgs, time.monotonic() - started, grown, len(spills)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=5_000_000)
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--max-memory", default="256mb")
    ap.add_argument("--delete-workers", type=int, default=None,
                    help="threads of the commit's version deletes (default: _version_deletes.WORKERS; 1 = serial)")
    args = ap.parse_args()
    if args.delete_workers is not None:
        from sparkbarrier.connectors.hbase.client import _version_deletes

        _version_deletes.WORKERS = args.delete_workers

    from sparkbarrier.devstack import Devstack

    ep = Devstack().up()
    table = f"bench_scale_{uuid.uuid4().hex[:6]}"
    raw = {"hbase.thrift.host": ep.hbase_thrift[0], "hbase.thrift.port": str(ep.hbase_thrift[1]),
           "hbase.thrift2.port": str(ep.hbase_thrift2[1]), "table": table, "rowkey": "id",
           "create.table": "true", "sink.id": table, "commit.table": f"{table}_commits",
           "sink.buffer.max-memory": args.max_memory}
    from pyspark.sql.pandas.types import from_arrow_schema

    fn = HBaseSinkFunction()
    fn.validate(raw, from_arrow_schema(SCHEMA))
    fn.start(raw, from_arrow_schema(SCHEMA))
    opts = parse_sink_options(raw)
    from sparkbarrier.connectors.hbase.client._version_deletes import WORKERS

    out: dict[str, object] = {"keys": args.keys, "tasks": args.tasks, "max_memory": args.max_memory,
                              "delete_workers": WORKERS}
    with RowWatch(ep.hbase_thrift[0], ep.hbase_thrift[1], f"{table}_commits") as watch:
        first, out["first_try_s"], out["first_rss_growth_kib"], out["first_spills"] = run_task(
            opts, "e0000000000000000001@%d" % (time.time() * 1000), args.keys, args.tasks)
        # the driver dies here, after all writes, before the commit; the replay is a new plan
        replay, out["replay_s"], out["replay_rss_growth_kib"], out["replay_spills"] = run_task(
            opts, "e0000000000000000002@%d" % (time.time() * 1000), args.keys, args.tasks)
        started = time.monotonic()
        committer = fn.committer()
        try:
            record = committer.commit(replay, 0)
        finally:
            committer.close()
        out["commit_with_removal_s"] = round(time.monotonic() - started, 1)
    out["commit_table_largest_row_bytes"] = watch.largest
    out["committed_seq"] = getattr(record, "seq", None)
    out["abandoned_removed_attempt"] = getattr(replay[0], "abandoned", None) == [getattr(first[0], "base_ms", None)]
    import happybase

    conn = happybase.Connection(*ep.hbase_thrift)
    try:
        sample = next(batches(min(args.keys // args.tasks, CHUNK), seed=1)).column("id").to_pylist()[:200]
        t = conn.table(table)
        versions = [len(t.cells(k, b"d:v", versions=10)) for k in sample]
        out["versions_per_sampled_key"] = sorted(set(versions))
    finally:
        conn.close()
    for k in ("first_try_s", "replay_s"):
        out[k] = round(float(out[k]), 1)  # type: ignore[arg-type]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
