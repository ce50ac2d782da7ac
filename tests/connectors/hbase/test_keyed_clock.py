"""Cell timestamps stay on the planning driver's clock at a wide cluster's rates (issue 57, item 2).

A batch whose write tasks are keyed (every row key hashes to its task's residue under the
previous batch's modulus: ``repartition(n, rowkey)``, an aggregation grouped by the row
key, a topic read without a shuffle; ``_keyed``) writes in one 8 ms block however many
tasks it has, or one per split with ``minPartitions``, so batches may come as fast as a
cluster runs them. Two ways: a simulated clock over an hour at each of the issue's rates
(``_attempts.place``, as each batch's first task runs it), and Spark queries against the
devstack's HBase whose batches come faster than 8 ms per task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import happybase
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sparkbarrier
from sparkbarrier.connectors.hbase import read_committed
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase.sink._attempts import place
from sparkbarrier.connectors.hbase.sink._commit_table import CommitRecord, read_history
from sparkbarrier.connectors.hbase.sink._keyed import choose_keying, keyed_block, levels
from sparkbarrier.connectors.hbase.sink._timestamps import TASK_WIDTH_MS, TaskClock, batch_span_ms, task_block

HOUR_MS = 3_600_000
COMMITS = "sparkbarrier_commits_test"


def _reports(tasks: int, shape: str) -> list[tuple[int, dict[str, list[int]]]]:
    """What each task reports of its keys (``KeyClasses``: per hash ``[h0, g]``) for a stream of ``shape``:
    ``keyed`` (task t holds Spark's residue t), ``split<k>`` (``minPartitions``: each of
    tasks / k Kafka partitions split into k consecutive tasks), ``unkeyed`` (round-robin)."""
    if shape == "keyed":
        return [(t, {"spark": [t, tasks]}) for t in range(tasks)]
    if shape.startswith("split"):
        k = int(shape[5:])
        return [(t, {"kafka": [t // k, tasks // k]}) for t in range(tasks)]
    return [(t, {}) for t in range(tasks)]


def run_hour(tasks: int, every_ms: int, *, shape: str = "keyed", clock_jump_ms: int = 0) -> tuple[int, int]:
    """Batches of ``tasks`` write tasks planned every ``every_ms`` for an hour.

    Each batch: its attempt placed as its tasks place it (the planning clock, the last
    commit), its tasks' blocks as each decides them (``_writer``: its report under the
    attempt's hash, modulus and residues; :func:`_reports`), its commit record with the
    keying the commit chooses from those reports. ``clock_jump_ms`` sets the planning clock back
    half-way through. Returns the largest lead of a cell over the planning clock once
    steady (after the first three minutes: the first batch has no batch before it to give
    the modulus, so only its task 0 is keyed and it spans a block per task, up to 80 s at 10,000 tasks, which the clock
    then catches up), and the number of batches.
    """
    reports = _reports(tasks, shape)
    key_hash, modulus, residues = choose_keying(reports, tasks)
    ends: dict[tuple[str, int, tuple[int, ...]], int] = {}  # the batch's highest block, per keying
    commit: CommitRecord | None = None
    lead = 0
    now = 1_800_000_000_000
    batches = HOUR_MS // every_ms
    for batch in range(batches):
        clock = now + batch * every_ms - (clock_jump_ms if batch >= batches // 2 else 0)
        p = place(commit, None, query_id="q", batch_id=batch, plan_id=f"e{batch + 1:019d}", now_ms=clock,
                  flush_rows=1000, flush_bytes=1 << 20, span_ms=batch_span_ms(tasks))
        assert p.record is not None
        floor = commit.read_bound if commit is not None else 0
        assert p.base_ms >= floor, "a base went below what was written"
        keying = (p.key_hash, p.keyed_tasks, tuple(p.key_residues))
        if keying not in ends:
            top = levels(p.keyed_tasks, p.key_residues)
            ends[keying] = 1 + max(task_block(
                t, keyed_at=keyed_block(c, key_hash=p.key_hash, tasks=p.keyed_tasks, partition=t,
                                        residues=p.key_residues), levels=top) for t, c in reports)
            assert (ends[keying] - 1) * TASK_WIDTH_MS < p.record.reach_ms, "a block outside the recorded span"
        ts_hi = p.base_ms + ends[keying] * TASK_WIDTH_MS
        commit = CommitRecord("s", "t", batch + 1, "q", batch, p.base_ms, ts_hi, max(ts_hi, floor), tasks=tasks,
                              key_hash=key_hash, key_residues=residues,
                              key_modulus=0 if modulus == tasks else modulus)
        if batch * every_ms >= 180_000:
            lead = max(lead, ts_hi - 1 - clock)
    return lead, batches


@pytest.mark.parametrize(("tasks", "every_ms"), [(200, 200), (1_000, 1_000), (10_000, 5_000)])
def test_keyed_batches_stay_within_5_s_of_the_clock_for_an_hour_at_a_wide_clusters_rate(
        tasks: int, every_ms: int) -> None:
    lead, batches = run_hour(tasks, every_ms)
    assert batches == HOUR_MS // every_ms
    assert lead < TASK_WIDTH_MS <= 5_000  # one block: the cells are never more than 8 ms ahead
    # The same rate without keys partitioned by the row key: 8 ms per task and batch, so
    # the cells run ahead of the clock, further with every batch (the documented limit).
    ahead, _ = run_hour(tasks, every_ms, shape="unkeyed")
    assert ahead > 60_000


@pytest.mark.parametrize(("tasks", "every_ms", "splits"), [(200, 200, 2), (1_000, 1_000, 4), (10_000, 5_000, 10)])
def test_min_partitions_splits_stay_on_the_clock_in_a_block_per_split(tasks: int, every_ms: int,
                                                                       splits: int) -> None:
    """``minPartitions`` splits each Kafka partition into consecutive tasks: modulo the
    partition count each split is keyed, split ``i`` in block ``splits - 1 + i`` (the blocks
    below take splits that start early), so a batch spans ``2 * splits - 1`` blocks however
    many tasks it has (10,000 tasks: 1,000 partitions, their residues recorded as 1,000 runs)."""
    lead, _ = run_hour(tasks, every_ms, shape=f"split{splits}")
    assert lead < (2 * splits - 1) * TASK_WIDTH_MS


def test_a_clock_set_back_never_moves_a_base_below_what_was_written() -> None:
    lead, _ = run_hour(1_000, 1_000, clock_jump_ms=30_000)
    assert lead <= 30_000 + TASK_WIDTH_MS  # cells stay above what was written, then the clock catches up


# -- against the devstack's HBase, through Spark ----------------------------------------------

SCHEMA = pa.schema([("user", pa.string()), ("amount", pa.int64())])


@pytest.fixture
def registered(spark) -> Any:  # noqa: ANN001
    sparkbarrier.register(spark)
    return spark


def _files(folder: Path, batches: list[list[tuple[str, int]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        path = folder / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist([{"user": u, "amount": a} for u, a in rows], schema=SCHEMA), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source's order


def _sink_options(servers: Any, table: str) -> dict[str, str]:
    return {"hbase.thrift.host": servers.hbase_thrift[0], "hbase.thrift.port": str(servers.hbase_thrift[1]),
            "hbase.thrift2.port": str(servers.hbase_thrift2[1]), "table": table, "commit.table": COMMITS,
            "create.table": "true", "rowkey": "user", "sink.id": table}


def _run(query: Any) -> None:
    try:
        assert query.awaitTermination(200), "query did not finish in time"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _history(servers: Any, sink_id: str) -> list[CommitRecord]:
    conn = HBaseConnection(connection_options(host=servers.hbase_thrift[0], port=servers.hbase_thrift[1]))
    try:
        return sorted(read_history(conn, COMMITS, sink_id), key=lambda r: r.seq)
    finally:
        conn.close()


def _cells(servers: Any, table: str) -> dict[bytes, list[tuple[bytes, int]]]:
    conn = happybase.Connection(*servers.hbase_thrift, timeout=30_000)
    try:
        t = conn.table(table)
        return {k: t.cells(k, b"d:amount", versions=100, include_timestamp=True) for k, _ in t.scan()}
    finally:
        conn.close()


@pytest.mark.hbase
@pytest.mark.spark
@pytest.mark.timeout(240)
def test_a_stream_repartitioned_by_the_row_key_writes_each_batch_in_one_block_on_the_clock(
        registered, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    """``repartition(64, "user")``: 64 write tasks a batch, batches back to back. From the
    second batch on every task is keyed: the batch spans 8 ms, not 64 x 8, and no cell is
    ahead of the driver's clock when it committed. The first batch (no batch before it to
    give the modulus: only task 0 is keyed) spans a block per task. The table ends as the rows say, every batch
    one version. (On the suite's 2 cores a batch of 64 Spark tasks takes longer than
    64 x 8 ms; the drift such batches cause at a cluster's rates is the simulated hour's.)"""
    spark = registered
    table = unique_name("t")
    rounds = [[(f"u{i}", 100 * b + i) for i in range(60)] for b in range(3)]
    _files(tmp_path / "in", rounds)
    opts = _sink_options(servers, table)
    stream = (spark.readStream.schema("user string, amount bigint").option("maxFilesPerTrigger", 1)
              .parquet(str(tmp_path / "in")).repartition(64, "user"))
    query = (stream.writeStream.format("barrier-hbase").options(**opts)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    _run(query)
    history = _history(servers, table)
    assert [r.batch_id for r in history] == [0, 1, 2]
    assert all(r.tasks == 64 for r in history)
    assert history[0].ts_hi - history[0].ts_lo > TASK_WIDTH_MS  # not keyed: blocks of its own
    for r in history[1:]:
        assert r.ts_hi - r.ts_lo == TASK_WIDTH_MS, r  # keyed: one block
        assert r.ts_hi - 1 <= r.committed_at_ms, r  # on the clock
    rows = read_committed(*servers.hbase_thrift, table, sink_id=table, commit_table=COMMITS).to_pylist()
    assert {r["user"]: r["amount"] for r in rows} == {u: a for u, a in rounds[-1]}
    cells = _cells(servers, table)
    for versions in cells.values():
        assert [ts for _, ts in versions] == sorted((r.ts_lo + 1 for r in history[1:]), reverse=True) + [
            versions[-1][1]]  # one version per batch, each keyed batch's at its base + 1 (slot 0)


@pytest.mark.hbase
@pytest.mark.spark
@pytest.mark.timeout(240)
def test_an_aggregation_grouped_by_the_row_key_is_keyed(
        registered, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    """Complete mode, ``groupBy("user")``: the aggregate comes out of Spark's hash
    partitioning on the row key (``spark.sql.shuffle.partitions`` tasks), so from the
    second batch on it writes in one block."""
    from pyspark.sql import functions as F

    spark = registered
    table = unique_name("t")
    _files(tmp_path / "in", [[(f"u{i}", i) for i in range(40)], [("u1", 5), ("u2", 7)], [("u3", 1)]])
    opts = _sink_options(servers, table)
    counts = (spark.readStream.schema("user string, amount bigint").option("maxFilesPerTrigger", 1)
              .parquet(str(tmp_path / "in")).groupBy("user").agg(F.sum("amount").alias("amount")))
    query = (counts.writeStream.outputMode("complete").format("barrier-hbase").options(**opts)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    _run(query)
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions"))
    history = _history(servers, table)
    assert [(r.batch_id, r.tasks) for r in history] == [(0, shuffle), (1, shuffle), (2, shuffle)]
    assert [r.ts_hi - r.ts_lo for r in history[1:]] == [TASK_WIDTH_MS, TASK_WIDTH_MS]
    rows = read_committed(*servers.hbase_thrift, table, sink_id=table, commit_table=COMMITS).to_pylist()
    expected = {f"u{i}": i for i in range(40)} | {"u1": 6, "u2": 9, "u3": 4}
    assert {r["user"]: r["amount"] for r in rows} == expected


@pytest.mark.hbase
def test_a_commit_whose_cells_run_ahead_of_the_clock_says_why_and_the_fix(make_sink, monkeypatch, caplog) -> None:
    """Two tasks that are not keyed, placed by a clock half a minute ahead (as many such
    tasks per batch at a fast trigger leave the floor; a minute ahead, the devstack's 60 s
    timestamp slop refused the cells of a task that wrote within milliseconds of its placement): the commit
    warns, naming the partitioning that keeps cells on the clock; once a minute per sink."""
    import logging

    from sparkbarrier.connectors.hbase.sink._timestamps import CLOCK_OFFSET_ENV

    sink = make_sink(SCHEMA, rowkey="user")
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "30000")
    msgs = [sink.task([{"user": "a", "amount": p}], batch=0, partition=p, plan="p1") for p in (0, 1)]
    monkeypatch.delenv(CLOCK_OFFSET_ENV)
    with caplog.at_level(logging.WARNING, logger="sparkbarrier.connectors.hbase.sink._committer"):
        sink.commit(msgs, 0)
        sink.commit([sink.task([{"user": "b", "amount": 1}], batch=1, partition=0, plan="p2")], 1)
    warnings = [r.getMessage() for r in caplog.records if "ahead of this driver's clock" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "1 of its 2 write tasks are not hash-partitioned by the row key" in warnings[0]
    assert "repartition(n, 'user')" in warnings[0]


def _topic(bootstrap: str, name: str, partitions: int) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    return name


def _produce_keyed(kind: str, bootstrap: str, topic: str, rounds: int, keys: int) -> dict[str, int]:
    """``keys`` keys ``u<i>``, ``rounds`` values each, partitioned as ``kind``'s producer does
    by default: ``java`` (the Java client's murmur2, as kafka-python copies it) or
    ``librdkafka`` (``consistent_random``: crc32). Returns each key's last value."""
    last: dict[str, int] = {}
    if kind == "java":
        from kafka import KafkaProducer

        java = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        for r in range(rounds):
            for i in range(keys):
                java.send(topic, key=f"u{i}".encode(), value=str(100 * r + i).encode())
                last[f"u{i}"] = 100 * r + i
        java.flush()
        java.close()
    else:
        from confluent_kafka import Producer

        rd = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for r in range(rounds):
            for i in range(keys):
                rd.produce(topic, key=f"u{i}".encode(), value=str(100 * r + i).encode())
                last[f"u{i}"] = 100 * r + i
        assert rd.flush(30) == 0
    return last


@pytest.mark.kafka
@pytest.mark.hbase
@pytest.mark.spark
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("source", "producer", "key_hash", "splits"),
                         [("barrier-kafka", "java", "kafka", 1), ("barrier-kafka", "librdkafka", "crc32", 1),
                          ("kafka", "java", "kafka", 1), ("barrier-kafka", "java", "kafka", 2)])
def test_a_topic_read_without_a_shuffle_is_keyed_by_its_producers_partitioner(
        registered, servers: Any, unique_name: Callable[[str], str], tmp_path: Path, source: str, producer: str,
        key_hash: str, splits: int) -> None:
    """``barrier-kafka`` → ``barrier-hbase`` with nothing between: one write task per Kafka
    partition, its keys those the producer's default partitioner sent there. From the
    second batch on the commit has chosen that partitioner, every task is keyed and the
    batch spans one 8 ms block, on the clock; the table ends as the last record of each
    key says. With ``minPartitions`` (``splits`` 2: two rounds of every key per batch, a
    partition's range split into consecutive tasks in offset order) the modulus is the
    partition count, each split is keyed in its own block, and a key's later record, in a
    later split, is the one the table keeps."""
    spark = registered
    bootstrap = servers.kafka_bootstrap
    table, topic = unique_name("t"), _topic(bootstrap, unique_name("topic"), 6)
    last = _produce_keyed(producer, bootstrap, topic, rounds=4 * splits, keys=60)
    reader = (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(60 * splits)))
    if source == "barrier-kafka":
        reader = reader.option("commitOffsets", "false")
    if splits > 1:
        reader = reader.option("minPartitions", str(6 * splits))
    stream = (reader.load().selectExpr("CAST(key AS STRING) AS user", "CAST(CAST(value AS STRING) AS BIGINT) AS amount"))
    query = (stream.writeStream.format("barrier-hbase").options(**_sink_options(servers, table))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    _run(query)
    history = _history(servers, table)
    assert [r.batch_id for r in history] == [0, 1, 2, 3], history
    assert [r.key_hash for r in history] == [key_hash] * 4
    if splits == 1:
        assert all(r.tasks == 6 for r in history), [r.tasks for r in history]
        # barrier-kafka's tasks follow the topic's partitions; Spark's source orders them otherwise
        assert all(bool(r.key_residues) == (source == "kafka") for r in history), [r.key_residues for r in history]
    else:  # keyed modulo the 6 partitions, each split in a block of its own in partition order
        assert all(r.tasks > 6 and r.key_modulus == 6 for r in history), [(r.tasks, r.key_modulus) for r in history]
    for before, r in zip(history, history[1:], strict=False):  # r's tasks test under before's keying
        blocks = levels(before.key_modulus or before.tasks, before.key_residues) if splits > 1 else 1
        assert r.ts_hi - r.ts_lo == blocks * TASK_WIDTH_MS, (before, r)  # keyed: the keyed blocks
        assert blocks < r.tasks, r  # fewer than a block per task (2k - 1 for a partition in k splits)
        assert r.ts_hi - 1 <= r.committed_at_ms, r  # on the clock
    rows = read_committed(*servers.hbase_thrift, table, sink_id=table, commit_table=COMMITS).to_pylist()
    assert {r["user"]: r["amount"] for r in rows} == last


@pytest.mark.kafka
@pytest.mark.hbase
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_min_partitions_splits_that_shift_between_batches_keep_each_keys_last_record(
        registered, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    """``barrier-kafka`` splits each partition by its share of the batch: 40 + 40 + 40
    records with ``minPartitions=6`` give 2 + 2 + 2 tasks, then 20 + 60 + 40 give 1 + 3 + 2,
    so partition 1's first split is task 1, recorded as partition 0's. Every key of
    partition 1 is in all three of its splits. Each split is still keyed, in its own block
    in partition order (task 1 a block below the recorded ranks), so the table ends as each
    key's last record says; before 2026-12-02 task 1 wrote above tasks 2 and 3 and its
    earlier records won."""
    from kafka import KafkaProducer

    from sparkbarrier.connectors._partitioners import kafka_hashes

    spark, bootstrap = registered, servers.kafka_bootstrap
    table, topic = unique_name("t"), _topic(bootstrap, unique_name("topic"), 3)
    names = [f"u{i}".encode() for i in range(200)]
    by_partition: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for key, h in zip(names, kafka_hashes(names).tolist(), strict=True):
        if len(by_partition[h % 3]) < 4:
            by_partition[h % 3].append(key)
    last: dict[str, int] = {}
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    value = 0

    def produce(rounds: dict[int, int]) -> None:
        nonlocal value
        for p, n in rounds.items():
            for _ in range(n):
                for key in by_partition[p]:
                    value += 1
                    producer.send(topic, key=key, value=str(value).encode())
                    last[key.decode()] = value
        producer.flush()

    def run() -> None:
        stream = (spark.readStream.format("barrier-kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest").option("commitOffsets", "false")
                  .option("minPartitions", "6").load()
                  .selectExpr("CAST(key AS STRING) AS user", "CAST(CAST(value AS STRING) AS BIGINT) AS amount"))
        _run(stream.writeStream.format("barrier-hbase").options(**_sink_options(servers, table))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())

    try:
        produce({0: 10, 1: 10, 2: 10})
        run()
        produce({0: 5, 1: 15, 2: 10})
        run()
    finally:
        producer.close()
    rows = read_committed(*servers.hbase_thrift, table, sink_id=table, commit_table=COMMITS).to_pylist()
    assert {row["user"]: row["amount"] for row in rows} == last
    history = _history(servers, table)
    assert [(r.batch_id, r.tasks) for r in history] == [(0, 6), (1, 6)], history
    before, r = history
    assert before.key_hash == "kafka" and before.key_modulus == 3, before
    assert levels(3, before.key_residues) == 3  # 2 splits a partition: one rank, one block below
    assert r.ts_hi - r.ts_lo == 3 * TASK_WIDTH_MS, r  # every task keyed, in the 3 keyed blocks
