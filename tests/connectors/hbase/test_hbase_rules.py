"""HBase's own rules under the sink's guarantee, against the real server: flushes and compactions.

A memstore flush or a compaction keeps only a family's ``VERSIONS`` newest versions of a
cell, and a major compaction drops delete markers unless the family keeps deleted cells.
The start-up check enforces what the guarantee needs of both (``client._admin.prepare_table``),
and these tests flush and compact (``sparkbarrier.devstack.hbase_admin``: Thrift has no
flush) at each point where the protocol relies on them:

* between two tries of a task (a retry after a partial write);
* between a driver kill and the replay that abandons the attempt;
* between the commit's removal of a losing try's puts and a late put of that try.

The judge is a second sink that ran the committed tries without failures (as in
``test_attempts``): plain scan, every cell's versions, committed and as-of views.
"""

from __future__ import annotations

from collections.abc import Iterator

import happybase
import pyarrow as pa
import pytest

from hbase_tasks import Sink, spark_schema
from sparkbarrier._exceptions import ConfigError, FlushError
from sparkbarrier._faults import FAULT_ENV
from sparkbarrier.connectors.hbase.client._connection import connection_options
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells, Thrift2Admin
from sparkbarrier.connectors.hbase.sink._buffer import FAULT_AFTER_PARTIAL_FLUSH
from sparkbarrier.connectors.hbase.sink._timestamps import MIN_TABLE_VERSIONS, TaskClock
from sparkbarrier.devstack.faults import FAULT_STATE_DIR_ENV
from sparkbarrier.devstack.hbase_admin import HBaseAdminShell

pytestmark = [pytest.mark.hbase]

OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string()), ("op", pa.string())])
FLUSH = {"op.column": "op", "sink.buffer-flush.max-rows": "2"}


@pytest.fixture(scope="module")
def hbase_admin(servers) -> Iterator[HBaseAdminShell]:
    with HBaseAdminShell() as shell:
        yield shell


def _compact_everything(admin: HBaseAdminShell, sink: Sink, *, minor: bool = False) -> None:
    """What a busy region server may do at any moment: a flush, then a major compaction
    (``minor``: a minor compaction and a second flush between them)."""
    admin.flush(sink.opts.table)
    if minor:
        admin.compact(sink.opts.table)
        admin.flush(sink.opts.table)
    admin.major_compact(sink.opts.table)


def _cells(sink: Sink) -> dict[tuple[bytes, bytes], list[bytes]]:
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        table = conn.table(sink.opts.table)
        return {(key, column): table.cells(key, column, versions=1000)
                for key, data in table.scan() for column in data}
    finally:
        conn.close()


def _same_as(sink: Sink, clean: Sink, batches: int) -> None:
    assert sink.plain() == clean.plain()
    assert _cells(sink) == _cells(clean)
    assert sink.read() == clean.read()
    for batch in range(batches):
        assert sink.read(as_of_batch=batch) == clean.read(as_of_batch=batch), batch


def _rows(seed: int) -> list[dict]:
    """Upserts, nulls and deletes of a few keys, each key several times."""
    out = []
    for i in range(12):
        key = f"k{(i * 7 + seed) % 4}"
        if i % 5 == 3:
            out.append({"id": key, "v": None, "s": None, "op": "delete"})
        else:
            out.append({"id": key, "v": seed * 100 + i, "s": None if i % 3 else f"s{i}", "op": None})
    return out


@pytest.mark.timeout(180)
def test_flushes_and_compactions_between_tries_keep_the_retry_exact(make_sink, hbase_admin, monkeypatch,
                                                                   tmp_path) -> None:
    sink, clean = make_sink(OPS, **FLUSH), make_sink(OPS, **FLUSH)
    for s in (sink, clean):
        s.commit([s.task(_rows(1), batch=0, plan="a")], 0)
    _compact_everything(hbase_admin, sink)
    monkeypatch.setenv(FAULT_ENV, f"{FAULT_AFTER_PARTIAL_FLUSH}@2")
    monkeypatch.setenv(FAULT_STATE_DIR_ENV, str(tmp_path))
    with pytest.raises(FlushError):
        sink.task(_rows(2), batch=1, plan="b")
    monkeypatch.delenv(FAULT_ENV)
    _compact_everything(hbase_admin, sink, minor=True)  # the failed try's partial writes, now in store files
    sink.commit([sink.task(_rows(2), batch=1, plan="b")], 1)
    clean.commit([clean.task(_rows(2), batch=1, plan="b")], 1)
    _compact_everything(hbase_admin, sink)
    _compact_everything(hbase_admin, clean)
    _same_as(sink, clean, 2)


@pytest.mark.timeout(180)
def test_flushes_and_compactions_between_a_kill_and_the_replay_keep_the_replay_exact(make_sink, hbase_admin) -> None:
    sink, clean = make_sink(OPS, **FLUSH), make_sink(OPS, **FLUSH)
    for s in (sink, clean):
        s.commit([s.task(_rows(1), batch=0, plan="a")], 0)
    sink.task(_rows(2), batch=1, partition=0, plan="b")  # the driver dies before its commit
    sink.task(_rows(3), batch=1, partition=1, plan="b")
    _compact_everything(hbase_admin, sink)
    replay = [sink.task(_rows(3), batch=1, partition=1, plan="c"), sink.task(_rows(2), batch=1, partition=0, plan="c")]
    _compact_everything(hbase_admin, sink)  # between the replay's writes and its commit's removals
    sink.commit(replay, 1)
    clean.commit([clean.task(_rows(2), batch=1, partition=0, plan="c"),
                  clean.task(_rows(3), batch=1, partition=1, plan="c")], 1)
    _compact_everything(hbase_admin, sink)
    _compact_everything(hbase_admin, clean)
    _same_as(sink, clean, 2)


@pytest.mark.timeout(180)
def test_a_late_put_of_a_removed_try_after_a_major_compaction_stays_invisible(make_sink, hbase_admin) -> None:
    """Two copies of one task saw a key's rows in another order (a shuffle): the one Spark did
    not commit claimed the higher slot, so its put was the newest version until the commit
    removed it. After a major compaction its late put (a killed copy's write still in a
    gateway retry) lands: the removal's marker must still mask it."""
    sink = make_sink(OPS, **FLUSH)
    sink.commit([sink.task([{"id": "k", "v": 1, "s": None, "op": None}], batch=0, plan="a")], 0)
    one, two = ({"id": "k", "v": 10, "s": None, "op": None}, {"id": "k", "v": 20, "s": None, "op": None})
    winner = sink.task([one, two], batch=1, plan="b")  # slot 0, puts v=20
    loser = sink.task([two, one], batch=1, plan="b")   # slot 1, puts v=10 above it
    assert (winner.slot, loser.slot) == (0, 1)
    sink.commit([winner], 1)
    assert sink.read() == [{"id": "k", "v": 20, "s": None}]
    _compact_everything(hbase_admin, sink)
    late = TaskClock(loser.base_ms, loser.partition_id).slot_put_ts(loser.slot)
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        conn.table(sink.opts.table).put(b"k", {b"d:v": (10).to_bytes(8, "big", signed=True)}, timestamp=late)
    finally:
        conn.close()
    assert sink.read() == [{"id": "k", "v": 20, "s": None}]
    assert sink.plain()[b"k"][b"d:v"] == (20).to_bytes(8, "big", signed=True)


def _table(hbase_thrift2, name: str, **family: object) -> None:
    admin = Thrift2Admin(connection_options({"hbase.thrift2.host": f"{hbase_thrift2[0]}:{hbase_thrift2[1]}"}))
    try:
        admin.create_table(name, {"d": FamilySpec(**family)})
    finally:
        admin.close()


@pytest.mark.timeout(60)
def test_a_family_that_drops_deleted_cells_is_refused_at_start_with_the_reason(
        servers, hbase_thrift2, unique_name) -> None:
    table = unique_name("t")
    _table(hbase_thrift2, table, max_versions=100, keep_deleted_cells=KeepDeletedCells.FALSE)
    with pytest.raises(ConfigError, match="KEEP_DELETED_CELLS => FALSE") as err:
        Sink(servers.hbase_thrift, servers.hbase_thrift2, table, OPS, **{"op.column": "op", "create.table": "false"})
    assert err.value.option == "table" and "a major compaction drops those markers" in str(err.value)
    assert f"alter '{table}', {{NAME => 'd', KEEP_DELETED_CELLS => TRUE}}" in str(err.value)
    # at-least-once removes nothing: only the notice about the views
    Sink(servers.hbase_thrift, servers.hbase_thrift2, table, OPS,
         **{"op.column": "op", "create.table": "false", "delivery.guarantee": "at-least-once"})


@pytest.mark.timeout(60)
def test_a_family_keeping_fewer_versions_than_a_batch_in_flight_needs_is_refused(
        servers, hbase_thrift2, unique_name) -> None:
    table = unique_name("t")
    _table(hbase_thrift2, table, max_versions=MIN_TABLE_VERSIONS - 1, keep_deleted_cells=KeepDeletedCells.TRUE)
    with pytest.raises(ConfigError, match=f"VERSIONS >= {MIN_TABLE_VERSIONS}") as err:
        HBaseSinkStart(servers, table)
    assert "a flush can drop the committed version" in str(err.value)
    ok = unique_name("t")
    _table(hbase_thrift2, ok, max_versions=MIN_TABLE_VERSIONS, keep_deleted_cells=KeepDeletedCells.TRUE)
    HBaseSinkStart(servers, ok)


def HBaseSinkStart(servers, table: str) -> Sink:  # noqa: N802 -- reads as the query start it is
    return Sink(servers.hbase_thrift, servers.hbase_thrift2, table, OPS, **{"op.column": "op", "create.table": "false"})


@pytest.mark.timeout(180)
def test_every_try_slot_in_flight_on_the_fewest_versions_allowed_keeps_the_committed_value(
        servers, hbase_thrift2, unique_name, hbase_admin) -> None:
    """VERSIONS = the minimum; a task tried in every slot (6 losers above the winner), flushed and
    compacted before the commit: the committed value survives until the commit, the winner after."""
    table = unique_name("t")
    _table(hbase_thrift2, table, max_versions=MIN_TABLE_VERSIONS, keep_deleted_cells=KeepDeletedCells.TRUE)
    sink = Sink(servers.hbase_thrift, servers.hbase_thrift2, table, OPS, **{"op.column": "op", "create.table": "false"})
    sink.commit([sink.task([{"id": "k", "v": 1, "s": "x", "op": None}], batch=0, plan="a")], 0)
    tries = [sink.task([{"id": "k", "v": 100 + n, "s": "x", "op": None}], batch=1, plan="b")
             for n in range(MIN_TABLE_VERSIONS - 1)]
    assert [t.slot for t in tries] == list(range(MIN_TABLE_VERSIONS - 1))
    _compact_everything(hbase_admin, sink)
    assert sink.read() == [{"id": "k", "v": 1, "s": "x"}]  # the committed version survived the flush
    sink.commit([tries[0]], 1)
    _compact_everything(hbase_admin, sink)
    assert sink.read() == [{"id": "k", "v": 100, "s": "x"}]
    assert sink.read(as_of_batch=0) == [{"id": "k", "v": 1, "s": "x"}]
    assert sink.plain()[b"k"][b"d:v"] == (100).to_bytes(8, "big", signed=True)
