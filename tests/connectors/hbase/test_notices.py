"""barrier-hbase's warnings are given once per query, not once per process, task or start (issue 21).

pyspark validates a sink in every planning worker that plans one of its batches and
commits in whichever pooled worker is idle; a drain restarts both. Each test below
plays those processes as separate function and committer instances against the real
HBase, where the once-only record lives, and counts the WARNING records.
"""

from __future__ import annotations

import logging

import happybase
import pyarrow as pa
import pytest
from hbase_clients import thrift2_admin
from hbase_tasks import spark_schema

from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction
from sparkbarrier.connectors.hbase.sink._notices import first_notice
from sparkbarrier.connectors.hbase._options import parse_sink_options
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(300)]

OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("op", pa.string())])
COMMITS = "sparkbarrier_commits_test"
FUNCTION_LOG = "sparkbarrier.connectors.hbase.sink._sink_function"
COMMITTER_LOG = "sparkbarrier.connectors.hbase.sink._committer"


def _options(hbase: tuple[str, int], table: str, thrift2: tuple[str, int] | None = None) -> dict[str, str]:
    """Without Thrift2 at least once (exactly once refuses to start without it)."""
    return {"hbase.thrift.host": hbase[0], "hbase.thrift.port": str(hbase[1]), "table": table,
            "hbase.thrift2.port": str(thrift2[1]) if thrift2 else "", "rowkey": "id", "op.column": "op",
            "create.table": "true", "sink.id": table, "commit.table": COMMITS,
            "delivery.guarantee": "exactly-once" if thrift2 else "at-least-once"}


def _validate(options: dict[str, str]) -> HBaseSinkFunction:
    """One planning process's query-start check (a fresh function, as pyspark builds it)."""
    fn = HBaseSinkFunction()
    fn.validate(options, spark_schema(OPS))
    return fn


def _warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= logging.WARNING]


def test_a_table_created_through_thrift1_is_warned_about_once(hbase_thrift, unique_name, caplog) -> None:
    """Query start in two planning processes, then the drain's start: one warning, with the fix."""
    table = unique_name("kdc1")
    options = _options(hbase_thrift, table)  # no Thrift2: the sink cannot set KEEP_DELETED_CELLS
    caplog.set_level(logging.INFO, logger=FUNCTION_LOG)
    first, second, drain = (_validate(options) for _ in range(3))
    warned = _warnings(caplog, FUNCTION_LOG)
    assert len(warned) == 1, warned
    assert "created through Thrift1" in warned[0]
    assert f"alter '{table}', {{NAME => 'd', KEEP_DELETED_CELLS => TRUE}}" in warned[0]
    assert first.warnings == warned and second.warnings == drain.warnings == []
    infos = [r.getMessage() for r in caplog.records if r.name == FUNCTION_LOG and r.levelno == logging.INFO]
    assert sum("warned once, when sink.id" in m for m in infos) == 2


def test_an_existing_table_thrift1_cannot_check_is_warned_about_once(hbase_thrift, unique_name,
                                                                      caplog) -> None:
    table = unique_name("kdc2")
    conn = happybase.Connection(*hbase_thrift)
    try:
        conn.create_table(table, {"d": {"max_versions": 10}})
    finally:
        conn.close()
    caplog.set_level(logging.WARNING, logger=FUNCTION_LOG)
    for _ in range(3):
        _validate(_options(hbase_thrift, table))
    warned = _warnings(caplog, FUNCTION_LOG)
    assert len(warned) == 1 and "cannot be checked over Thrift1" in warned[0], warned


def test_a_table_found_right_makes_the_warning_news_again(hbase_thrift, hbase_thrift2, unique_name,
                                                          caplog) -> None:
    """Thrift2 sees the families keep deleted cells: the record goes, so a later doubt warns again."""
    table = unique_name("kdc3")
    with thrift2_admin(*hbase_thrift2) as admin:
        admin.create_table(table, {"d": FamilySpec(max_versions=10, keep_deleted_cells=KeepDeletedCells.TRUE)})
    caplog.set_level(logging.WARNING, logger=FUNCTION_LOG)
    _validate(_options(hbase_thrift, table))
    _validate(_options(hbase_thrift, table))
    assert len(_warnings(caplog, FUNCTION_LOG)) == 1
    assert _validate(_options(hbase_thrift, table, hbase_thrift2)).warnings == []  # checked: fine
    _validate(_options(hbase_thrift, table))
    assert len(_warnings(caplog, FUNCTION_LOG)) == 2


def test_first_notice_is_true_once_per_key_and_again_for_a_new_key(hbase_thrift, unique_name) -> None:
    opts = parse_sink_options(_options(hbase_thrift, unique_name("n")))
    conn = HBaseConnection(opts)
    try:
        from sparkbarrier.connectors.hbase.sink._commit_table import ensure_commit_table

        ensure_commit_table(conn, COMMITS)
        sink = opts.sink_id
        assert sink is not None
        said = [first_notice(conn, COMMITS, sink, "k", {"a": 1}) for _ in range(3)]
        assert said == [True, False, False]
        assert first_notice(conn, COMMITS, sink, "other", {"a": 1})  # kinds are independent
        assert first_notice(conn, COMMITS, sink, "k", {"a": 2})
        assert not first_notice(conn, COMMITS, sink, "k", {"a": 2})
    finally:
        conn.close()

