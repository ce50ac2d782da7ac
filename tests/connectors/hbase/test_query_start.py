"""barrier-hbase's query-start checks find tables without listing the cluster's, and still check every start.

``HBaseSinkFunction.validate`` runs once per query run in each planning worker. It used to
list every table of the cluster twice (the target table, the commit table), which grows
with the cluster (issue 57, item 9). It now reads the tables' own descriptors and lists
only when one is refused; nothing it found is remembered, so a table dropped between two
starts in one process is found missing on the second. Against the devstack's HBase.
"""

from __future__ import annotations

from typing import Any

import happybase
import pyarrow as pa
import pytest
from hbase_clients import thrift2_admin
from hbase_tasks import spark_schema

from sparkbarrier._exceptions import ConfigError
from sparkbarrier.connectors.hbase._options import parse_sink_options
from sparkbarrier.connectors.hbase.client import _connection
from sparkbarrier.connectors.hbase.client._connection_pool import POOL, _key
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells
from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(120)]

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])


def _options(hbase: tuple[str, int], thrift2: tuple[str, int], table: str, commits: str,
             **extra: str) -> dict[str, str]:
    return {"hbase.thrift.host": hbase[0], "hbase.thrift.port": str(hbase[1]), "hbase.thrift2.port": str(thrift2[1]),
            "table": table, "rowkey": "id", "sink.id": table, "commit.table": commits, **extra}


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every listing of HBase's tables the sink's Thrift1 connections make, counted."""
    calls: list[int] = []
    listing = _connection._Thrift1Client.tables

    def counted(self: Any) -> list[bytes]:
        calls.append(1)
        return listing(self)

    monkeypatch.setattr(_connection._Thrift1Client, "tables", counted)
    return calls


def _drop(hbase: tuple[str, int], *tables: str) -> None:
    conn = happybase.Connection(*hbase)
    try:
        for table in tables:
            conn.delete_table(table, disable=True)
    finally:
        conn.close()


def test_a_start_on_existing_tables_lists_no_tables(hbase_thrift, hbase_thrift2, unique_name, listings) -> None:
    table, commits = unique_name("qs"), unique_name("qs_commits")
    options = _options(hbase_thrift, hbase_thrift2, table, commits, **{"create.table": "true"})
    try:
        HBaseSinkFunction().validate(options, spark_schema(SCHEMA))  # creates both: the listings decide
        assert listings, "a missing table is still looked up in the listing before it is created"
        listings.clear()
        HBaseSinkFunction().validate(options, spark_schema(SCHEMA))
        assert listings == []
    finally:
        _drop(hbase_thrift, table, commits)


def test_a_table_dropped_between_two_starts_of_one_process_is_missing_on_the_second(
        hbase_thrift, hbase_thrift2, unique_name) -> None:
    """Nothing is remembered between starts: the second one checks the table again."""
    table, commits = unique_name("qs"), unique_name("qs_commits")
    with thrift2_admin(*hbase_thrift2) as admin:
        admin.create_table(table, {"d": FamilySpec(max_versions=10, keep_deleted_cells=KeepDeletedCells.TRUE)})
    options = _options(hbase_thrift, hbase_thrift2, table, commits, **{"create.table": "false"})
    try:
        HBaseSinkFunction().validate(options, spark_schema(SCHEMA))
        _drop(hbase_thrift, table)
        with pytest.raises(ConfigError, match="does not exist"):
            HBaseSinkFunction().validate(options, spark_schema(SCHEMA))
    finally:
        _drop(hbase_thrift, commits)


def test_a_commit_table_dropped_between_two_starts_is_created_again(hbase_thrift, hbase_thrift2,
                                                                    unique_name) -> None:
    table, commits = unique_name("qs"), unique_name("qs_commits")
    options = _options(hbase_thrift, hbase_thrift2, table, commits, **{"create.table": "true"})
    try:
        HBaseSinkFunction().validate(options, spark_schema(SCHEMA))
        _drop(hbase_thrift, commits)
        HBaseSinkFunction().validate(options, spark_schema(SCHEMA))
        conn = happybase.Connection(*hbase_thrift)
        try:
            assert commits.encode() in conn.tables()
        finally:
            conn.close()
    finally:
        _drop(hbase_thrift, table, commits)


def test_the_checks_connection_is_kept_only_when_every_check_passed(hbase_thrift, hbase_thrift2,
                                                                    unique_name) -> None:
    """Kept, the plan epoch raised next in the same planning worker needs no new socket;
    after a refused check it is closed, as every connection whose work failed."""
    table, commits = unique_name("qs"), unique_name("qs_commits")
    options = _options(hbase_thrift, hbase_thrift2, table, commits, **{"create.table": "true"})
    key = _key(parse_sink_options(options), 0)
    try:
        POOL.close()
        HBaseSinkFunction().validate(options, spark_schema(SCHEMA))
        assert len(POOL) == 1
        kept = POOL.take(key)
        assert kept is not None
        kept.close()
        refused = {**options, "create.table": "false", "table": unique_name("qs_missing")}
        with pytest.raises(ConfigError, match="does not exist"):
            HBaseSinkFunction().validate(refused, spark_schema(SCHEMA))
        assert len(POOL) == 0
    finally:
        _drop(hbase_thrift, table, commits)
