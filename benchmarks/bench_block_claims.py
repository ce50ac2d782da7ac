"""What claiming a timestamp block costs a write task (``connectors/hbase/_blocks.py``).

    .venv/bin/python benchmarks/bench_block_claims.py [--host 127.0.0.1 --port 9090] \\
        [--batches 200] [--rows 300] [--rounds 3]

Why: since a task's timestamp block follows its input (so a replay under another Spark
task id rewrites the same cells), every exactly-once write task fingerprints its first
flush and records a claim with one ``checkAndPut`` before writing. That is the only new
work per task and batch; this measures it at small batches, where it weighs most.

Side by side in one run, alternating per round: ``claims`` (the shipped writer) and
``no claims`` (the same writer with the claim replaced by block = partition id, the old
layout). Each batch is one exactly-once write task of ``--rows`` 10-column rows through
the devstack's Thrift gateway, then its commit. Reported: median ms per batch (task +
commit) and the difference; the fingerprint's own time over one flush is printed
separately (pure CPU).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import happybase

from _hbase_rows import SCHEMA, make_rows, spark_schema_json, write_task
from sparkbarrier.connectors.hbase import parse_sink_options
from sparkbarrier.connectors.hbase._blocks import fingerprint
from sparkbarrier.connectors.hbase._commit_table import ensure_commit_table
from sparkbarrier.connectors.hbase._committer import Committer
from sparkbarrier.connectors.hbase._connection import HBaseConnection
from sparkbarrier.connectors.hbase._timestamps import TaskClock
from sparkbarrier.connectors.hbase._writer import HBaseTaskWriter, TaskIdentity


def run(host: str, port: int, batches: int, rows: int, claims: bool) -> list[float]:
    table = f"bench_claims_{uuid.uuid4().hex[:8]}"
    conn = happybase.Connection(host, port)
    conn.create_table(table, {"d": {"max_versions": 10}})
    conn.close()
    opts = parse_sink_options({"hbase.thrift.host": host, "hbase.thrift.port": str(port), "table": table,
                               "rowkey": "id", "commit.table": "sparkbarrier_commits_bench", "sink.id": table})
    ensure_commit_table(HBaseConnection(host, port), opts.commit_table)
    columns = [[f.name, "d", f.name] for f in SCHEMA if f.name != "id"]
    data = make_rows(rows).to_batches()
    original = HBaseTaskWriter._claim
    if not claims:
        HBaseTaskWriter._claim = lambda self, _fp: TaskClock(self._plan.base_ms, self._id.partition_id)  # type: ignore[method-assign]
    try:
        times = []
        for batch in range(batches):
            start = time.perf_counter()
            msg = write_task(opts, TaskIdentity("bench", batch, 0), data)
            committer = Committer(HBaseConnection(host, port), opts.commit_table, table, fenced=True,
                                  schema_json=spark_schema_json(SCHEMA), rowkey="id", columns=columns)
            committer.commit([msg], batch)
            committer.close()
            times.append((time.perf_counter() - start) * 1000)
        return times
    finally:
        HBaseTaskWriter._claim = original  # type: ignore[method-assign]


def fingerprint_ms(rows: int) -> float:
    changes = [(f"row{i:09d}".encode(), False, set(),
                {f"d:c{k}".encode(): f"value-{k}-{i}".encode() for k in range(9)}) for i in range(rows)]
    start = time.perf_counter()
    for _ in range(20):
        fingerprint(iter(changes))
    return (time.perf_counter() - start) * 1000 / 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9090)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    run(args.host, args.port, 20, args.rows, True)  # warm-up: gateway JIT, connections
    medians: dict[str, list[float]] = {"claims": [], "no claims": []}
    for r in range(args.rounds):
        order = ("claims", "no claims") if r % 2 == 0 else ("no claims", "claims")
        for name in order:
            times = run(args.host, args.port, args.batches, args.rows, name == "claims")
            medians[name].append(statistics.median(times))
            print(f"round {r + 1} {name:<9}: median {statistics.median(times):6.2f} ms per batch "
                  f"(p90 {statistics.quantiles(times, n=10)[-1]:6.2f})", flush=True)
    with_, without = statistics.median(medians["claims"]), statistics.median(medians["no claims"])
    print(f"{args.rows} rows x 10 columns per batch, one task, {args.batches} batches x {args.rounds} rounds")
    print(f"  claims    {with_:6.2f} ms/batch (median of round medians)")
    print(f"  no claims {without:6.2f} ms/batch")
    print(f"  claim cost {with_ - without:+.2f} ms per task and batch ({with_ / without:.3f}x)")
    print(f"  fingerprint of one {args.rows}-row flush: {fingerprint_ms(args.rows):.3f} ms (CPU)")


if __name__ == "__main__":
    main()
