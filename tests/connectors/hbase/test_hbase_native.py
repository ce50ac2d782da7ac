"""The table barrier-hbase leaves is a normal HBase table, against the real servers (#7).

Plain readers (happybase here: any client) see exactly the committed state once no
batch is in flight; timestamps are wall-clock; TTLs, other writers and time ranges
behave as HBase users expect; as-of reads and lineage work from the commit history.
"""

from __future__ import annotations

import time

import happybase
import pyarrow as pa
import pytest
from hbase_clients import thrift2_admin
from polling import wait_for

from sparkbarrier._exceptions import ConfigError
from sparkbarrier.connectors.hbase import lineage
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells

pytestmark = [pytest.mark.hbase]

OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string()), ("op", pa.string())])


def _i64(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


def test_plain_scan_equals_committed_view_with_real_deletes(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.ignore-null-value": "false"})
    sink.commit([sink.task([{"id": k, "v": i, "s": "x", "op": None} for i, k in enumerate("abcd")],
                           batch=0)], 0)
    rows = [{"id": "a", "v": None, "s": None, "op": "delete"},          # row delete
            {"id": "b", "v": 7, "s": None, "op": None},                 # cell delete (null kept)
            {"id": "c", "v": None, "s": None, "op": "delete"},          # delete then put
            {"id": "c", "v": 9, "s": "new", "op": "upsert"}]
    sink.commit([sink.task(rows, batch=1)], 1)
    plain = sink.plain()
    assert plain == {b"b": {b"d:v": _i64(7)}, b"c": {b"d:v": _i64(9), b"d:s": b"new"},
                     b"d": {b"d:v": _i64(3), b"d:s": b"x"}}
    assert sink.read() == [{"id": "b", "v": 7, "s": None}, {"id": "c", "v": 9, "s": "new"},
                           {"id": "d", "v": 3, "s": "x"}]
    # The row deleted and re-put keeps no version from before its delete.
    assert [v for v, _ in sink.versions(b"c", b"d:s")] == [b"new"]


def test_timestamps_stay_near_the_wall_clock_for_a_hot_key(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "100"})
    before = int(time.time() * 1000)
    hot = [{"id": "hot", "v": i, "s": None, "op": "delete" if i % 3 == 2 else None} for i in range(5000)]
    msg = sink.task(hot + [{"id": "hot", "v": 5000, "s": None, "op": None}], batch=0)
    sink.commit([msg], 0)
    after = int(time.time() * 1000)
    (value, ts), = sink.versions(b"hot", b"d:v")
    assert value == _i64(5000)
    assert before <= ts <= after + 5_000, (before, ts, after)
    assert msg.ts_end is not None and msg.ts_end - msg.base_ms <= 8


def test_delete_after_a_flushed_put_opens_a_new_round_and_replays_identically(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "2"})
    rows = [{"id": "a", "v": 1, "s": None, "op": None}, {"id": "b", "v": 1, "s": None, "op": None},
            {"id": "a", "v": None, "s": None, "op": "delete"}, {"id": "c", "v": 1, "s": None, "op": None},
            {"id": "a", "v": 2, "s": None, "op": None}, {"id": "b", "v": None, "s": None, "op": "delete"}]
    first = sink.task(rows, batch=0)
    cells = {k: sink.versions(k, b"d:v") for k in (b"a", b"b", b"c")}
    replay = sink.task(rows, batch=0)  # a retry of the task in the same plan
    sink.commit([replay], 0)
    assert first.base_ms == replay.base_ms and first.slot != replay.slot
    # the retry put at a slot of its own; the commit removed the first try's puts: the same
    # values, one version each, as one try leaves
    assert {k: [v for v, _ in sink.versions(k, b"d:v")] for k in cells} == {
        k: [v for v, _ in c] for k, c in cells.items()}
    assert sink.plain() == {b"a": {b"d:v": _i64(2)}, b"c": {b"d:v": _i64(1)}}
    assert sink.read() == [{"id": "a", "v": 2, "s": None}, {"id": "c", "v": 1, "s": None}]


def test_one_version_per_committed_batch_and_none_from_replays(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})
    for batch in range(3):
        rows = [{"id": "k", "v": batch * 10 + i, "s": None, "op": None} for i in range(4)]
        sink.commit([sink.task(rows, batch=batch)], batch)
        sink.commit([sink.task(rows, batch=batch)], batch)  # a replay of a committed batch
    assert [v for v, _ in sink.versions(b"k", b"d:v")] == [_i64(23), _i64(13), _i64(3)]


def test_as_of_batch_and_time_see_deleted_rows_of_older_checkpoints(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0)], 0)
    first_done = int(time.time() * 1000)
    wait_for(lambda: int(time.time() * 1000) > first_done + 2, 5, "the clock to move")
    sink.commit([sink.task([{"id": "a", "v": None, "s": None, "op": "delete"},
                            {"id": "b", "v": 2, "s": None, "op": None}], batch=1)], 1)
    assert sink.read() == [{"id": "b", "v": 2, "s": None}]
    assert sink.read(as_of_batch=0) == [{"id": "a", "v": 1, "s": None}]
    assert sink.read(as_of_ms=first_done) == [{"id": "a", "v": 1, "s": None}]
    assert sink.read(as_of_batch=1) == sink.read()
    with pytest.raises(ConfigError, match="committed no batch 7"):
        sink.read(as_of_batch=7)


def test_other_writers_puts_and_deletes_behave_normally(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "ours", "op": None}], batch=0)], 0)
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        table = conn.table(sink.opts.table)
        now = int(time.time() * 1000)
        assert dict(table.scan(timestamp=now + 1)) == {b"a": {b"d:v": _i64(1), b"d:s": b"ours"}}
        table.put(b"a", {b"d:s": b"theirs"})          # an ordinary client's put, server clock
        assert table.row(b"a")[b"d:s"] == b"theirs"   # not shadowed by a far-future cell
        table.delete(b"a")                            # deleteAll at "now"
        assert table.row(b"a") == {}                  # removes our cells too
    finally:
        conn.close()
    sink.commit([sink.task([{"id": "z", "v": 5, "s": None, "op": None}], batch=1)], 1)
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        in_range = dict(conn.table(sink.opts.table).scan(timestamp=int(time.time() * 1000) + 10_000))
    finally:
        conn.close()
    assert in_range == {b"z": {b"d:v": _i64(5)}}


def test_ttl_family_is_accepted_and_cells_expire(make_sink, servers, unique_name) -> None:
    table = unique_name("ttl")
    host, port = servers.hbase_thrift2
    with thrift2_admin(host, port) as admin:
        admin.create_table(table, {"d": FamilySpec(max_versions=10, ttl_seconds=2,
                                                   keep_deleted_cells=KeepDeletedCells.TTL)})
    sink = make_sink(OPS, table=table, **{"op.column": "op"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0)], 0)
    assert sink.plain() == {b"a": {b"d:v": _i64(1)}}
    assert wait_for(lambda: sink.plain() == {}, 15, "the TTL to expire the cell")


def test_far_future_writes_are_rejected_by_the_devstacks_timestamp_slop(hbase_thrift, unique_name) -> None:
    """The devstack runs with a 60 s slop, so every sink test above proves near-wall-clock stamps."""
    table = unique_name("slop")
    conn = happybase.Connection(*hbase_thrift)
    try:
        conn.create_table(table, {"d": {"max_versions": 2}})
        far = int(time.time() * 1000) + 3_600_000
        with pytest.raises(Exception, match="(?i)timestamp"):
            conn.table(table).put(b"r", {b"d:v": b"x"}, timestamp=far)
    finally:
        conn.close()


def test_existing_table_without_deleted_cells_warns_with_the_fix_in_at_least_once(
        make_sink, hbase_thrift, unique_name) -> None:
    """Exactly once refuses such a table (``test_hbase_rules``); at-least-once removes nothing and warns."""
    table = unique_name("nokdc")
    conn = happybase.Connection(*hbase_thrift)
    conn.create_table(table, {"d": {"max_versions": 10}})
    conn.close()
    sink = make_sink(OPS, table=table, **{"op.column": "op", "delivery.guarantee": "at-least-once"})
    assert any(f"alter '{table}', {{NAME => 'd', KEEP_DELETED_CELLS => TRUE}}" in w for w in sink.driver.warnings)


def test_lineage_names_the_batch_time_and_offsets_of_each_version(make_sink, unique_name) -> None:
    from sparkbarrier.barrier.markers import CheckpointBarrier, marker_batch, with_marker_columns

    sink = make_sink(OPS, **{"op.column": "op"})
    stream = with_marker_columns(OPS)

    def batch(rows: list[dict], offset: int) -> list[pa.RecordBatch]:
        return [pa.RecordBatch.from_pylist(rows, schema=stream),
                marker_batch([CheckpointBarrier(offset, 0, "orders:0", offset)], stream)]

    sink.commit([sink.task(batch([{"id": "a", "v": 1, "s": None, "op": None}], 10), batch=0)], 0)
    sink.commit([sink.task(batch([{"id": "a", "v": 2, "s": None, "op": None}], 25), batch=1)], 1)
    cells = lineage(sink.opts.host, sink.opts.port, sink.opts.table, "a", column="d:v", versions=5,
                    sink_id=sink.opts.sink_id, commit_table=sink.opts.commit_table)
    assert [(c.value, c.batch_id, c.seq, c.offsets_from, c.offsets_to) for c in cells] == [
        (_i64(2), 1, 2, {"orders:0": 10}, {"orders:0": 25}),
        (_i64(1), 0, 1, {}, {"orders:0": 10})]
    assert all(c.committed_at_ms and c.committed_at_ms >= c.timestamp_ms for c in cells)


def test_a_replaced_attempt_leaves_nothing_for_plain_readers(make_sink) -> None:
    """A new query (fresh checkpoint, same sink.id) takes over; the old batch never commits.

    Its puts are removed (exact-version deletes through Thrift2); its delete markers cannot
    be taken back (documented), so the abandoned batch here only puts.
    """
    sink = make_sink(OPS, **{"op.column": "op"})
    sink.commit([sink.task([{"id": "a", "v": 1, "s": "x", "op": None}], batch=0, query="old")], 0)
    sink.task([{"id": "a", "v": 2, "s": None, "op": None}, {"id": "n", "v": 9, "s": "new", "op": None}],
              batch=1, query="old", partition=3)  # crashed before its commit
    takeover = sink.task([{"id": "b", "v": 5, "s": None, "op": None}], batch=0, query="new")
    assert takeover.abandoned
    sink.commit([takeover], 0)
    assert sink.plain() == {b"a": {b"d:v": _i64(1), b"d:s": b"x"}, b"b": {b"d:v": _i64(5)}}
    assert [v for v, _ in sink.versions(b"a", b"d:v")] == [_i64(1)]
    assert sink.read() == [{"id": "a", "v": 1, "s": "x"}, {"id": "b", "v": 5, "s": None}]


def test_every_key_is_written_once_at_the_tasks_put_slot_over_any_number_of_write_calls(make_sink) -> None:
    """A task nets its whole input per key and writes each key once: a key deleted and put
    again across many write calls keeps one version per batch, at the task's put slot
    (base + 1), above its delete marker (base)."""
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "2"})
    rows = [{"id": "a", "v": 1, "s": None, "op": None}, {"id": "b", "v": 1, "s": None, "op": None},
            {"id": "a", "v": None, "s": None, "op": "delete"}, {"id": "b", "v": 2, "s": None, "op": None},
            {"id": "a", "v": 3, "s": None, "op": None}, {"id": "b", "v": 3, "s": None, "op": None}]
    msg = sink.task(rows, batch=0)
    sink.commit([msg], 0)
    assert [(v, ts - msg.base_ms) for v, ts in sink.versions(b"b", b"d:v")] == [(_i64(3), 1)]
    assert [(v, ts - msg.base_ms) for v, ts in sink.versions(b"a", b"d:v")] == [(_i64(3), 1)]


def test_a_key_deleted_and_rewritten_again_and_again_is_written_once(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "1"})
    rows = []
    for i in range(10):
        rows += [{"id": "h", "v": i, "s": None, "op": None}, {"id": "h", "v": None, "s": None, "op": "delete"}]
    rows.append({"id": "h", "v": 99, "s": None, "op": None})
    msg = sink.task(rows, batch=0)
    sink.commit([msg], 0)
    assert sink.plain() == {b"h": {b"d:v": _i64(99)}}
    assert msg.ts_end - msg.base_ms <= 8


def test_a_replay_flushes_where_the_first_attempt_did_even_under_new_limits(make_sink) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "2"})
    rows = [{"id": "a", "v": 1, "s": None, "op": None}, {"id": "b", "v": 1, "s": None, "op": None},
            {"id": "a", "v": None, "s": None, "op": "delete"}, {"id": "a", "v": 2, "s": None, "op": None}]
    sink.task(rows, batch=0)  # crashed before the commit
    first = sink.versions(b"a", b"d:v")
    relaxed = make_sink(OPS, table=sink.opts.table, **{"op.column": "op", "sink.buffer-flush.max-rows": "1000"})
    replay = relaxed.task(rows, batch=0)
    assert replay.flush_rows == 2
    relaxed.commit([replay], 0)
    assert [v for v, _ in sink.versions(b"a", b"d:v")] == [v for v, _ in first]  # one version, the same value
    assert relaxed.plain() == {b"a": {b"d:v": _i64(2)}, b"b": {b"d:v": _i64(1)}}
