"""barrier-hbase's driver-side cost per batch: table checks and connections, counted (issue 20).

The function runs under a subclass that records each call and connection into a file
(the calls happen in Spark's pooled Python workers), registered through the same
checkpointed-sink adapter that ``barrier-hbase`` uses.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction

pytestmark = [pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

BATCHES = 6


class CountedHBaseSink(HBaseSinkFunction):
    record_path = ""  # set by the test; the class travels to the workers by value

    def _note(self, call: str) -> None:
        with open(self.record_path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "call": call}) + "\n")

    def validate(self, options: dict[str, str], schema: Any) -> None:
        self._note("table check")
        super().validate(options, schema)

    def start(self, options: dict[str, str], schema: Any) -> None:
        self._note("start")
        super().start(options, schema)

    def _thrift2(self) -> Any:
        connect = super()._thrift2()
        if connect is None:
            return None

        def counted() -> Any:
            self._note("thrift2 connection")
            return connect()

        return counted

    def committer(self) -> Any:
        self._note("commit connection")
        return super().committer()


def test_table_checks_and_connections_per_batch(spark, hbase_thrift, hbase_thrift2, unique_name,
                                                tmp_path: Path) -> None:
    from pyspark import cloudpickle

    import sparkbarrier

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    name, table = unique_name("counted_hbase"), unique_name("t")
    record = tmp_path / "calls.jsonl"
    CountedHBaseSink.record_path = str(record)  # before registering: Spark pickles the class then
    sparkbarrier.checkpointed_sink(spark, name, CountedHBaseSink)
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 50).option("numPartitions", 1).load()
             .selectExpr("CAST(value AS STRING) AS id", "value AS v")
             .writeStream.format(name)
             .option("hbase.thrift.host", hbase_thrift[0]).option("hbase.thrift.port", str(hbase_thrift[1]))
             .option("hbase.thrift2.port", str(hbase_thrift2[1])).option("table", table)
             .option("commit.table", "sparkbarrier_commits_test").option("sink.id", table)
             .option("rowkey", "id").option("create.table", "true")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())

    def calls() -> list[dict[str, Any]]:
        return [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []

    try:
        wait_for(lambda: sum(c["call"] == "commit connection" for c in calls()) >= BATCHES or query.exception(),
                 timeout=240, what=f"{BATCHES} commits")
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    seen = calls()
    count = {k: sum(c["call"] == k for c in seen) for k in ("table check", "start", "commit connection",
                                                            "thrift2 connection")}
    commit_pids = {c["pid"] for c in seen if c["call"] == "commit connection"}
    check_pids = {c["pid"] for c in seen if c["call"] == "table check"}
    # per query: one table check per planning process; one start per commit process
    assert count["table check"] == len(check_pids) <= 2, seen
    assert count["start"] == len(commit_pids) <= 2, seen
    # Thrift2: one admin connection per table check, none per batch (only a commit with gaps needs one)
    assert count["thrift2 connection"] == count["table check"], seen
    # per batch: one Thrift connection, for the commit record
    assert count["commit connection"] >= BATCHES
