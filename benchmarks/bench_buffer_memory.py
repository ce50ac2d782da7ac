"""The write task's buffer against its memory bound (issue 57): peak RSS, runs, open files, the estimate.

    .venv/bin/python benchmarks/bench_buffer_memory.py [--case big-rows|hot-key|estimate|tiny ...]

Without Spark or HBase: one ``MutationBuffer`` per case, each in a fresh process, fed
generated rows as the writer feeds them (``upsert`` with the writer's row size), flushed
at the end into a connection that drops what it is sent (what is measured is the
buffer: holding, spilling, merging, building the write calls). Printed, one JSON line per case:

* ``big-rows``: 3,000 distinct keys of one 100,000-byte value (286 MiB), max-memory 8 MiB:
  the process's peak RSS above what it held before the first row (``ru_maxrss``, from /proc);
* ``hot-key``: 1,000,000 rows, nine in ten of them one hot key with 20 eight-byte columns,
  the tenth each a new key with one 8-byte value, max-memory 8 MiB: the runs spilled (the
  hot key's net change is one row; the 100,000 cold keys need two or three runs);
* ``estimate``: 100,000 distinct keys of 20 eight-byte columns held (no spill): the RSS they
  add, and what ``tracemalloc`` counts for them (in a second buffer), against the buffer's estimate;
* ``tiny``: max-memory 1 byte (below the option's minimum, given to the buffer directly),
  5,000 distinct keys: runs and the most file descriptors open at once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from typing import Any

CASES = ("big-rows", "hot-key", "estimate", "tiny")


class Drop:
    """Stands in for the connection: every write call is dropped."""

    def __init__(self) -> None:
        self.client = self
        self.calls = 0

    def call(self, fn: Any) -> Any:
        return fn(self)

    def mutateRowsTs(self, table: bytes, mutations: list[Any], ts: int, attrs: Any) -> None:  # noqa: ARG002
        self.calls += 1


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


class FdWatch(threading.Thread):
    """The most file descriptors this process had open, polled every 2 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.most = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.002):
            self.most = max(self.most, len(os.listdir("/proc/self/fd")))


def _row_size(key: bytes, values: list[bytes]) -> int:
    """What the writer passes as a row's size (``_writer._row_sizes``)."""
    return len(values) * 16 + 16 + len(key) + sum(map(len, values))


def child(case: str) -> dict[str, object]:
    from sparkbarrier.connectors.hbase.sink._buffer import MutationBuffer
    from sparkbarrier.connectors.hbase.sink._timestamps import TaskClock

    columns = [b"d:c%02d" % i for i in range(20)]
    max_memory = {"big-rows": 8 << 20, "hot-key": 8 << 20, "estimate": 1 << 40, "tiny": 1}[case]
    buf = MutationBuffer(Drop(), "t", TaskClock(0, 0), delete_columns=tuple(columns), max_rows=1000,  # type: ignore[arg-type]
                         max_size=2 << 20, max_memory=max_memory)
    out: dict[str, object] = {"case": case, "max_memory": max_memory}
    watch = FdWatch()
    watch.start()
    base_rss = _rss_kib()
    started = time.monotonic()
    if case == "big-rows":
        for i in range(3000):
            key = b"%016d" % i
            value = os.urandom(100_000)
            buf.upsert(key, [(b"d:v", value)], [], _row_size(key, [value]))
    elif case == "hot-key":
        for i in range(1_000_000):
            if i % 10 == 0:
                key, value = b"%016d" % i, i.to_bytes(8, "big")
                buf.upsert(key, [(b"d:v", value)], [], _row_size(key, [value]))
                continue
            values = [(i * 20 + c).to_bytes(8, "big") for c in range(20)]
            buf.upsert(b"hot", list(zip(columns, values, strict=True)), [], _row_size(b"hot", values))
    elif case == "estimate":
        import gc
        import tracemalloc

        def fill(into: MutationBuffer) -> None:
            for i in range(100_000):
                key = b"%016d" % i
                values = [(i * 20 + c).to_bytes(8, "big") for c in range(20)]
                into.upsert(key, list(zip(columns, values, strict=True)), [], _row_size(key, values))

        fill(buf)  # what the process's RSS grows by
        out["rss_growth_bytes"] = (_rss_kib() - base_rss) * 1024
        out["estimate_bytes"] = buf._held
        out["rss_over_estimate"] = round(int(out["rss_growth_bytes"]) / buf._held, 2)  # type: ignore[call-overload]
        buf.close()
        buf._changes = {}
        gc.collect()
        again = MutationBuffer(Drop(), "t", TaskClock(0, 0), delete_columns=tuple(columns), max_rows=1000,  # type: ignore[arg-type]
                               max_size=2 << 20, max_memory=max_memory)
        tracemalloc.start()  # what Python allocates for them (a second buffer: tracemalloc's own records cost RSS)
        before = tracemalloc.get_traced_memory()[0]
        fill(again)
        out["traced_bytes"] = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        out["traced_over_estimate"] = round(int(out["traced_bytes"]) / again._held, 2)  # type: ignore[call-overload]
    else:
        for i in range(5000):
            key = b"%016d" % i
            buf.upsert(key, [(b"d:v", b"x" * 24)], [], _row_size(key, [b"x" * 24]))
    out["runs_before_flush"] = buf.spilled_runs
    buf.flush(final=True)
    buf.close()
    watch.stop.set()
    watch.join()
    out["seconds"] = round(time.monotonic() - started, 1)
    out["spilled_runs"] = buf.spilled_runs
    out["most_open_fds"] = watch.most
    out["rss_before_kib"] = base_rss
    out["peak_rss_growth_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append", choices=CASES)
    ap.add_argument("--child", choices=CASES)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)), flush=True)
        return
    for case in args.case or CASES:
        done = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True)
        print(done.stdout.strip() or json.dumps({"case": case, "failed": done.stderr.strip().splitlines()[-3:]}),
              flush=True)


if __name__ == "__main__":
    main()
