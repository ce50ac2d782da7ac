"""barrier-kafka (every executor client) next to Spark's JVM Kafka source and the raw
clients, on the same topic, in one run: records/s, CPU per record, Python worker RSS.

    python benchmarks/bench_kafka_source.py --records 3000000 \
        --bootstrap 127.0.0.1:9092 [--spark-kafka-jars a.jar,b.jar,...] [--rounds 2]

Produces N records of ``--value-bytes`` bytes on 2 partitions, then measures:

* raw native / raw confluent / raw kafka-python -- one process draining both
  partitions (assign + seek; the native fetcher one partition after the other), and
  one process per partition in 2 processes ("x2": what Spark's local[2] parallelism
  can reach at best); CPU from the drain processes' rusage. "raw native" is the
  compiled fetcher handing out Arrow buffers, without Spark;
* barrier (native)       -- ``format("barrier-kafka")``, the default executor client
  (``kafkaConsumer.client=auto`` resolves to it where the module is built);
* barrier (confluent)    -- the same with ``kafkaConsumer.client=confluent``;
* barrier (kafka-python) -- the same with ``kafkaConsumer.client=kafka-python``;
* Spark JVM              -- ``format("kafka")`` (spark-sql-kafka-0-10);
* transfer floor         -- a Python source yielding one pre-built Arrow batch of the
  same rows again and again (:func:`register_transfer_floor`): what handing rows to
  Spark costs any Python data source, with no Kafka at all.

Spark queries run ``Trigger.AvailableNow`` into the ``noop`` sink on ``local[2]``, timed
from ``start()`` to termination (planning included; session start-up and one warm-up query
per reader on a small topic excluded). CPU of a Spark query is the CPU the Spark JVM and
all its descendant processes (Python workers, the streaming planner process) spent while
it ran, from /proc. Peak RSS is sampled every 50 ms over the Python worker processes:
the largest single worker and the largest sum. The broker's CPU is not counted (it
serves every reader the same bytes). ``--rounds`` repeats the Spark queries, so a shared
machine's noise shows; ratios are computed within a round. ``--warmup-rounds`` first runs
every reader over the full topic unmeasured, for steady-state (JIT-warm) numbers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass

PARTITIONS = 2
WARMUP_RECORDS = 50_000
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    name: str
    records_per_s: float
    cpu_s_per_m: float
    jvm_cpu_s_per_m: float | None = None
    worker_rss_mb: float | None = None  # largest single Python worker
    workers_rss_mb: float | None = None  # largest sum over Python workers
    listener_ms_per_event: float | None = None  # commit listener, measured inside it


def produce(bootstrap: str, topic: str, records: int, value_bytes: int) -> float:
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}},
                        wait_for_metadata=True)
    admin.close()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": 1,
                         "batch.size": 1024 * 1024, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * value_bytes
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush()
    return records / (time.perf_counter() - t0)


# -- raw clients ---------------------------------------------------------------------

def _drain_kafka_python(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, float]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_bytes=64 * 1024 * 1024,
                             max_partition_fetch_bytes=16 * 1024 * 1024,
                             max_poll_records=10_000, receive_buffer_bytes=4 * 1024 * 1024)
    tps = [KafkaTP(topic, p) for p in partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    cpu0, count = _cpu_self(), 0
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for batch in consumer.poll(timeout_ms=200, max_records=10_000).values():
            count += len(batch)
    cpu = _cpu_self() - cpu0
    consumer.close()
    return count, cpu


def _drain_confluent(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, float]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unjoined",
                         "enable.auto.commit": False, "fetch.max.bytes": 32 * 1024 * 1024,
                         "max.partition.fetch.bytes": 8 * 1024 * 1024,
                         "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 32 * 1024,
                         "queued.min.messages": 1_000_000})  # as the reader's defaults
    ends = {p: consumer.get_watermark_offsets(ConfluentTP(topic, p), timeout=30)[1]
            for p in partitions}
    consumer.assign([ConfluentTP(topic, p, 0) for p in partitions])
    cpu0, count, total = _cpu_self(), 0, sum(ends.values())
    while count < total:
        msgs = consumer.consume(num_messages=10_000, timeout=0.2)
        count += sum(1 for m in msgs if m.error() is None)
    cpu = _cpu_self() - cpu0
    consumer.close()
    return count, cpu


def _drain_native(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, float]:
    import pyarrow as pa

    from sparkbarrier.connectors.kafka.reader._rdkafka_arrow import Fetcher

    config = [("bootstrap.servers", bootstrap), ("group.id", "bench-unjoined"),
              ("enable.auto.commit", "false"), ("fetch.max.bytes", str(32 * 1024 * 1024)),
              ("max.partition.fetch.bytes", str(8 * 1024 * 1024)), ("fetch.wait.max.ms", "100"),
              ("queued.max.messages.kbytes", str(32 * 1024)),
              ("queued.min.messages", "1000000")]  # as the reader's defaults
    cpu0, count = _cpu_self(), 0
    for p in partitions:
        fetcher = Fetcher(config, topic, p, False)
        end = fetcher.watermarks(30_000)[2]
        fetcher.assign(0)
        while fetcher.position() < end or fetcher.rows:
            fetcher.fetch(10_000 - fetcher.rows, end, 200)
            if fetcher.rows >= 10_000 or fetcher.position() >= end:
                n, _, value, *_ = fetcher.take()
                pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(value[1]),
                                                       pa.py_buffer(value[2])])
                count += n
        fetcher.close()
    return count, _cpu_self() - cpu0


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raw_drain(drain, name: str, bootstrap: str, topic: str, records: int,
              processes: int) -> Result:
    t0 = time.perf_counter()
    if processes == 1:
        count, cpu = drain(bootstrap, topic, list(range(PARTITIONS)))
    else:
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            parts = pool.starmap(drain, [(bootstrap, topic, [p]) for p in range(PARTITIONS)])
        count, cpu = sum(c for c, _ in parts), sum(c for _, c in parts)
    elapsed = time.perf_counter() - t0
    assert count == records, (name, count, records)
    return Result(name, records / elapsed, cpu / records * 1e6)


# -- Spark ---------------------------------------------------------------------------

def _proc_cpu(pid: int) -> float | None:
    """utime + stime of a process (all its threads) in seconds; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid``. A JVM forks from many threads, and /proc lists a
    child under the thread that forked it, so every task's list is read."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids: list[int] = []
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
        out += kids
        todo += kids
    return out


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class TreeMonitor:
    """CPU of the Spark JVM and its descendants; peak RSS of the Python descendants.

    Per process, the first and the last CPU reading are kept (sampled every 50 ms), so a
    worker that exits during the query still counts up to its last sample. Reaped
    children's CPU cannot be used instead: PySpark's daemon ignores SIGCHLD, so its
    workers' CPU never reaches its ``cutime``.
    """

    def __init__(self, jvm_pid: int) -> None:
        self.jvm = jvm_pid
        self.peak_one = self.peak_sum = 0.0
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _read(self, baseline: bool) -> None:
        kids = _children(self.jvm)
        rss = [_rss_mb(p) for p in kids]
        with self._lock:
            for pid in [self.jvm, *kids]:
                cpu = _proc_cpu(pid)
                if cpu is None:
                    continue
                # a process first seen after the baseline started during the query
                self._first.setdefault(pid, cpu if baseline else 0.0)
                self._last[pid] = cpu
            if rss:
                self.peak_one = max(self.peak_one, max(rss))
                self.peak_sum = max(self.peak_sum, sum(rss))

    def cpu(self) -> tuple[float, float]:
        """(JVM, its descendants) CPU seconds since the monitor started."""
        self._read(baseline=False)
        with self._lock:
            spent = {pid: self._last[pid] - self._first[pid] for pid in self._last}
        jvm = spent.pop(self.jvm, 0.0)
        return jvm, sum(spent.values())

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._read(baseline=False)

    def __enter__(self) -> TreeMonitor:
        self._read(baseline=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def spark_session(kafka_package: str | None, kafka_jars: str | None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("bench-kafka-source")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "3g")
               .config("spark.sql.shuffle.partitions", "2"))
    if kafka_jars:
        builder = builder.config("spark.jars", kafka_jars)
    elif kafka_package:
        builder = builder.config("spark.jars.packages", kafka_package)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def register_transfer_floor(spark, value_bytes: int) -> None:
    """``format("bench-transfer-floor")``: Spark's Python-source transfer alone.

    A streaming source whose tasks yield one pre-built Arrow batch (barrier-kafka's
    default schema, ``arrowBatchSize`` rows, ``--value-bytes`` values) over and over: no
    Kafka, no decoding, nothing built per batch. Its CPU per record is what any Python
    data source pays to hand Spark these rows (the Python worker's Arrow IPC plus the
    JVM's Arrow-to-row work) -- the floor under barrier-kafka on this path.
    """
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.pandas.types import to_arrow_schema

    from sparkbarrier.connectors.kafka import source_schema

    class _Slice(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class _Reader(DataSourceStreamReader):
        def __init__(self, total: int) -> None:
            self.total = total

        def initialOffset(self) -> dict:
            return {"o": 0}

        def latestOffset(self) -> dict:
            return {"o": self.total}

        def partitions(self, start: dict, end: dict) -> list:
            rows = end["o"] - start["o"]
            return [_Slice(rows // PARTITIONS + (i < rows % PARTITIONS))
                    for i in range(PARTITIONS)] if rows else []

        def read(self, partition: _Slice):
            schema = to_arrow_schema(source_schema(False, False), timezone="UTC")
            n = 10_000
            columns = {"key": pa.array([b"k%d" % i for i in range(n)], pa.binary()),
                       "value": pa.array([b"x" * value_bytes] * n, pa.binary()),
                       "topic": pa.array(["bench_topic"] * n, pa.string()),
                       "partition": pa.array([0] * n, pa.int32()),
                       "offset": pa.array(range(n), pa.int64()),
                       "timestamp": pa.array([1_700_000_000_000_000] * n, pa.int64()).cast(
                           schema.field("timestamp").type),
                       "timestampType": pa.array([0] * n, pa.int32())}
            batch = pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
            left = partition.rows
            while left > 0:
                yield batch if left >= n else batch.slice(0, left)
                left -= n

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-transfer-floor"

        def schema(self):
            return source_schema(False, False)

        def streamReader(self, schema):
            return _Reader(int(self.options["records"]))

    spark.dataSource.register(_Source)


def spark_run(spark, name: str, fmt: str, options: dict[str, str], records: int,
              sink: str = "noop") -> Result:
    """One AvailableNow query; ``options["_commits"]`` adds commit_kafka_offsets' listener.

    ``sink``: ``noop``, or ``parquet`` (``from_json`` over a JSON document built from
    each record's key and value, written as Parquet -- a realistic light pipeline).
    """
    options = dict(options)
    commits = options.pop("_commits", None)
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    handle = None
    if commits:
        from sparkbarrier import commit_kafka_offsets

        handle = commit_kafka_offsets(spark, commits, options)
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    with tempfile.TemporaryDirectory() as ckpt, TreeMonitor(jvm_pid) as mon:
        t0 = time.perf_counter()
        df = reader.load()
        if sink == "parquet":
            from pyspark.sql import functions as F

            doc = F.concat(F.lit('{"k":"'), F.col("key").cast("string"), F.lit('","v":"'),
                           F.col("value").cast("string"), F.lit('","n":42}'))
            df = df.select(F.from_json(doc, "k string, v string, n long").alias("j")) \
                .select("j.*")
            writer = df.writeStream.format("parquet").option("path", os.path.join(ckpt, "out"))
        else:
            writer = df.writeStream.format("noop")
        query = (writer.option("checkpointLocation", os.path.join(ckpt, "c"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        elapsed = time.perf_counter() - t0
        jvm, py = mon.cpu()
        rows = sum(p["numInputRows"] for p in query.recentProgress)
    listener_ms = None
    if handle is not None:
        assert handle.wait_for(query.lastProgress["batchId"], 60), "last batch not committed"
        spark.streams.removeListener(handle)
        handle.close()
        st = handle.stats()
        listener_ms = st["listener_s_total"] / max(st["events"], 1) * 1e3
        print(f"    {name}: listener {listener_ms:.3f} ms/event (max "
              f"{st['listener_s_max'] * 1e3:.3f} ms) over {st['events']} events "
              f"({len(query.recentProgress)} batches), {st['commits_succeeded']} commits, "
              f"{st['commits_failed']} failed")
    # barrier-kafka adds one marker row per partition and batch
    assert rows >= records, (fmt, rows, records)
    return Result(name, records / elapsed, (jvm + py) / records * 1e6, jvm / records * 1e6,
                  mon.peak_one if fmt != "kafka" else None,
                  mon.peak_sum if fmt != "kafka" else None, listener_ms)


def sasl_ssl_options(manifest_path: str | None) -> dict[str, str]:
    """Spark-style options for the devstack's SASL_SSL listener, as the super user (the
    benchmark's topics are not under the ACL'd prefix). The password stays in memory."""
    import json

    if not manifest_path:
        raise SystemExit("--sasl-ssl needs the devstack's security manifest "
                         "(SPARKBARRIER_KAFKA_SECURITY)")
    m = json.loads(open(manifest_path).read())
    return {"kafka.bootstrap.servers": m["sasl_ssl"], "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": m["mechanism"],
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule"
                                      f' required username="admin" password="{m["users"]["admin"]}";',
            "kafka.ssl.truststore.location": m["ca"]["jks"], "kafka.ssl.truststore.type": "JKS",
            "kafka.ssl.truststore.password": m["store_password"]}


def _print(results: list[Result]) -> None:
    print(f"  {'reader':<24} {'records/s':>11} {'CPU-s/M':>8} {'of it JVM':>9} "
          f"{'worker RSS':>10} {'workers RSS':>11}")
    for r in results:
        jvm = f"{r.jvm_cpu_s_per_m:9.2f}" if r.jvm_cpu_s_per_m is not None else " " * 9
        one = f"{r.worker_rss_mb:7.0f} MB" if r.worker_rss_mb else " " * 10
        all_ = f"{r.workers_rss_mb:8.0f} MB" if r.workers_rss_mb else " " * 11
        print(f"  {r.name:<24} {r.records_per_s:>11,.0f} {r.cpu_s_per_m:>8.2f} {jvm} {one} {all_}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--bootstrap", default=os.environ.get("SPARKBARRIER_KAFKA_BOOTSTRAP"))
    parser.add_argument("--spark-kafka-version", default=None,
                        help="spark-sql-kafka-0-10 version (default: the pyspark version)")
    parser.add_argument("--spark-kafka-jars", default=None,
                        help="comma-separated local jars for the built-in source (instead of "
                             "resolving --spark-kafka-version through spark.jars.packages)")
    parser.add_argument("--skip-builtin", action="store_true")
    parser.add_argument("--sinks", default="noop",
                        help="comma-separated: noop, parquet (from_json + Parquet)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0,
                        help="maxOffsetsPerTrigger of the JVM paths (several batches, so the "
                             "commit listener runs several times); 0: one batch")
    parser.add_argument("--skip-raw", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the Spark queries")
    parser.add_argument("--no-transfer-floor", dest="transfer_floor", action="store_false",
                        help="skip the Python-source transfer floor (pre-built Arrow batches)")
    parser.add_argument("--warmup-rounds", type=int, default=0,
                        help="full-size unmeasured rounds of every reader before round 1")
    parser.add_argument("--clients", default="native,confluent,kafka-python",
                        help="barrier-kafka executor clients to run (kafkaConsumer.client)")
    parser.add_argument("--sasl-ssl", action="store_true",
                        help="also read over the devstack's SASL_SSL (SCRAM-SHA-512) listener: "
                             "barrier-kafka's default client and Spark's JVM source, options "
                             "written as for Spark (JKS truststore)")
    args = parser.parse_args()
    args.security_manifest = os.environ.get("SPARKBARRIER_KAFKA_SECURITY")
    if not args.bootstrap or (args.sasl_ssl and not args.security_manifest):
        from sparkbarrier.devstack import Devstack

        endpoints = Devstack().up()
        args.bootstrap = args.bootstrap or endpoints.kafka_bootstrap
        args.security_manifest = endpoints.env().get("SPARKBARRIER_KAFKA_SECURITY")

    topic = f"bench_{uuid.uuid4().hex[:8]}"
    print(f"producing {args.records:,} x {args.value_bytes} B to {topic} ...", flush=True)
    print(f"  produce  {produce(args.bootstrap, topic, args.records, args.value_bytes):>12,.0f} rec/s")
    warm_topic = topic + "_warmup"
    produce(args.bootstrap, warm_topic, WARMUP_RECORDS, args.value_bytes)
    try:
        _measure(args, topic, warm_topic)
    finally:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
        admin.delete_topics([topic, warm_topic])  # do not leave gigabytes on a shared broker
        admin.close()


def _measure(args: argparse.Namespace, topic: str, warm_topic: str) -> None:
    raw: list[Result] = []
    if not args.skip_raw:
        for drain, name in ((_drain_native, "raw native"), (_drain_confluent, "raw confluent"),
                            (_drain_kafka_python, "raw kafka-python")):
            for procs in (1, PARTITIONS):
                label = name + (f" x{procs}" if procs > 1 else "")
                raw.append(raw_drain(drain, label, args.bootstrap, topic, args.records, procs))
                print(f"  {label:<24} {raw[-1].records_per_s:>11,.0f} rec/s", flush=True)

    import pyspark

    builtin = not args.skip_builtin
    package = None
    if builtin and not args.spark_kafka_jars:
        version = args.spark_kafka_version or pyspark.__version__
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
    spark = spark_session(package, args.spark_kafka_jars if builtin else None)
    from sparkbarrier.connectors.kafka import register

    register(spark)
    common = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": topic,
              "startingOffsets": "earliest"}
    readers = [(f"barrier ({client})", "barrier-kafka", {"kafkaConsumer.client": client})
               for client in args.clients.split(",")]
    if builtin:
        jvm_opts = ({"maxOffsetsPerTrigger": str(args.max_offsets_per_trigger)}
                    if args.max_offsets_per_trigger else {})
        readers.append(("Spark JVM", "kafka", jvm_opts))
        readers.append(("Spark JVM + commits", "kafka",
                        {**jvm_opts, "_commits": f"bench-{topic}-jvm"}))
    if args.sasl_ssl:
        secured = sasl_ssl_options(args.security_manifest)
        readers.append(("barrier (auto) SASL_SSL", "barrier-kafka",
                        {**secured, "kafkaConsumer.client": "auto"}))
        if builtin:
            readers.append(("Spark JVM SASL_SSL", "kafka", secured))
    if args.transfer_floor:
        register_transfer_floor(spark, args.value_bytes)
        readers.append(("transfer floor", "bench-transfer-floor", {"records": str(args.records)}))
    # Warm-up on a small topic: JVM JIT and Python worker start-up (~10 s on 2 cores) are
    # paid once per session, not per query; measured runs should not carry them.
    for name, fmt, extra in readers:
        opts = {**common, **extra, "subscribe": warm_topic}
        if fmt == "barrier-kafka":
            opts["commitOffsets"] = "false"
        elif fmt == "bench-transfer-floor":
            opts["records"] = str(WARMUP_RECORDS)
        try:
            spark_run(spark, name, fmt, opts, WARMUP_RECORDS)
        except Exception as exc:  # reported below when the measured run fails too
            print(f"  {name} warm-up failed: {str(exc).splitlines()[0][:200]}")
    # Full-size unmeasured rounds: the JVM source's JIT keeps improving over the first few
    # million records (measured: 3.5 -> 1.6-2.0 CPU-s/M over four rounds), so a long-running
    # stream is compared only after --warmup-rounds of every reader.
    overhead: dict[str, list[tuple[float, float, float]]] = {}  # sink -> per round
    for round_ in range(1 - args.warmup_rounds, args.rounds + 1):
        if round_ <= 0:
            for name, fmt, extra in readers:
                opts = {**common, **extra, "commitOffsets": "false"} if fmt == "barrier-kafka" \
                    else {**common, **extra}
                spark_run(spark, name, fmt, opts, args.records)
            print(f"warm-up round {round_ + args.warmup_rounds} done", flush=True)
            continue
        # The JVM source with and without the listener swap places every round, so neither
        # always runs first (a cold cache or a neighbour's burst would bias one of them).
        ordered = readers if round_ % 2 else _swap_jvm_pair(readers)
        for sink in args.sinks.split(","):
            results = list(raw) if round_ == 1 and sink == "noop" else []
            load = os.getloadavg()
            for name, fmt, extra in ordered:
                if sink != "noop" and fmt == "bench-transfer-floor":
                    continue
                opts = {**common, **extra}
                if fmt == "barrier-kafka":
                    opts["kafka.group.id"] = \
                        f"bench-{topic}-{round_}-{sink}-{extra['kafkaConsumer.client']}"
                if "_commits" in opts:
                    opts["_commits"] += f"-{round_}-{sink}"
                try:
                    results.append(spark_run(spark, name, fmt, opts, args.records, sink))
                except Exception as exc:  # report and go on: the other numbers still stand
                    print(f"  {name} failed: {str(exc).splitlines()[0][:300]}")
            after = os.getloadavg()
            print(f"round {round_}, sink {sink} (load average 1/5/15 min: before "
                  f"{load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, after "
                  f"{after[0]:.2f}/{after[1]:.2f}/{after[2]:.2f}):")
            _print(results)
            by_name = {r.name: r for r in results}
            _ratios(by_name)
            listened, alone = by_name.get("Spark JVM + commits"), by_name.get("Spark JVM")
            if listened and alone:
                overhead.setdefault(sink, []).append(
                    (alone.records_per_s / listened.records_per_s,
                     listened.cpu_s_per_m / alone.cpu_s_per_m,
                     listened.listener_ms_per_event or 0.0))
    spark.stop()
    _overhead_summary(overhead)


def _swap_jvm_pair(readers: list) -> list:
    names = [r[0] for r in readers]
    if "Spark JVM" not in names or "Spark JVM + commits" not in names:
        return readers
    out = list(readers)
    i, j = names.index("Spark JVM"), names.index("Spark JVM + commits")
    out[i], out[j] = out[j], out[i]
    return out


def _overhead_summary(overhead: dict[str, list[tuple[float, float, float]]]) -> None:
    """The listener's overhead over all measured rounds: time and CPU ratios to the JVM
    source alone in the same round (> 1 = slower / more CPU with the listener)."""
    import statistics

    for sink, rows in overhead.items():
        time_r, cpu_r, ms = ([r[i] for r in rows] for i in range(3))
        print(f"listener overhead, sink {sink}, {len(rows)} rounds: wall time "
              f"{statistics.median(time_r):.3f}x median (min {min(time_r):.3f}, max "
              f"{max(time_r):.3f}); CPU per record {statistics.median(cpu_r):.3f}x median "
              f"(min {min(cpu_r):.3f}, max {max(cpu_r):.3f}); listener "
              f"{statistics.median(ms):.3f} ms/event median (max {max(ms):.3f})")
    print(f"load average at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")


def _ratios(by_name: dict[str, Result]) -> None:
    floor, jvm = by_name.get("transfer floor"), by_name.get("Spark JVM")
    listened = by_name.get("Spark JVM + commits")
    if listened and jvm:
        print(f"  Spark JVM + commits / Spark JVM: "
              f"{listened.records_per_s / jvm.records_per_s:.3f}x records/s, "
              f"{listened.cpu_s_per_m / jvm.cpu_s_per_m:.3f}x CPU per record (listener overhead)")
    if floor and jvm:
        print(f"  transfer floor / Spark JVM: {floor.records_per_s / jvm.records_per_s:.2f}x "
              f"records/s, {floor.cpu_s_per_m / jvm.cpu_s_per_m:.2f}x CPU per record")
    secured, plain = by_name.get("barrier (auto) SASL_SSL"), by_name.get("barrier (native)")
    jvm_secured = by_name.get("Spark JVM SASL_SSL")
    for a, b in ((secured, plain), (jvm_secured, jvm), (secured, jvm_secured)):
        if a and b:
            print(f"  {a.name} / {b.name}: {a.records_per_s / b.records_per_s:.2f}x records/s, "
                  f"{a.cpu_s_per_m / b.cpu_s_per_m:.2f}x CPU per record")
    for fast_name in ("barrier (native)", "barrier (confluent)"):
        fast = by_name.get(fast_name)
        for other in ("Spark JVM", "transfer floor", "barrier (confluent)",
                      "barrier (kafka-python)"):
            if fast and other in by_name and other != fast_name:
                base = by_name[other]
                print(f"  {fast_name} / {other}: {fast.records_per_s / base.records_per_s:.2f}x "
                      f"records/s, {fast.cpu_s_per_m / base.cpu_s_per_m:.2f}x CPU per record")


if __name__ == "__main__":
    main()
