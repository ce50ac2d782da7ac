"""Gateway scale-out and TLS cost (``--gateways`` of bench_hbase_sink.py / bench_hbase_read.py).

Against the devstack (``Devstack().up(all_gateways=True)`` starts the second and the TLS
gateway if they are off; the gateways' pids come from ``Devstack().status()``): ``--tasks``
processes write (or read the committed view of) N rows of 10 columns with the sink's
task writer / reader, spread by partition over

* ``1 gateway``    -- every task through the first Thrift1 gateway (the baseline);
* ``2 gateways``   -- ``hbase.thrift.host`` = both gateways (task i starts at gateway i mod 2);
* ``TLS gateway``  -- the HTTPS gateway (``hbase.thrift.tls``, CA-verified).

For each: rows/s (ratio to the baseline, same run) and the CPU each gateway JVM spent
per row (``/proc/<pid>/stat`` utime+stime), which is what tells how many gateways a
target rate needs: on this shared 2-core machine wall-clock rates mostly show the
contention, the CPU per row does not.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
from typing import Any

import happybase

from _hbase_rows import make_rows, spark_schema_json, write_task
from sparkbarrier.connectors.hbase import parse_sink_options
from sparkbarrier.connectors.hbase._options import parse_read_options
from sparkbarrier.connectors.hbase.sink._commit_table import ensure_commit_table
from sparkbarrier.connectors.hbase.sink._committer import Committer
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase.read._reader import find_commit, iter_committed
from sparkbarrier.connectors.hbase.sink._writer import TaskIdentity
from sparkbarrier.devstack import Devstack

COMMITS = "sparkbarrier_commits_bench"
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _configs() -> tuple[dict[str, dict[str, str]], dict[str, int]]:
    stack = Devstack()
    ep = stack.up(all_gateways=True)
    assert ep.hbase_thrift_tls is not None
    pids = {p.name: p.pid for p in stack.status().processes if p.name.startswith("hbase-thrift") and p.pid}
    (a, pa_), (b, pb) = ep.hbase_thrift_gateways[:2]
    tls_host, tls_port = ep.hbase_thrift_tls
    thrift2 = "%s:%d" % ep.hbase_thrift2  # exactly once needs Thrift2; the commit's deletes, not the data path
    assert ep.hbase_thrift2_tls is not None
    configs = {
        "1 gateway": {"hbase.thrift.host": f"{a}:{pa_}", "hbase.thrift2.host": thrift2},
        "2 gateways": {"hbase.thrift.host": f"{a}:{pa_},{b}:{pb}", "hbase.thrift2.host": thrift2},
        "TLS gateway": {"hbase.thrift.host": f"{tls_host}:{tls_port}", "hbase.thrift.tls": "true",
                        "hbase.thrift.tls.ca": str(ep.hbase_thrift_tls_ca),
                        "hbase.thrift2.host": "%s:%d" % ep.hbase_thrift2_tls},
    }
    return configs, {k: v for k, v in pids.items() if not k.startswith("hbase-thrift2")}


def _conn(hostport: str) -> HBaseConnection:
    host, port = hostport.rsplit(":", 1)
    return HBaseConnection(connection_options(host=host, port=int(port)))


def _new_table(first: str) -> str:
    host, port = first.split(",")[0].rsplit(":", 1)
    name = f"bench_gw_{uuid.uuid4().hex[:8]}"
    conn = happybase.Connection(host, int(port))
    conn.create_table(name, {"d": {"max_versions": 10}})
    conn.close()
    return name


def _write_task(raw: dict[str, str], i: int, data: Any) -> Any:
    return write_task(parse_sink_options(raw), TaskIdentity("bench", 0, i), data.to_batches(max_chunksize=10_000))


def _read_task(raw: dict[str, str], i: int, record: Any, key_range: tuple[bytes, bytes]) -> int:
    conn = HBaseConnection(parse_read_options(raw), i)
    try:
        return sum(b.num_rows for b in iter_committed(conn, record, key_range))
    finally:
        conn.close()


def run(kind: str, rows: int, tasks: int) -> None:
    configs, pids = _configs()
    data = make_rows(rows)
    plain = configs["1 gateway"]["hbase.thrift.host"]
    ensure_commit_table(_conn(plain), COMMITS)
    per = -(-rows // tasks)
    slices = [data.slice(i * per, per) for i in range(tasks)]
    bounds = [f"row{i * per:09d}".encode() for i in range(tasks)] + [b""]
    ranges = [(bounds[i], bounds[i + 1]) for i in range(tasks)]
    read_table = None
    if kind == "read":  # one committed table, read through every configuration
        read_table = _new_table(plain)
        raw = {**configs["1 gateway"], "table": read_table, "rowkey": "id", "commit.table": COMMITS,
               "sink.id": read_table}
        with multiprocessing.get_context("fork").Pool(tasks) as pool:
            msgs = pool.starmap(_write_task, [(raw, i, s) for i, s in enumerate(slices)])
        conn = _conn(plain)
        Committer(conn, COMMITS, read_table, fenced=True, schema_json=spark_schema_json(data.schema), rowkey="id",
                  columns=[[f, "d", f] for f in data.schema.names[1:]]).commit(msgs, 0)
        record = find_commit(conn, COMMITS, read_table, read_table)
        conn.close()
    results: dict[str, tuple[float, dict[str, float]]] = {}
    for name in ("1 gateway", "2 gateways", "TLS gateway", "1 gateway#2", "2 gateways#2"):
        cfg = configs[name.split("#")[0]]
        before = {p: _cpu_s(pid) for p, pid in pids.items()}
        started = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(tasks) as pool:
            if kind == "write":
                raw = {**cfg, "table": _new_table(plain), "rowkey": "id", "commit.table": COMMITS}
                pool.starmap(_write_task, [(raw, i, s) for i, s in enumerate(slices)])
            else:
                raw = {**cfg, "table": str(read_table), "commit.table": COMMITS, "sink.id": str(read_table)}
                got = sum(pool.starmap(_read_task, [(raw, i, record, r) for i, r in enumerate(ranges)]))
                assert got == rows, (got, rows)
        wall = time.perf_counter() - started
        results[name] = (rows / wall, {p: (_cpu_s(pid) - before[p]) / rows * 1e6 for p, pid in pids.items()})
    base = max(results["1 gateway"][0], results["1 gateway#2"][0])
    print(f"{kind}: rows={rows} columns=10 tasks={tasks} (gateway CPU in µs per row)")
    for name, (rate, cpu) in results.items():
        per_gw = "  ".join(f"{p}={us:.1f}" for p, us in sorted(cpu.items()))
        print(f"  {name:<13} {rate:>9,.0f} rows/s  x{rate / base:.2f}  {per_gw}")
