"""One large batch: barrier-kafka → barrier-hbase against barrier-kafka → a bare put-only sink.

    .venv/bin/python benchmarks/bench_large_batch.py [--rows 1000000] [--partitions 4] [--rounds 2]
    .venv/bin/python benchmarks/bench_large_batch.py --rows 10000000 --partitions 200 --kill-and-replay

Why: issue 49 measured one batch of a million rows at 2.2× a bare put sink, and 65 MiB of
flush notes in one row of the commit table. Each round runs, in one Spark session
(``local[2]``, one task per Kafka partition), one ``availableNow`` batch of the whole topic
(16-byte random binary keys, 24-byte values) into:

* ``put``: a Python streaming sink that puts every row into HBase through Thrift1
  (happybase batches of 1,000, no commit protocol): the least any Python sink writing these
  rows does;
* ``hbase``: ``barrier-hbase``, exactly once (Thrift2 set, the defaults otherwise).

The order alternates per round (put, hbase, then hbase, put), and each case starts once the
machine is quiet (``settle``: the previous round's dropped tables are flushed on close).
Printed per case: the batch's
``addBatch`` and ``triggerExecution`` (ms), the ratio of the sink's to the put sink's in the
same round, and, for the sink, the largest row of the commit table (bytes, polled while
the batch runs) and its note rows.

``--kill-and-replay`` (issue 49's scale check): the sink's batch runs in a child driver that
the fault hook kills after every task wrote and before the commit; this process then
replays the batch from the same checkpoint (a new plan: the killed attempt is abandoned and
its noted puts removed) and commits. Printed: the replay's times, the commit table's largest
row, and how many versions the table's first 200 keys hold.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_small_batches import session  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000})
    for i in range(records):
        p.produce(topic, key=os.urandom(16), value=b"v%023d" % i, partition=i % partitions)
        if i % 50_000 == 0:
            p.poll(0)
    p.flush(120)


def register_put_sink(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class _PutWriter(DataSourceStreamArrowWriter):
        def __init__(self, options: dict) -> None:
            self._host, self._port, self._table = options["host"], int(options["port"]), options["table"]

        def write(self, iterator):
            import happybase

            conn = happybase.Connection(self._host, self._port)
            try:
                with conn.table(self._table).batch(batch_size=1000) as batch:
                    for data in iterator:
                        for key, value in zip(data.column("id").to_pylist(), data.column("v").to_pylist()):
                            batch.put(key, {b"d:v": value})
            finally:
                conn.close()
            return WriterCommitMessage()

        def commit(self, messages, batchId) -> None:
            pass

        def abort(self, messages, batchId) -> None:
            pass

    class _PutSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-large-put-sink"

        def streamWriter(self, schema, overwrite):
            return _PutWriter(self.options)

    spark.dataSource.register(_PutSink)


class RowWatch:
    """Polls the commit table's largest row (bytes) while the batch runs."""

    def __init__(self, host: str, port: int, table: str) -> None:
        self.host, self.port, self.table = host, port, table
        self.largest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import happybase

        conn = happybase.Connection(self.host, self.port)
        try:
            while not self._stop.wait(0.5):
                self.sample(conn)
            self.sample(conn)
        finally:
            conn.close()

    def sample(self, conn: Any) -> None:
        if self.table.encode() not in conn.tables():  # created at the query's start
            return
        for _, data in conn.table(self.table).scan(batch_size=50):
            self.largest = max(self.largest, sum(len(k) + len(v) for k, v in data.items()))

    def __enter__(self) -> RowWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def run_case(spark: Any, ep: Any, case: str, topic: str, *, table: str | None = None,
             checkpoint: str | None = None) -> dict[str, Any]:
    import happybase

    table = table or f"bench_large_{case}_{uuid.uuid4().hex[:6]}"
    df = (spark.readStream.format("barrier-kafka").option("kafka.bootstrap.servers", ep.kafka_bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("kafka.group.id", table).load()
          .selectExpr("key AS id", "value AS v"))
    if case == "put":
        conn = happybase.Connection(*ep.hbase_thrift)
        try:
            conn.create_table(table, {"d": {}})
        finally:
            conn.close()
        writer = (df.writeStream.format("bench-large-put-sink").option("host", ep.hbase_thrift[0])
                  .option("port", str(ep.hbase_thrift[1])).option("table", table))
    else:
        writer = (df.writeStream.format("barrier-hbase").option("hbase.thrift.host", ep.hbase_thrift[0])
                  .option("hbase.thrift.port", str(ep.hbase_thrift[1]))
                  .option("hbase.thrift2.port", str(ep.hbase_thrift2[1])).option("table", table)
                  .option("create.table", "true").option("rowkey", "id").option("sink.id", table)
                  .option("commit.table", f"{table}_commits"))
    started = time.monotonic()
    watch = RowWatch(ep.hbase_thrift[0], ep.hbase_thrift[1], f"{table}_commits") if case == "hbase" else None
    query = writer.option("checkpointLocation", checkpoint or tempfile.mkdtemp()).trigger(availableNow=True).start()
    if watch is not None:
        with watch:
            query.awaitTermination(1800)
    else:
        query.awaitTermination(1800)
    wall = time.monotonic() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    done = [p for p in query.recentProgress if p["numInputRows"] > 0]
    out: dict[str, Any] = {"rows": sum(p["numInputRows"] for p in done), "wall_s": round(wall, 1),
                           "addBatch_ms": sum(p["durationMs"].get("addBatch", 0) for p in done),
                           "trigger_ms": sum(p["durationMs"]["triggerExecution"] for p in done)}
    if watch is not None:
        out["commit_table_largest_row_bytes"] = watch.largest
        conn = happybase.Connection(*ep.hbase_thrift)
        try:
            out["note_rows_after"] = sum(1 for _ in conn.table(f"{table}_commits").scan(row_prefix=b"\x01"))
        finally:
            conn.close()
    out["tables"] = [table, f"{table}_commits"] if case == "hbase" else [table]  # what this case created
    return out


def drop_tables(ep: Any, *tables: str) -> None:
    """Drop a round's tables: a million rows each stay in the memstores otherwise, and the
    devstack's standalone HBase (2 GiB heap) ran out of heap in the fourth round."""
    import happybase

    conn = happybase.Connection(*ep.hbase_thrift)
    try:
        present = set(conn.tables())
        for name in tables:
            if name.encode() in present:
                conn.delete_table(name, disable=True)
    finally:
        conn.close()


def settle(limit_s: float = 90.0) -> float:
    """Wait (bounded) until the machine is quiet again; returns the seconds waited.

    Dropping a round's two million-row tables disables them, and closing their regions
    flushes the memstores, then the OS writes the files back: the case that ran next paid
    for it (2026-11-29: every round with barrier-hbase first was 1.59-2.10x, every other
    0.93-1.35x). So before each timed case: ``sync``, then CPU samples until two in a row
    are under 30 % busy.
    """
    def busy() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    started = time.monotonic()
    os.sync()
    quiet = 0
    before = busy()
    while quiet < 2 and time.monotonic() - started < limit_s:
        time.sleep(0.5)
        now = busy()
        quiet = quiet + 1 if (now[0] - before[0]) < 0.3 * max(1, now[1] - before[1]) else 0
        before = now
    return round(time.monotonic() - started, 1)


def versions_of_first_keys(ep: Any, table: str, n: int = 200) -> list[int]:
    """How many versions of ``d:v`` the table's first ``n`` rows hold (1 each: nothing left of a try)."""
    import happybase

    conn = happybase.Connection(*ep.hbase_thrift)
    try:
        t = conn.table(table)
        return [len(t.cells(key, b"d:v", versions=10)) for key, _ in t.scan(limit=n)]
    finally:
        conn.close()


def kill_and_replay(ep: Any, topic: str, partitions: int) -> None:
    """The batch in a child driver killed after every task wrote, before the commit
    (``sink.after_flush_before_commit``); then its replay in this process commits it."""
    import subprocess

    from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV

    table = f"bench_large_replay_{uuid.uuid4().hex[:6]}"
    checkpoint = tempfile.mkdtemp()
    env = {**os.environ, FAULT_ENV: "sink.after_flush_before_commit@1", FAULT_STATE_DIR_ENV: tempfile.mkdtemp()}
    started = time.monotonic()
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", topic, table, checkpoint],
                           env=env, check=False)
    first = round(time.monotonic() - started, 1)
    if child.returncode == 0:
        raise RuntimeError("the first driver was not killed at sink.after_flush_before_commit")
    spark = session("")
    replay = run_case(spark, ep, "hbase", topic, table=table, checkpoint=checkpoint)
    spark.stop()
    print(json.dumps({"kill_and_replay": True, "partitions": partitions, "first_driver_killed_after_s": first,
                      **{f"replay_{k}": v for k, v in replay.items()},
                      "versions_of_200_keys": sorted(set(versions_of_first_keys(ep, table)))}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup-rows", type=int, default=20_000,
                    help="one unreported round of each case first (JIT, Python workers)")
    ap.add_argument("--kill-and-replay", action="store_true",
                    help="instead: the sink's batch killed before its commit, then replayed (issue 49, item 3)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # internal: topic, table, checkpoint
    args = ap.parse_args()

    from sparkbarrier.devstack import Devstack

    ep = Devstack().up()
    if args.child:
        topic, table, checkpoint = args.child
        run_case(session(""), ep, "hbase", topic, table=table, checkpoint=checkpoint)
        return
    if args.kill_and_replay:
        topic = f"bench_large_{uuid.uuid4().hex[:6]}"
        produce(ep.kafka_bootstrap, topic, args.rows, args.partitions)
        kill_and_replay(ep, topic, args.partitions)
        return
    spark = session("")
    register_put_sink(spark)
    if args.warmup_rows:
        warm = f"bench_large_warm_{uuid.uuid4().hex[:6]}"
        produce(ep.kafka_bootstrap, warm, args.warmup_rows, args.partitions)
        for case in ("put", "hbase"):
            drop_tables(ep, *run_case(spark, ep, case, warm)["tables"])
    topic = f"bench_large_{uuid.uuid4().hex[:6]}"
    produce(ep.kafka_bootstrap, topic, args.rows, args.partitions)
    for round_ in range(1, args.rounds + 1):
        order = ("put", "hbase") if round_ % 2 else ("hbase", "put")
        results = {}
        for case in order:
            waited = settle()
            results[case] = {**run_case(spark, ep, case, topic), "settled_s": waited}
        drop_tables(ep, *(name for result in results.values() for name in result.pop("tables")))
        ratio = results["hbase"]["addBatch_ms"] / results["put"]["addBatch_ms"]
        print(json.dumps({"round": round_, "rows": args.rows, "partitions": args.partitions, **results,
                          "ratio_addBatch_hbase_to_put": round(ratio, 2),
                          "ratio_trigger_hbase_to_put": round(results["hbase"]["trigger_ms"]
                                                              / results["put"]["trigger_ms"], 2)}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
