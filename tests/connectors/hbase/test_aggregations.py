"""Aggregates into HBase through Spark: batch writes, foreachBatch, complete mode, update mode.

One Spark session (the suite's), file streams (no Kafka: the Kafka paths and driver kills
are tests/integration/test_faults_aggregation.py), the devstack's HBase.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sparkbarrier
from sparkbarrier.connectors.hbase import lineage, read_committed
from sparkbarrier.connectors.hbase.sink._commit_table import read_history
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options

pytestmark = [pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(180)]

COMMITS = "sparkbarrier_commits_test"
SCHEMA = pa.schema([("user", pa.string()), ("amount", pa.int64())])
DDL = "user string, amount bigint"


@pytest.fixture(autouse=True)
def _registered(spark) -> None:  # noqa: ANN001
    sparkbarrier.register(spark)


def _options(servers: Any, table: str, **extra: str) -> dict[str, str]:
    return {"hbase.thrift.host": servers.hbase_thrift[0], "hbase.thrift.port": str(servers.hbase_thrift[1]),
            "hbase.thrift2.port": str(servers.hbase_thrift2[1]), "table": table, "commit.table": COMMITS,
            "create.table": "true", **extra}


def _files(folder: Path, batches: list[list[tuple[str, int]]], start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches, start):
        path = folder / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist([{"user": u, "amount": a} for u, a in rows], schema=SCHEMA), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source's order


def _history(servers: Any, sink_id: str) -> list[Any]:
    conn = HBaseConnection(connection_options(host=servers.hbase_thrift[0], port=servers.hbase_thrift[1]))
    try:
        return read_history(conn, COMMITS, sink_id)
    finally:
        conn.close()


def _view(servers: Any, table: str, sink_id: str, **as_of: Any) -> dict[str, tuple[Any, ...]]:
    rows = read_committed(*servers.hbase_thrift, table, sink_id=sink_id, commit_table=COMMITS, **as_of).to_pylist()
    return {r["user"]: tuple(v for k, v in r.items() if k != "user") for r in rows}


def _run(query: Any) -> None:
    try:
        assert query.awaitTermination(120), "query did not finish in time"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _versions(servers: Any, table: str) -> dict[bytes, list[tuple[bytes, int]]]:
    import happybase

    conn = happybase.Connection(*servers.hbase_thrift, timeout=30_000)
    try:
        t = conn.table(table)
        return {k: t.cells(k, b"d:n", versions=100, include_timestamp=True) for k, _ in t.scan()}
    finally:
        conn.close()


def test_batch_write_run_twice_with_one_batch_id_leaves_the_table_as_one_run(
        spark, servers: Any, unique_name: Callable[[str], str]) -> None:
    table = unique_name("t")
    opts = _options(servers, table, rowkey="user", **{"sink.id": table, "write.batch.id": "7"})
    df = spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], "user string, n bigint").repartition(2)
    df.write.format("barrier-hbase").options(**opts).mode("append").save()
    once = _versions(servers, table)
    df.write.format("barrier-hbase").options(**opts).mode("append").save()
    assert _versions(servers, table) == once and len(once) == 3
    history = _history(servers, table)
    assert [(r.seq, r.query_id, r.batch_id) for r in history] == [(1, table, 7)]
    read_opts = {k: v for k, v in _options(servers, table, **{"sink.id": table}).items()
                 if k not in ("create.table",)}
    got = spark.read.format("barrier-hbase").options(**read_opts).load()
    assert sorted((r.user, r.n) for r in got.collect()) == [("a", 1), ("b", 2), ("c", 3)]


def test_batch_writes_without_a_batch_id_commit_the_next_one_and_as_of_and_lineage_see_them(
        spark, servers: Any, unique_name: Callable[[str], str]) -> None:
    table = unique_name("t")
    opts = _options(servers, table, rowkey="user", **{"sink.id": table})
    spark.createDataFrame([("a", 1), ("b", 2)], "user string, n bigint").write.format("barrier-hbase") \
        .options(**opts).mode("append").save()
    spark.createDataFrame([("a", 5)], "user string, n bigint").write.format("barrier-hbase") \
        .options(**opts).mode("append").save()
    assert [(r.query_id, r.batch_id) for r in _history(servers, table)] == [(table, 0), (table, 1)]
    assert _view(servers, table, table) == {"a": (5,), "b": (2,)}
    assert _view(servers, table, table, as_of_batch=0) == {"a": (1,), "b": (2,)}
    cells = lineage(*servers.hbase_thrift, table, "a", column="d:n", commit_table=COMMITS, sink_id=table, versions=5)
    assert [c.batch_id for c in cells] == [1, 0]
    # a batch id below the series' newest that never committed: an error naming the option
    with pytest.raises(Exception, match="write.batch.id 4 of series 'old' was never committed"):
        _older_batch(spark, opts)


def _older_batch(spark, opts: dict[str, str]) -> None:  # noqa: ANN001
    """Series 'old': batches 3 then 5 committed; then 4, which never was."""
    df = spark.createDataFrame([("z", 1)], "user string, n bigint")
    for batch in ("3", "5", "4"):
        df.write.format("barrier-hbase").options(**opts).option("write.id", "old") \
            .option("write.batch.id", batch).mode("append").save()


def test_batch_write_errors_name_the_option(spark, servers: Any, unique_name: Callable[[str], str]) -> None:
    table = unique_name("t")
    df = spark.createDataFrame([("a", 1)], "user string, n bigint")
    with pytest.raises(Exception, match="needs option 'sink.id'"):
        df.write.format("barrier-hbase").options(**_options(servers, table, rowkey="user")).mode("append").save()
    with pytest.raises(Exception, match="mode\\('append'\\)"):
        df.write.format("barrier-hbase").options(**_options(servers, table, rowkey="user", **{"sink.id": table})) \
            .mode("overwrite").save()
    with pytest.raises(Exception, match="unknown option 'write.batch'.*write.batch.id"):
        df.write.format("barrier-hbase").options(**_options(servers, table, rowkey="user", **{"sink.id": table})) \
            .option("write.batch", "1").mode("append").save()
    with pytest.raises(sparkbarrier.ConfigError, match="names each batch itself"):
        sparkbarrier.hbase_batch_writer({"table": table, "rowkey": "user", "write.batch.id": "1"})


def test_update_mode_aggregation_through_foreach_batch_commits_each_batch_under_the_query_id(
        spark, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    table = unique_name("t")
    _files(tmp_path / "in", [[("a", 1), ("b", 2)], [("a", 3)], [("c", 4), ("a", 1)]])
    counts = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
              .groupBy("user").agg(F.count("*").alias("n"), F.sum("amount").alias("total")))
    query = (counts.writeStream.outputMode("update")
             .foreachBatch(sparkbarrier.hbase_batch_writer(_options(servers, table, rowkey="user",
                                                                    **{"sink.id": table})))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    _run(query)
    assert _view(servers, table, table) == {"a": (3, 5), "b": (1, 2), "c": (1, 4)}
    history = _history(servers, table)
    assert [(r.query_id, r.batch_id) for r in history] == [(query.id, 0), (query.id, 1), (query.id, 2)]
    assert _view(servers, table, table, as_of_batch=1) == {"a": (2, 4), "b": (1, 2)}
    # Update mode wrote only the keys each batch changed: b has one version (batch 0).
    assert len(_versions(servers, table)[b"b"]) == 1
    # A replay of a committed batch (a driver restart after the sink's commit) writes nothing.
    before = _versions(servers, table)
    again = spark.createDataFrame([("a", 99, 99)], "user string, n bigint, total bigint")
    fn = sparkbarrier.hbase_batch_writer(_options(servers, table, rowkey="user", **{"sink.id": table}))
    spark.sparkContext.setLocalProperty("sql.streaming.queryId", query.id)
    try:
        fn._locations[query.id] = None  # the query is gone; no offsets to read
        fn(again, 2)
    finally:
        spark.sparkContext.setLocalProperty("sql.streaming.queryId", None)
    assert _versions(servers, table) == before and len(_history(servers, table)) == 3


def test_stream_static_join_through_foreach_batch(
        spark, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    table = unique_name("t")
    _files(tmp_path / "in", [[("a", 1), ("b", 2)], [("a", 3), ("x", 9)]])
    users = spark.createDataFrame([("a", "Ada"), ("b", "Bob")], "user string, name string")
    enriched = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
                .join(users, "user"))
    query = (enriched.writeStream
             .foreachBatch(sparkbarrier.hbase_batch_writer(_options(servers, table, rowkey="user",
                                                                    **{"sink.id": table})))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    _run(query)
    assert _view(servers, table, table) == {"a": (3, "Ada"), "b": (2, "Bob")}
    assert [r.batch_id for r in _history(servers, table)] == [0, 1]


def test_complete_mode_rewrites_the_whole_aggregate_each_batch(
        spark, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    table = unique_name("t")
    _files(tmp_path / "in", [[("a", 1), ("b", 2)], [("a", 3)]])
    counts = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
              .groupBy("user").agg(F.count("*").alias("n")))
    query = (counts.writeStream.outputMode("complete").format("barrier-hbase")
             .options(**_options(servers, table, rowkey="user", **{"sink.id": table}))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    _run(query)
    assert _view(servers, table, table) == {"a": (2,), "b": (1,)}
    assert _view(servers, table, table, as_of_batch=0) == {"a": (1,), "b": (1,)}
    # The cost: every batch writes every key, changed or not (b: one version per batch).
    assert len(_versions(servers, table)[b"b"]) == 2


def test_update_mode_on_the_streaming_sink_is_refused_by_spark(
        spark, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    """Spark refuses it on the first batch, before any code of ours runs (docs/hbase-aggregations.md):
    pinned, so a Spark release that changes this is noticed."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    table = unique_name("t")
    _files(tmp_path / "in", [[("a", 1)]])
    counts = (spark.readStream.schema(DDL).parquet(str(tmp_path / "in")).groupBy("user")
              .agg(F.count("*").alias("n")))
    query = (counts.writeStream.outputMode("update").format("barrier-hbase")
             .options(**_options(servers, table, rowkey="user", **{"sink.id": table}))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    try:
        with pytest.raises(StreamingQueryException, match="barrier-hbase does not support Update mode"):
            query.awaitTermination(60)
    finally:
        query.stop()


def test_two_batch_writers_in_one_function_fail_at_the_first_batch_naming_sink_id_or_each_write_with_their_own(
        spark, servers: Any, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    """Issue 49: two hbase_batch_writer targets without sink.id lost the second table silently (both
    defaulted to query-<id>, so the second write looked like a replay of the first)."""
    a, b = unique_name("a"), unique_name("b")
    _files(tmp_path / "in", [[("u1", 1), ("u2", 2)], [("u3", 3)]])

    def stream() -> Any:
        return spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))

    first, second = (sparkbarrier.hbase_batch_writer(_options(servers, t, rowkey="user")) for t in (a, b))

    def both(df: Any, batch_id: int) -> None:
        first(df, batch_id)
        second(df, batch_id)

    query = (stream().writeStream.foreachBatch(both).option("checkpointLocation", str(tmp_path / "c1"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"both use the default sink\.id.*Give each writer its own 'sink\.id'"):
        _run(query)
    first, second = (sparkbarrier.hbase_batch_writer(_options(servers, t, rowkey="user", **{"sink.id": t}))
                     for t in (a, b))
    query = (stream().writeStream.foreachBatch(both).option("checkpointLocation", str(tmp_path / "c2"))
             .trigger(availableNow=True).start())
    _run(query)
    for t in (a, b):
        assert _view(servers, t, t) == {"u1": (1,), "u2": (2,), "u3": (3,)}
