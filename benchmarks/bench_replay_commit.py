"""What a replayed batch's commit costs on a big shared table against a small one (issue 40).

A replay after a driver restart abandons the attempt it finds; before the replayed batch
commits, the driver removes exactly the versions the abandoned attempt noted (no scan of
the table). This measures that commit (``Committer.commit`` of the replay, removal
included) on a table holding ``--big`` cells of another writer against one holding
``--small`` cells, the other writer's cells at timestamps around the attempts' own (as a
major compaction leaves them: one store file spanning every timestamp), side by side in
one run, ``--rounds`` times each. Same batch on both: ``--rows`` keyed rows over
``--tasks`` tasks, abandoned once after every flush, replayed, committed.

    python benchmarks/bench_replay_commit.py --thrift 127.0.0.1:9090 --thrift2 127.0.0.1:9095 \\
        [--big 10000000] [--small 10000] [--rows 2000] [--tasks 2] [--rounds 5]

Prints a table and the ratio big ÷ small of the median commit time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

import pyarrow as pa

from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction
from sparkbarrier.connectors.hbase._options import parse_sink_options
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string())])


def _spark_schema() -> object:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SCHEMA, prefer_timestamp_ntz=False)


def fill(thrift: tuple[str, int], table: str, cells: int) -> float:
    """``cells`` cells of another writer (rows ``other-<n>``, 10 columns of family d, including
    the sink's own qualifiers in other rows), timestamps from 20 minutes before now to 30 s after (HBase refuses cells more than 60 s ahead)."""
    import happybase

    conn = happybase.Connection(*thrift, timeout=120_000)
    started = time.monotonic()
    try:
        t = conn.table(table)
        now = int(time.time() * 1000)
        per_row = 10
        rows = cells // per_row
        chunk = 2000
        chunks = max(1, (rows + chunk - 1) // chunk)
        for i, start in enumerate(range(0, rows, chunk)):
            ts = now - 1_200_000 + (1_230_000 * i) // chunks  # up to 30 s ahead: over the attempts' own
            with t.batch(batch_size=chunk, timestamp=ts) as b:
                for r in range(start, min(rows, start + chunk)):
                    b.put(f"other-{r:09d}".encode(), {**{f"d:c{c}".encode(): b"x" * 16 for c in range(per_row - 2)},
                                                      b"d:v": b"y" * 8, b"d:s": b"z"})
    finally:
        conn.close()
    return time.monotonic() - started


def replay_commit(raw: dict[str, str], rows: list[dict[str, object]], tasks: int, batch: int,
                  plan: int) -> tuple[float, float, int]:
    """One batch abandoned after all its flushes, then replayed and committed: the commit's
    seconds, and the seconds and versions of the previous release's time-range scan."""
    opts = parse_sink_options(raw)
    parts = [rows[i::tasks] for i in range(tasks)]

    def run(plan_id: str) -> list[object]:
        msgs = []
        for p, part in enumerate(parts):
            writer = HBaseTaskWriter(opts, TaskIdentity("bench", batch, p, plan_id))
            writer.begin()
            writer.add(pa.RecordBatch.from_pylist(part, schema=SCHEMA))
            msgs.append(writer.snapshot(final=True))
            writer.close()
        return msgs

    abandoned = run(f"e{plan:019d}")  # the abandoned attempt (its driver died before the commit)
    msgs = run(f"e{plan + 1:019d}")  # the replay
    fn = HBaseSinkFunction()
    fn.start(raw, _spark_schema())
    committer = fn.committer()
    started = time.perf_counter()
    committer.commit(msgs, batch)  # type: ignore[arg-type]
    took = time.perf_counter() - started
    committer.close()
    # What the previous release's rollback read first: every version in the abandoned
    # attempt's time range, from the whole table (read only here; it deleted them all).
    from sparkbarrier.connectors.hbase.client._thrift2 import Thrift2Admin
    from sparkbarrier.connectors.hbase.sink._timestamps import BATCH_SPAN_MS

    base = abandoned[0].base_ms  # type: ignore[attr-defined]
    started = time.perf_counter()
    with Thrift2Admin(opts) as admin:
        found = sum(len(c) for c in admin.versions_in_range(opts.table, [b"d"], base, base + BATCH_SPAN_MS))
    scanned = time.perf_counter() - started
    return took, scanned, found


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--thrift", default="127.0.0.1:9090")
    cli.add_argument("--thrift2", default="127.0.0.1:9095")
    cli.add_argument("--big", type=int, default=10_000_000)
    cli.add_argument("--small", type=int, default=10_000)
    cli.add_argument("--rows", type=int, default=2000)
    cli.add_argument("--tasks", type=int, default=2)
    cli.add_argument("--rounds", type=int, default=5)
    cli.add_argument("--settle", type=float, default=60.0,
                     help="seconds to wait after filling (the region server flushes and compacts the fill)")
    args = cli.parse_args()
    host, port = args.thrift.split(":")
    h2, p2 = args.thrift2.split(":")
    run_id = uuid.uuid4().hex[:8]
    tables = {"small": (f"bench_replay_small_{run_id}", args.small), "big": (f"bench_replay_big_{run_id}", args.big)}
    raws = {}
    for name, (table, cells) in tables.items():
        raw = {"hbase.thrift.host": host, "hbase.thrift.port": port, "hbase.thrift2.host": f"{h2}:{p2}",
               "table": table, "rowkey": "id", "create.table": "true", "sink.id": table,
               "sink.buffer-flush.max-rows": "500"}
        HBaseSinkFunction().validate(raw, _spark_schema())  # creates the table
        took = fill((host, int(port)), table, cells)
        print(f"{name}: {cells:,} cells of another writer in {took:.0f} s", flush=True)
        raws[name] = raw
    time.sleep(args.settle)
    times: dict[str, list[float]] = {"small": [], "big": []}
    scans: dict[str, list[tuple[float, int]]] = {"small": [], "big": []}
    for r in range(args.rounds):
        for name in ("small", "big"):  # side by side, alternating
            rows = [{"id": f"k{i:06d}", "v": r * 1_000_000 + i, "s": f"s{i}"} for i in range(args.rows)]
            took, scanned, found = replay_commit(raws[name], rows, args.tasks, r, 2 * r + 1)
            times[name].append(took)
            scans[name].append((scanned, found))
        print(f"round {r + 1}: small {times['small'][-1] * 1000:.1f} ms, big {times['big'][-1] * 1000:.1f} ms",
              flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("| table | cells of another writer | replay commit, ms (rounds) | median ms |"
          " previous release's range scan, ms (versions in range) |")
    print("| --- | ---: | --- | ---: | --- |")
    for name, (_, cells) in tables.items():
        print(f"| {name} | {cells:,} | {' / '.join(f'{t * 1000:.1f}' for t in times[name])} | "
              f"{med[name] * 1000:.1f} | {' / '.join(f'{t * 1000:.0f} ({n:,})' for t, n in scans[name])} |")
    print(f"big ÷ small (median): {med['big'] / med['small']:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
