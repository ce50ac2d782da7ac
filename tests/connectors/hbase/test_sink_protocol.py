"""The sink's write + commit protocol against a real HBase, without Spark."""

from __future__ import annotations

import datetime
import decimal
from dataclasses import replace

import happybase
import pyarrow as pa
import pytest

from hbase_clients import thrift2_admin
from hbase_tasks import write_task
from sparkbarrier._exceptions import ConfigError, FencedError, FlushError, SinkError
from sparkbarrier.barrier.markers import CheckpointBarrier, marker_batch, with_marker_columns
from sparkbarrier._faults import FAULT_ENV
from sparkbarrier.connectors.hbase.sink._buffer import FAULT_AFTER_PARTIAL_FLUSH
from sparkbarrier.connectors.hbase.client._gateways import Gateway
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells
from sparkbarrier.connectors.hbase.sink._timestamps import MIN_TABLE_VERSIONS
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity

pytestmark = [pytest.mark.hbase]

KV = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string())])
OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string()), ("op", pa.string())])


def raw_cells(sink, row: bytes) -> dict:
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        return conn.table(sink.opts.table).row(row, include_timestamp=True)
    finally:
        conn.close()


def test_commit_makes_rows_visible_and_uncommitted_stay_invisible(make_sink) -> None:
    sink = make_sink(KV)
    m0 = sink.task([{"id": "a", "v": 1, "s": "x"}, {"id": "b", "v": 2, "s": "y"}], batch=0)
    sink.commit([m0], 0)
    assert sink.read() == [{"id": "a", "v": 1, "s": "x"}, {"id": "b", "v": 2, "s": "y"}]
    sink.task([{"id": "a", "v": 10, "s": None}, {"id": "c", "v": 3, "s": "z"}], batch=1)
    # Written to HBase, not committed: readers still see checkpoint 0 only.
    assert sink.read() == [{"id": "a", "v": 1, "s": "x"}, {"id": "b", "v": 2, "s": "y"}]


def test_delete_then_put_of_one_row_in_one_checkpoint_keeps_the_put(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})
    rows = [{"id": "a", "v": 1, "s": "old", "op": None},
            {"id": "a", "v": None, "s": None, "op": "delete"},
            {"id": "a", "v": 2, "s": None, "op": "upsert"}]
    sink.commit([sink.task(rows, batch=0)], 0)
    assert sink.read() == [{"id": "a", "v": 2, "s": None}]


def test_put_then_delete_of_one_row_in_one_checkpoint_removes_it(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "x", "op": None}], batch=0)], 0)
    rows = [{"id": "a", "v": 5, "s": "y", "op": "UPSERT"}, {"id": "a", "v": None, "s": None, "op": "delete"},
            {"id": "b", "v": 1, "s": None, "op": None}]
    sink.commit([sink.task(rows, batch=1)], 1)
    assert sink.read() == [{"id": "b", "v": 1, "s": None}]


def test_one_key_in_two_tasks_of_a_batch_resolves_to_the_later_task_on_every_replay(
    make_sink,
) -> None:
    """Two splits of one Kafka partition (minPartitions) writing one key: the later split wins."""
    sink = make_sink(OPS, **{"op.column": "op"})
    early = [{"id": "a", "v": 1, "s": "early", "op": None}]
    late = [{"id": "a", "v": 3, "s": "late", "op": None}]
    # Replays run the tasks in any order; the outcome must not depend on it.
    first = [sink.task(late, batch=0, partition=1, plan="first"),
             sink.task(early, batch=0, partition=0, plan="first")]
    sink.commit(first, 0)
    assert sink.read() == [{"id": "a", "v": 3, "s": "late"}]
    replay = [sink.task(early, batch=0, partition=0, plan="replay"),
              sink.task(late, batch=0, partition=1, plan="replay")]
    sink.commit(replay, 0)
    assert sink.read() == [{"id": "a", "v": 3, "s": "late"}]


def test_uncommitted_delete_does_not_hide_committed_row(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "x", "op": None}], batch=0)], 0)
    sink.task([{"id": "a", "v": None, "s": None, "op": "delete"}], batch=1)
    assert sink.read() == [{"id": "a", "v": 1, "s": "x"}]


def test_null_skips_cell_by_default(make_sink) -> None:
    sink = make_sink(KV)
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "x"}], batch=0)], 0)
    sink.commit([sink.task([{"id": "a", "v": None, "s": "y"}], batch=1)], 1)
    assert sink.read() == [{"id": "a", "v": 1, "s": "y"}]


def test_null_deletes_cell_when_not_ignored(make_sink) -> None:
    sink = make_sink(KV, **{"sink.ignore-null-value": "false"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "x"}], batch=0)], 0)
    sink.commit([sink.task([{"id": "a", "v": None, "s": "y"}], batch=1)], 1)
    assert sink.read() == [{"id": "a", "v": None, "s": "y"}]
    sink.commit([sink.task([{"id": "a", "v": 7, "s": None}], batch=2)], 2)
    assert sink.read() == [{"id": "a", "v": 7, "s": None}]


def test_every_type_round_trips_through_the_committed_reader(make_sink) -> None:
    schema = pa.schema([
        ("id", pa.string()), ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()),
        ("i64", pa.int64()), ("f32", pa.float32()), ("f64", pa.float64()), ("dec", pa.decimal128(12, 3)),
        ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("bin", pa.binary())])
    row = {"id": "k", "b": True, "i8": -5, "i16": 300, "i32": -70000, "i64": 2**40, "f32": 1.5, "f64": -0.25,
           "dec": decimal.Decimal("-12.345"), "d": datetime.date(2024, 2, 29),
           "ts": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc), "bin": b"\x00\x01"}
    sink = make_sink(schema)
    sink.commit([sink.task([row], batch=0)], 0)
    assert sink.read() == [row]


def test_columns_mapping_writes_family_and_qualifier(make_sink, hbase_thrift2, unique_name) -> None:
    table = unique_name("t")
    with thrift2_admin(*hbase_thrift2) as admin:
        admin.create_table(table, {f: FamilySpec(max_versions=10, keep_deleted_cells=KeepDeletedCells.TRUE)
                                   for f in ("d", "x")})
    sink = make_sink(KV, table=table, columns="s=x:str")
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "q"}], batch=0)], 0)
    assert set(raw_cells(sink, b"a")) == {b"d:v", b"x:str"}
    assert sink.read() == [{"id": "a", "v": 1, "s": "q"}]


def test_second_writer_with_same_sink_id_is_fenced(make_sink, unique_name) -> None:
    """Query qb takes the sink.id over while qa's batch 1 is in flight: qa's attempt is
    abandoned, so qa's commit is refused (it is conditional on its attempt) and qb's
    commit removes exactly what qa's attempt noted."""
    table = unique_name("t")
    a = make_sink(KV, table=table)
    b = make_sink(KV, table=table)
    a.commit([a.task([{"id": "a", "v": 1, "s": None}], batch=0, query="qa")], 0)
    ma = a.task([{"id": "a", "v": 2, "s": None}], batch=1, query="qa")
    mb = b.task([{"id": "a", "v": 99, "s": None}], batch=0, query="qb")
    assert mb.abandoned == [ma.base_ms]
    with pytest.raises(FencedError, match="another writer"):
        a.commit([ma], 1)
    b.commit([mb], 0)
    # The fenced writer's cells never become visible, nor stay as versions.
    assert b.read() == [{"id": "a", "v": 99, "s": None}]
    assert [v for v, _ in b.versions(b"a", b"d:v")] == [(99).to_bytes(8, "big", signed=True),
                                                        (1).to_bytes(8, "big", signed=True)]


def test_replay_of_committed_batch_is_identical_and_commit_is_noop(make_sink) -> None:
    sink = make_sink(KV)
    rows = [{"id": "a", "v": 1, "s": "x"}, {"id": "a", "v": 2, "s": None}]
    first = sink.task(rows, batch=0)
    record = sink.commit([first], 0)
    before = raw_cells(sink, b"a")
    # Driver died after the sink commit, before Spark's commit log: Spark replays batch 0.
    again = sink.task(rows, batch=0)
    assert again.base_ms == first.base_ms and again.replay_of_committed
    assert raw_cells(sink, b"a") == before
    assert sink.commit([again], 0) == record
    assert sink.read() == [{"id": "a", "v": 2, "s": "x"}]


def test_task_failing_after_partial_flush_is_retried_without_duplicates(make_sink, monkeypatch) -> None:
    sink = make_sink(KV, **{"sink.buffer-flush.max-rows": "2"})
    rows = [{"id": f"r{i}", "v": i, "s": None} for i in range(5)]
    monkeypatch.setenv(FAULT_ENV, FAULT_AFTER_PARTIAL_FLUSH)
    with pytest.raises(FlushError):
        sink.task(rows, batch=0)
    monkeypatch.delenv(FAULT_ENV)
    retry = sink.task(rows, batch=0)
    sink.commit([retry], 0)
    assert sink.read() == sorted(rows, key=lambda r: r["id"])
    ts = [t for _, t in raw_cells(sink, b"r0").values()]
    assert len(ts) == 1


def test_abort_leaves_cells_invisible_and_replay_reuses_timestamps(make_sink) -> None:
    sink = make_sink(KV)
    sink.commit([sink.task([{"id": "a", "v": 1, "s": None}], batch=0)], 0)
    failed = sink.task([{"id": "a", "v": 2, "s": None}], batch=1)
    sink.driver.committer().abort([failed], 1)
    assert sink.read() == [{"id": "a", "v": 1, "s": None}]
    replay = sink.task([{"id": "a", "v": 2, "s": None}], batch=1)
    assert replay.base_ms == failed.base_ms
    sink.commit([replay], 1)
    assert sink.read() == [{"id": "a", "v": 2, "s": None}]


def test_markers_are_stripped_and_offsets_recorded(make_sink) -> None:
    sink = make_sink(KV)
    stream = with_marker_columns(KV)
    data = pa.RecordBatch.from_pylist([{"id": "a", "v": 1, "s": None}], schema=stream)
    marks = marker_batch([CheckpointBarrier(7, 1000, "topic:0", 42), CheckpointBarrier(7, 1000, "topic:1", 5)],
                         stream)
    record = sink.commit([sink.task([data, marks], batch=0)], 0)
    assert record.offsets == {"topic:0": 42, "topic:1": 5} and record.source_checkpoints == [7]
    assert sink.read() == [{"id": "a", "v": 1, "s": None}]


def test_missing_table_is_an_error_at_start(make_sink) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        make_sink(KV, **{"create.table": "false"})


def test_table_keeping_one_version_is_rejected(make_sink, hbase_thrift, unique_name) -> None:
    table = unique_name("t")
    conn = happybase.Connection(*hbase_thrift)
    conn.create_table(table, {"d": {"max_versions": 1}})
    conn.close()
    with pytest.raises(ConfigError, match=f"VERSIONS >= {MIN_TABLE_VERSIONS}"):
        make_sink(KV, table=table)


def test_thrift_down_fails_clearly_and_commits_nothing(make_sink) -> None:
    sink = make_sink(KV)
    bad = replace(sink.opts, port=1, gateways=(Gateway(sink.opts.host, 1),), failover_backoff_ms=10)
    with pytest.raises(SinkError, match="cannot reach the HBase Thrift server"):
        write_task(HBaseTaskWriter(bad, TaskIdentity("q1", 0, 0)),
                   [pa.RecordBatch.from_pylist([{"id": "a", "v": 1, "s": None}], schema=KV)])
    with pytest.raises(SinkError, match="committed nothing"):
        sink.read()


def test_a_refused_check_and_put_is_final_and_a_retried_one_is_checked(make_sink, unique_name) -> None:
    """A False answer to the only try is the server's: no read follows (the task that loses
    the race to record an attempt reads the row once, in its next round). When the answer
    was lost in transport and the call was retried, the retry's False is checked against
    the cell: the first try landed, so it counts as success."""
    from thriftpy2.transport import TTransportException

    from sparkbarrier.connectors.hbase.sink._commit_table import check_and_put, put_cell, read_cell
    from sparkbarrier.connectors.hbase.client._connection import HBaseConnection

    sink = make_sink(KV)
    table, row, column = sink.opts.commit_table, unique_name("cap"), b"c:attempt"
    conn = HBaseConnection(sink.opts, 0)
    try:
        put_cell(conn, table, row, column, b"theirs")
        calls: list[str] = []
        client = conn.connection.client
        real_get, real_cap = client.getRowWithColumns, client.checkAndPut

        def counted_get(*a):
            calls.append("get")
            return real_get(*a)

        client.getRowWithColumns = counted_get
        assert check_and_put(conn, table, row, column, b"ours-before", b"ours") is False
        assert calls == [] and read_cell(conn, table, row, column) == b"theirs"

        def lands_then_drops(*a):  # the server applies it; the answer is lost on the way back
            real_cap(*a)
            raise TTransportException(message="connection reset after the request was sent")

        client.checkAndPut = lands_then_drops
        assert check_and_put(conn, table, row, column, b"theirs", b"ours") is True
        assert read_cell(conn, table, row, column) == b"ours"
    finally:
        conn.close()


def test_a_commit_whose_batch_id_differs_from_its_tasks_reports_is_refused(make_sink) -> None:
    """The batch id reaches the committer twice (Spark's argument, the tasks' reports): checked."""
    from sparkbarrier._exceptions import ProtocolError

    sink = make_sink(KV)
    msg = sink.task([{"id": "a", "v": 1, "s": None}], batch=3)
    with pytest.raises(ProtocolError, match="Spark commits batch 4, but its write tasks report batch 3"):
        sink.driver.committer().commit([msg], 4)
    assert sink.history() == []
