"""End to end through Spark: file stream → barrier-hbase → committed batch read."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow]

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("op", pa.string())])
DDL = "id string, v bigint, op string"


def _write_files(folder: Path, batches: list[list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        path = folder / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
        # The file source orders files by modification time: make the order explicit.
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


@pytest.fixture(autouse=True)
def _registered(spark) -> None:
    # The pyspark_barrier_hbase shim is found by Spark only in a regular (non-editable)
    # install; register explicitly so the tests run from the source checkout too.
    from sparkbarrier.connectors.hbase import register

    register(spark)


def test_shim_exposes_the_data_source() -> None:
    import pyspark_barrier_hbase

    assert pyspark_barrier_hbase.DefaultSource.name() == "barrier-hbase"


def _options(hbase: tuple[str, int], table: str) -> dict[str, str]:
    return {"hbase.thrift.host": hbase[0], "hbase.thrift.port": str(hbase[1]), "table": table,
            "commit.table": "sparkbarrier_commits_test"}


def test_stream_writes_exactly_once_and_batch_read_sees_committed(
        spark, hbase_thrift, servers, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    table = unique_name("t")
    _write_files(tmp_path / "in", [
        [{"id": "a", "v": 1, "op": None}, {"id": "b", "v": 2, "op": None}],
        [{"id": "a", "v": None, "op": "delete"}, {"id": "a", "v": 3, "op": None}, {"id": "c", "v": 4, "op": None}],
        [{"id": "b", "v": None, "op": "delete"}],
    ])
    stream = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
              .writeStream.format("barrier-hbase").options(**_options(hbase_thrift, table))
              .option("hbase.thrift2.port", str(servers.hbase_thrift2[1]))
              .option("rowkey", "id").option("op.column", "op").option("create.table", "true")
              .option("sink.id", table).option("checkpointLocation", str(tmp_path / "ckpt"))
              .trigger(availableNow=True))
    query = stream.start()
    try:
        assert query.awaitTermination(120), "query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    rows = (spark.read.format("barrier-hbase").options(**_options(hbase_thrift, table))
            .option("sink.id", table).load().orderBy("id").collect())
    assert [(r.id, r.v) for r in rows] == [("a", 3), ("c", 4)]
    with pytest.raises(Exception, match="option 'column.family' is the barrier-hbase sink's"):
        spark.read.format("barrier-hbase").options(**_options(hbase_thrift, table)).option(
            "sink.id", table).option("column.family", "d").load()
    assert spark.read.format("barrier-hbase").options(**_options(hbase_thrift, table)).load().columns == ["id", "v"]


def test_unknown_option_fails_at_query_start(spark, hbase_thrift, unique_name, tmp_path: Path) -> None:
    _write_files(tmp_path / "in", [[{"id": "a", "v": 1, "op": None}]])
    writer = (spark.readStream.schema(DDL).parquet(str(tmp_path / "in")).writeStream.format("barrier-hbase")
              .options(**_options(hbase_thrift, unique_name("t"))).option("rowkey", "id")
              .option("row.key", "id").option("checkpointLocation", str(tmp_path / "ckpt")))
    with pytest.raises(Exception, match="unknown option 'row.key'.*valid options are"):
        query = writer.start()
        try:
            query.awaitTermination(60)
            if query.exception() is not None:
                raise query.exception()
        finally:
            query.stop()


def test_batch_read_runs_one_partition_per_region_and_pushes_row_key_filters(
        spark, make_sink, servers, unique_name: Callable[[str], str]) -> None:
    from hbase_clients import thrift2_admin
    from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells

    table = unique_name("regions")
    with thrift2_admin(*servers.hbase_thrift2) as admin:
        admin.create_table(table, {"d": FamilySpec(max_versions=10, keep_deleted_cells=KeepDeletedCells.TRUE)},
                           split_keys=[b"k3", b"k6"])
    sink = make_sink(SCHEMA, table=table, **{"op.column": "op"})
    rows = [{"id": f"k{i}", "v": i, "op": None} for i in range(9)]
    sink.commit([sink.task(rows, batch=0)], 0)
    sink.commit([sink.task([{"id": "k4", "v": None, "op": "delete"}], batch=1)], 1)
    options = {**_options(servers.hbase_thrift, table), "sink.id": sink.opts.sink_id,
               "commit.table": sink.opts.commit_table}
    df = spark.read.format("barrier-hbase").options(**options).load()
    assert df.rdd.getNumPartitions() == 3
    assert sorted((r.id, r.v) for r in df.collect()) == [(f"k{i}", i) for i in range(9) if i != 4]
    old = spark.read.format("barrier-hbase").options(**options).option("as.of.batch", "0").load()
    assert old.where("id = 'k4'").collect()[0].v == 4

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = (spark.read.format("barrier-hbase").options(**options).option("filter.pushdown", "true")
                  .load().where("id >= 'k5' AND id < 'k7'"))
        assert pushed.rdd.getNumPartitions() == 2  # [k5, k6) in one region, [k6, k7) in the next
        assert sorted((r.id, r.v) for r in pushed.collect()) == [("k5", 5), ("k6", 6)]
        one = (spark.read.format("barrier-hbase").options(**options).option("filter.pushdown", "true")
               .load().where("id IN ('k1', 'k8')"))
        assert sorted(r.id for r in one.collect()) == ["k1", "k8"]
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_each_planned_batch_raises_one_plan_epoch_and_commits_raise_none(
        spark, hbase_thrift, servers, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    """Pins which process makes the plan id: pyspark's planning worker builds the DataSource
    anew for every batch and calls streamWriter once (one epoch per batch, shipped to the
    tasks); the commit worker unpickles the query's instance for every commit and raises
    none. Three batches: the counter rises by exactly three, and the attempts carry them."""
    import happybase

    from sparkbarrier.connectors.hbase.sink._commit_table import PLAN_COUNTER_COLUMN, PLAN_COUNTER_ROW

    table, commits = unique_name("t"), unique_name("commits")
    _write_files(tmp_path / "in", [[{"id": f"k{i}", "v": i, "op": None}] for i in range(3)])
    query = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
             .writeStream.format("barrier-hbase").options(**_options(hbase_thrift, table))
             .option("commit.table", commits).option("hbase.thrift2.port", str(servers.hbase_thrift2[1]))
             .option("rowkey", "id").option("op.column", "op").option("create.table", "true")
             .option("sink.id", table).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    conn = happybase.Connection(*hbase_thrift)
    try:
        raw = conn.table(commits).row(PLAN_COUNTER_ROW, columns=[PLAN_COUNTER_COLUMN])[PLAN_COUNTER_COLUMN]
    finally:
        conn.close()
    planned = [p for p in query.recentProgress if p.numInputRows]
    assert len(planned) == 3 and int.from_bytes(raw, "big") == 3
