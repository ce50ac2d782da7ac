"""The main job: Kafka → barrier-kafka → parse JSON → barrier-hbase (exactly-once), verified.

Run with ``./dev demo`` (starts the devstack first) or directly::

    .venv/bin/python demo/pipeline.py [--seconds 45] [--rate 400] [--trigger "2 seconds"]

Endpoints: ``--bootstrap`` / ``--hbase`` or ``SPARKBARRIER_KAFKA_BOOTSTRAP`` /
``SPARKBARRIER_HBASE_THRIFT``, else the local devstack (started if needed). The HBase
Thrift2 server (``--hbase-thrift2`` or ``SPARKBARRIER_HBASE_THRIFT2``, host:port on the
Thrift host; the devstack's when the devstack is used) is needed: the sink's exactly-once
mode removes the puts of tries Spark did not commit with exact-version deletes and creates
its table with ``KEEP_DELETED_CELLS=TRUE`` through it.

What happens: a new 2-partition topic gets a stream of upserts and deletes over a small
key space (``workload.py``); the streaming query runs for ``--seconds`` with one progress
line per checkpoint; then the producer stops, the query is stopped mid-stream, and the same
query (same checkpoint) drains the rest with ``Trigger.AvailableNow`` -- the way a stopped
barrier query gets its final batch committed to the consumer group. The report checks that
HBase's committed view *and* a plain HBase scan (what any HBase client sees: no extra
columns, deletes applied) equal the produced events applied in Kafka order, and that the
group's offsets equal Spark's last completed checkpoint (never ahead of it). Exit status 0
when every check passes, 1 when one fails, 2 when the run itself could not happen.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import Workload, create_topic, expected_state  # noqa: E402

from sparkbarrier import (  # noqa: E402
    SourceError,
    SparkBarrierError,
    checkpoint_log_status,
    group_status,
    sink_status,
)
from sparkbarrier._endpoints import (  # noqa: E402
    HBASE_ENV,
    HBASE_THRIFT2_ENV,
    KAFKA_ENV,
    parse_hostport,
)
from sparkbarrier.connectors.hbase import DEFAULT_COMMIT_TABLE  # noqa: E402
from sparkbarrier.connectors._kafka_offsets import SourceOffset  # noqa: E402

log = logging.getLogger("sparkbarrier.demo")

EVENT_DDL = "id string, op string, v bigint, city string, ts bigint"
COMMIT_TABLE = DEFAULT_COMMIT_TABLE
FAMILY = b"d"  # the sink's default column family


@dataclass(frozen=True)
class Names:
    topic: str
    group: str
    table: str
    sink_id: str

    @classmethod
    def fresh(cls, prefix: str = "demo") -> Names:
        tag = f"{prefix}_{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}"
        return cls(topic=tag, group=f"{tag}_group", table=tag, sink_id=tag)


def spark_session(master: str = "local[2]", app: str = "sparkbarrier-demo") -> Any:
    """A loopback-only session whose Python workers run this interpreter.

    Spark's own ``format("kafka")`` is on its classpath too (``--source kafka``). The
    driver logs with ``demo/log4j2.properties``, so a run prints only lines a user can
    act on (Spark's start-up notices are not).
    """
    from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.jars", jvm_kafka_jars())
             .config("spark.driver.extraJavaOptions",
                     f"-Dlog4j2.configurationFile={Path(__file__).resolve().parent / 'log4j2.properties'}")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # No register call: the installed pyspark_barrier_* modules make both formats known.
    return spark


def pipeline(spark: Any, bootstrap: str, hbase: tuple[str, int], names: Names, *,
             max_per_trigger: int = 20_000, thrift2_port: int | None = None,
             source: str = "barrier-kafka") -> Any:
    """The streaming DataFrame writer: source → transformation (markers kept) → sink.

    ``source``: ``barrier-kafka`` (commits its group itself), or ``kafka`` -- Spark's own
    source, whose group commits come from :func:`sparkbarrier.commit_kafka_offsets`
    (registered here, before the caller's ``start()``); the sink learns each batch's
    offsets from Spark's offset log either way.

    ``thrift2_port``: the HBase Thrift2 server on ``hbase``'s host, if there is one; the
    sink then creates (or checks) its table with ``KEEP_DELETED_CELLS=TRUE``.
    """
    from pyspark.sql import functions as F

    from sparkbarrier.connectors.hbase import keep_markers

    reader = (spark.readStream.format(source)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", names.topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_per_trigger)))
    if source == "barrier-kafka":
        reader = reader.option("kafka.group.id", names.group)
    else:
        from sparkbarrier import commit_kafka_offsets

        _LISTENERS.append(commit_kafka_offsets(
            spark, names.group, {"kafka.bootstrap.servers": bootstrap}, query_name=names.sink_id))
    raw = reader.load()
    event = F.from_json(F.col("value").cast("string"), EVENT_DDL)
    # keep_markers keeps the _barrier_* columns: the sink flushes at each barrier and
    # records the source offsets of every checkpoint in its commit record.
    rows = keep_markers(raw.withColumn("e", event),
                        F.col("e.id").alias("id"), F.col("e.op").alias("op"),
                        F.col("e.v").alias("v"), F.upper(F.col("e.city")).alias("city"),
                        F.col("partition").alias("src_partition"),
                        F.col("offset").alias("src_offset"))
    writer = rows.writeStream.format("barrier-hbase")
    if thrift2_port is not None:
        writer = writer.option("hbase.thrift2.port", str(thrift2_port))
    return (writer
            .option("hbase.thrift.host", hbase[0]).option("hbase.thrift.port", str(hbase[1]))
            .option("table", names.table).option("create.table", "true")
            .option("rowkey", "id").option("op.column", "op")
            .option("sink.id", names.sink_id).option("commit.table", COMMIT_TABLE)
            .option("delivery.guarantee", "exactly-once")
            .queryName(names.sink_id))


class Progress:
    """Prints one line per completed checkpoint from ``query.recentProgress``.

    ``group lag`` is what Kafka tooling shows: end offset now minus the group's committed
    offset -- it includes the batch that just completed until the next trigger commits it.
    """

    def __init__(self, bootstrap: str, names: Names) -> None:
        self._bootstrap, self._names = bootstrap, names
        self._seen = -1
        self.rows: list[dict[str, Any]] = []

    def _group(self) -> tuple[str, int | None]:
        try:
            group = group_status(self._bootstrap, self._names.group, [self._names.topic])
        except SourceError:  # nothing committed yet
            return "-", None
        return _group_holds(group), group.total_lag

    def poll(self, query: Any) -> None:
        for p in query.recentProgress:
            if p.batchId <= self._seen or not p.sources or not p.numInputRows:
                continue
            self._seen = p.batchId
            src = p.sources[0]
            end = json.loads(src.endOffset) if src.endOffset else None
            # barrier-kafka's offset has a checkpoint id; Spark's own source's has none
            # (commit_kafka_offsets commits the batch id to the group).
            ckpt = (SourceOffset.from_json(end).checkpoint_id
                    if isinstance(end, dict) and "checkpointId" in end else None)
            group_holds, lag = self._group()
            row = {"batch": p.batchId, "checkpoint": ckpt, "rows": p.numInputRows,
                   "rps": p.processedRowsPerSecond, "ms": p.durationMs.get("triggerExecution", 0),
                   "lag": lag, "group_holds": group_holds}
            self.rows.append(row)
            print(f"  batch {row['batch']:>3}  checkpoint {'-' if row['checkpoint'] is None else row['checkpoint']:>3}  "
                  f"{row['rows']:>6} rows  {row['rps']:>7.0f} rec/s  {row['ms']:>5} ms   "
                  f"group: {row['group_holds']:>15}, lag {row['lag']!s:>5}", flush=True)


class Checks:
    """Collects named pass/fail checks for the report."""

    def __init__(self) -> None:
        self.results: list[tuple[str, bool, str]] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.results.append((name, bool(ok), detail))
        print(f"  [{'ok' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail else ""), flush=True)

    @property
    def passed(self) -> bool:
        return all(ok for _, ok, _ in self.results)


def _wait_idle(query: Any, timeout: float) -> None:
    """Wait until no trigger runs, so ``stop()`` does not interrupt a batch (quieter logs)."""
    deadline = time.monotonic() + timeout
    while query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)


def _group_holds(group: Any) -> str:
    """``checkpoint N`` (barrier-kafka) or ``batch N`` (commit_kafka_offsets: Spark's batch id)."""
    if group.last_checkpoint_id is not None:
        return f"checkpoint {group.last_checkpoint_id}"
    return f"batch {group.last_batch_id}" if group.last_batch_id is not None else "-"


def _group_view(bootstrap: str, names: Names) -> tuple[Any, dict[str, int]]:
    group = group_status(bootstrap, names.group, [names.topic])
    return group, group.offsets()


def _committed_view(hbase: tuple[str, int], names: Names) -> dict[str, dict[str, Any]]:
    from sparkbarrier.connectors.hbase import read_committed

    table = read_committed(hbase[0], hbase[1], names.table, sink_id=names.sink_id,
                           commit_table=COMMIT_TABLE)
    return {r.pop("id"): r for r in table.to_pylist()}


def _plain_view(hbase: tuple[str, int], names: Names) -> dict[str, dict[bytes, bytes]]:
    """What any HBase client sees: a plain scan (newest version per cell, deletes applied)."""
    import happybase

    conn = happybase.Connection(hbase[0], hbase[1], timeout=60_000)
    try:
        return {key.decode(): data for key, data in conn.table(names.table).scan()}
    finally:
        conn.close()


def _as_cells(row: dict[str, Any]) -> dict[bytes, bytes]:
    """The cells one expected row must have in HBase: ``d:<column>`` in ``Bytes.toBytes`` form."""
    return {FAMILY + b":v": struct.pack(">q", row["v"]),
            FAMILY + b":city": row["city"].encode(),
            FAMILY + b":src_partition": struct.pack(">i", row["src_partition"]),  # Kafka's int
            FAMILY + b":src_offset": struct.pack(">q", row["src_offset"])}


def _endpoints(args: argparse.Namespace) -> tuple[str, tuple[str, int], int | None]:
    """Kafka bootstrap, HBase Thrift (host, port) and the Thrift2 port."""
    kafka = args.bootstrap or os.environ.get(KAFKA_ENV)
    hbase = args.hbase or os.environ.get(HBASE_ENV)
    thrift2 = args.hbase_thrift2 or os.environ.get(HBASE_THRIFT2_ENV)
    if not (kafka and hbase):
        from sparkbarrier.devstack import Devstack

        endpoints = Devstack().up()
        kafka = kafka or endpoints.kafka_bootstrap
        if not hbase:
            hbase = "%s:%d" % tuple(endpoints.hbase_thrift)
            thrift2 = thrift2 or "%s:%d" % tuple(endpoints.hbase_thrift2)
    host, port = parse_hostport(hbase, "--hbase")
    if not thrift2:
        raise RuntimeError(f"the demo's sink runs exactly once, which needs HBase's Thrift2 server: pass "
                           f"--hbase-thrift2 {host}:<port> or set {HBASE_THRIFT2_ENV}")
    host2, thrift2_port = parse_hostport(thrift2, "--hbase-thrift2")
    if host2 != host:
        raise RuntimeError(f"the Thrift2 server must run on the Thrift host {host}, got {thrift2}")
    return kafka, (host, port), thrift2_port


def run(args: argparse.Namespace) -> int:
    bootstrap, hbase, thrift2_port = _endpoints(args)
    names = Names.fresh()
    ckpt = Path(tempfile.mkdtemp(prefix="sparkbarrier-demo-"))
    started = time.monotonic()
    print(f"sparkbarrier demo: Kafka {bootstrap}, HBase Thrift {hbase[0]}:{hbase[1]} "
          f"(Thrift2 port {thrift2_port})\n"
          f"  topic/table/sink.id {names.topic}, group {names.group}, checkpoint {ckpt}", flush=True)
    create_topic(bootstrap, names.topic, partitions=2)
    workload = Workload(bootstrap, names.topic, rate=args.rate, keys=args.keys)
    spark = spark_session()
    progress = Progress(bootstrap, names)
    checks = Checks()
    try:
        query = (pipeline(spark, bootstrap, hbase, names, thrift2_port=thrift2_port,
                          source=args.source)
                 .option("checkpointLocation", str(ckpt))
                 .trigger(processingTime=args.trigger).start())
        workload.start()
        print(f"streaming for {args.seconds:.0f} s (producing ~{args.rate} events/s):", flush=True)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline and query.isActive:
            progress.poll(query)
            time.sleep(0.5)
        progress.poll(query)
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        events = workload.stop()
        how = "mid-batch" if args.interrupt else "between batches"
        if not args.interrupt:
            _wait_idle(query, timeout=30)
        query.stop()
        progress.poll(query)  # batches that completed while the producer flushed
        print(f"producer stopped after {len(events)} events; query stopped {how}", flush=True)

        last = checkpoint_log_status(str(ckpt)).last_completed
        try:
            stopped_group, group_offsets = _group_view(bootstrap, names)
        except SourceError:  # no checkpoint completed-and-committed yet: nothing committed
            stopped_group, group_offsets = None, {}
        what, done_id = _completed_id(last) if last else ("checkpoint", None)
        held = _held_id(stopped_group, what) if stopped_group is not None else None
        done_offsets = last.offsets if last else {}
        print("\nafter stop (before the final drain):", flush=True)
        checks.check(f"group {what} <= last completed {what}",
                     held is None or (done_id is not None and held <= done_id),
                     f"group {held}, Spark's last completed {done_id}")
        checks.check("group offsets <= last completed offsets",
                     all(off <= done_offsets.get(ch, -1) for ch, off in group_offsets.items()),
                     f"group {group_offsets}, completed {done_offsets}")

        print("\nfinal drain (Trigger.AvailableNow, same checkpoint):", flush=True)
        for listener in _commit_listeners(spark):  # the drain registers its own
            spark.streams.removeListener(listener)
            listener.close()
            _LISTENERS.remove(listener)
        drain = (pipeline(spark, bootstrap, hbase, names, thrift2_port=thrift2_port,
                          source=args.source).option("checkpointLocation", str(ckpt))
                 .trigger(availableNow=True).start())
        if not drain.awaitTermination(args.drain_timeout):
            drain.stop()
            raise RuntimeError(f"the final drain did not finish within {args.drain_timeout} s")
        progress.poll(drain)
        if drain.exception() is not None:
            raise RuntimeError(f"the final drain failed: {drain.exception()}")
        for listener in _commit_listeners(spark):  # the drain's last batch reaches the group
            listener.finish(drain)
        return _verify(bootstrap, hbase, names, str(ckpt), events, checks, started)
    finally:
        workload.stop_quietly()
        for q in spark.streams.active:
            q.stop()
        spark.stop()
        if not args.keep_checkpoint:
            shutil.rmtree(ckpt, ignore_errors=True)


def _completed_id(batch: Any) -> tuple[str, int]:
    """The id the group is committed with for Spark's completed ``batch``: barrier-kafka's
    checkpoint id, or for Spark's own source (no checkpoint id) the batch id, which
    commit_kafka_offsets commits as ``batchId``."""
    if batch.checkpoint_id is not None:
        return "checkpoint", batch.checkpoint_id
    return "batch", batch.batch_id


def _held_id(group: Any, what: str) -> int | None:
    """The group's newest id of that kind (``checkpoint`` or ``batch``)."""
    return group.last_checkpoint_id if what == "checkpoint" else group.last_batch_id


_LISTENERS: list[Any] = []  # commit_kafka_offsets handles of this run (--source kafka)


def _commit_listeners(spark: Any) -> list[Any]:
    return list(_LISTENERS)


def _verify(bootstrap: str, hbase: tuple[str, int], names: Names, ckpt: str, events: list,
            checks: Checks, started: float) -> int:
    print("\nverification:", flush=True)
    log_status = checkpoint_log_status(ckpt)
    last = log_status.last_completed
    group = group_status(bootstrap, names.group, [names.topic])
    sink = sink_status(hbase[0], hbase[1], names.sink_id, COMMIT_TABLE)
    produced_end: dict[str, int] = {}
    for ev in events:
        ch = f"{names.topic}:{ev.partition}"
        produced_end[ch] = max(produced_end.get(ch, 0), ev.offset + 1)
    checks.check("no pending checkpoints left", not log_status.pending,
                 f"{[b.batch_id for b in log_status.pending]}" if log_status.pending else "")
    checks.check("group offsets == last completed checkpoint's offsets",
                 last is not None and group.offsets() == last.offsets, f"{group.offsets()}")
    what, done_id = _completed_id(last) if last is not None else ("checkpoint", None)
    checks.check(f"group {what} id == last completed {what} id",
                 last is not None and _held_id(group, what) == done_id, _group_holds(group))
    checks.check("sink commit covers the same offsets", sink.offsets == group.offsets(),
                 f"sink {sink.offsets}")
    checks.check("everything produced was consumed (lag 0)", group.offsets() == produced_end
                 and group.total_lag == 0, f"produced {produced_end}")
    expected = expected_state(events)
    actual = _committed_view(hbase, names)
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    wrong = sorted(k for k in set(expected) & set(actual) if expected[k] != actual[k])
    checks.check("HBase committed view == events applied in Kafka order",
                 not (missing or extra or wrong),
                 f"{len(actual)} rows ({len(events)} events, "
                 f"{sum(1 for e in events if e.value['op'] == 'delete')} deletes)"
                 + (f"; missing {missing[:5]} extra {extra[:5]} wrong {wrong[:5]}"
                    if missing or extra or wrong else ""))
    plain = _plain_view(hbase, names)
    want_cells = {k: _as_cells(row) for k, row in expected.items()}
    missing = sorted(set(want_cells) - set(plain))
    extra = sorted(set(plain) - set(want_cells))
    wrong = sorted(k for k in set(want_cells) & set(plain) if want_cells[k] != plain[k])
    checks.check("plain HBase scan == events applied in Kafka order (no extra columns)",
                 not (missing or extra or wrong),
                 f"{len(plain)} rows"
                 + (f"; missing {missing[:5]} extra {extra[:5]} wrong "
                    f"{[(k, sorted(plain[k])) for k in wrong[:3]]}" if missing or extra or wrong else ""))
    print(f"\n{'PASSED' if checks.passed else 'FAILED'}: {sum(ok for _, ok, _ in checks.results)}/"
          f"{len(checks.results)} checks, last checkpoint {last.checkpoint_id if last else None} "
          f"(Spark batch {last.batch_id if last else None}), sink seq {sink.seq}, "
          f"total {time.monotonic() - started:.0f} s", flush=True)
    print(f"inspect: python -m sparkbarrier status --group {names.group} --sink-id {names.sink_id}",
          flush=True)
    return 0 if checks.passed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sparkbarrier demo: Kafka → Spark → HBase, exactly once")
    parser.add_argument("--seconds", type=float, default=45, help="streaming time (default %(default)s)")
    parser.add_argument("--rate", type=int, default=400, help="events per second (default %(default)s)")
    parser.add_argument("--keys", type=int, default=500, help="distinct keys (default %(default)s)")
    parser.add_argument("--trigger", default="2 seconds", help="processing-time trigger")
    parser.add_argument("--drain-timeout", type=float, default=120)
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers")
    parser.add_argument("--hbase", help="HBase Thrift1 host:port")
    parser.add_argument("--hbase-thrift2", help="HBase Thrift2 host:port (same host as --hbase)")
    parser.add_argument("--keep-checkpoint", action="store_true")
    parser.add_argument("--source", choices=["barrier-kafka", "kafka"], default="barrier-kafka",
                        help="barrier-kafka, or Spark's own format('kafka') with "
                             "commit_kafka_offsets (default %(default)s)")
    parser.add_argument("--interrupt", action="store_true",
                        help="stop the query mid-batch (Spark logs the aborted batch; the drain replays it)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except (RuntimeError, TimeoutError, OSError, SparkBarrierError) as exc:
        print(f"sparkbarrier demo: the run failed: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
