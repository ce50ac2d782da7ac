"""The write path in ordinary use, against the devstack's HBase (issue 49): nulls, row order,
mode switches, the driver's clock, and the commit table's size.

Each case checks the plain scan (what any HBase client sees) and the committed view.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

import pyarrow as pa
import pytest
from test_buffer_netting import model, reorder

from hbase_clients import thrift2_admin

from sparkbarrier._exceptions import ConfigError, FencedError, FlushError
from sparkbarrier.connectors.hbase.sink import _commit_table
from sparkbarrier.connectors.hbase.sink._buffer import FAULT_AFTER_PARTIAL_FLUSH, MutationBuffer
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
from sparkbarrier.connectors.hbase.client._thrift2 import FamilySpec, KeepDeletedCells
from sparkbarrier.connectors.hbase.sink._timestamps import CLOCK_OFFSET_ENV
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity
from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV

pytestmark = [pytest.mark.hbase]

AB = pa.schema([("id", pa.string()), ("a", pa.string()), ("b", pa.string()), ("op", pa.string())])


def r(key: str, a: str | None = None, b: str | None = None, op: str | None = None) -> dict[str, Any]:
    return {"id": key, "a": a, "b": b, "op": op}


def plain_rows(sink: Any) -> dict[str, dict[str, str]]:
    return {k.decode(): {c.decode()[2:]: v.decode() for c, v in cells.items()} for k, cells in sink.plain().items()}


def committed_rows(sink: Any) -> dict[str, dict[str, str]]:
    return {row["id"]: {c: row[c] for c in ("a", "b") if row[c] is not None} for row in sink.read()}


def test_a_null_column_in_a_keys_later_row_keeps_what_its_earlier_row_wrote(make_sink) -> None:
    """Issue 49's case: max-rows 2, ignore-null at its default, Thrift2 set; before, k ended a=3 b=0."""
    sink = make_sink(AB, **{"sink.buffer-flush.max-rows": "2"})
    sink.commit([sink.task([r("k", "0", "0"), r("j", "0", "0")], batch=0)], 0)
    rows = [r("k", "1", "2"), r("p1", "x"), r("k", "3", None), r("p2", "x"),
            r("j", "1", "2"), r("j", None, "5")]
    sink.commit([sink.task(rows, batch=1)], 1)
    want = {"k": {"a": "3", "b": "2"}, "j": {"a": "1", "b": "5"}, "p1": {"a": "x"}, "p2": {"a": "x"}}
    assert plain_rows(sink) == want
    assert committed_rows(sink) == want


def test_a_retry_that_sees_the_rows_in_another_order_leaves_a_deleted_key_deleted(
        make_sink, monkeypatch, tmp_path) -> None:
    """Issue 49's case: attempt 0 (one order) sends its first write call and fails; attempt 1 sees
    the same rows with the keys interleaved differently (a shuffle's retry). k must be absent."""
    sink = make_sink(AB, **{"op.column": "op", "sink.buffer-flush.max-rows": "3"})
    sink.commit([sink.task([r("k", "old")], batch=0)], 0)
    pad = [r(f"x{i:04d}", "p") for i in range(2000)]
    rows = [r("k", "v1"), *pad[:2], r("k", op="delete"), r("m", "a"), r("m", "b"), *pad[2:]]
    monkeypatch.setenv(FAULT_ENV, f"{FAULT_AFTER_PARTIAL_FLUSH}@1")
    monkeypatch.setenv(FAULT_STATE_DIR_ENV, str(tmp_path))
    with pytest.raises(FlushError):
        sink.task(rows, batch=1, plan="e0000000000000000001")
    monkeypatch.delenv(FAULT_ENV)
    again = [row for _, row in reorder([(x["id"], x) for x in rows], random.Random(3))]
    assert again != rows
    msg = sink.task(again, batch=1, plan="e0000000000000000001")
    sink.commit([msg], 1)
    plain = plain_rows(sink)
    assert "k" not in plain and plain["m"] == {"a": "b"} and len(plain) == 2001
    committed = committed_rows(sink)
    assert "k" not in committed and committed["m"] == {"a": "b"}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", range(6))
def test_random_ops_nulls_and_two_tries_in_other_orders_leave_the_model_on_hbase(
        make_sink, monkeypatch, seed: int) -> None:
    """The property test against the real server: random per-key upserts (random nulls, either
    null mode), deletes and re-upserts; two tries of the task with the keys interleaved
    differently, their write calls landing in a random interleaving, some twice."""
    rnd = random.Random(seed)
    keep_nulls = seed % 2 == 1
    sink = make_sink(AB, **{"op.column": "op", "sink.buffer-flush.max-rows": str(rnd.randint(1, 5)),
                            "sink.ignore-null-value": "false" if keep_nulls else "true"})
    keys = [f"k{i}" for i in range(8)]
    state: dict[str, dict[str, str]] = {}
    for batch in range(3):
        rows = _random_rows(rnd, keys, rnd.randint(5, 40))
        state = _applied(state, rows, keep_nulls)
        sent: list[tuple[list[object], int]] = []
        plan = f"e{batch + 1:019d}"
        with monkeypatch.context() as m:
            m.setattr(MutationBuffer, "_send", lambda self, mutations, ts: sent.append((mutations, ts)))
            first = sink.task(rows, batch=batch, plan=plan)
            other = [row for _, row in reorder([(x["id"], x) for x in rows], rnd)]
            second = sink.task(other, batch=batch, plan=plan)
        calls = sent + rnd.sample(sent, len(sent) // 3)
        rnd.shuffle(calls)
        conn = HBaseConnection(sink.opts, 0)
        try:
            for mutations, ts in calls:
                conn.call(lambda c, mu=mutations, t=ts: c.client.mutateRowsTs(sink.opts.table.encode(), mu, t, {}))
        finally:
            conn.close()
        sink.commit([first, second], batch)
        assert plain_rows(sink) == state, f"seed {seed} batch {batch}"
        assert committed_rows(sink) == state, f"seed {seed} batch {batch}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", range(4))
def test_tries_that_saw_a_keys_own_rows_in_other_orders_leave_each_row_as_the_committed_try_left_it(
        make_sink, monkeypatch, seed: int) -> None:
    """Issue 49, item 2's second half: one key's rows merged by a shuffle from several upstream
    tasks come in another order on another try, so the tries put other values and other
    columns. Three tries of a task, each a full shuffle of the rows, their write calls landing
    in a random interleaving, some twice, beside a neighbour task; Spark commits one of them
    (any): every row ends as that try left it, in the plain scan, the committed view and the
    versions, never a mix of two tries."""
    rnd = random.Random(100 + seed)
    keep_nulls = seed % 2 == 1
    sink = make_sink(AB, **{"op.column": "op", "sink.buffer-flush.max-rows": str(rnd.randint(1, 5)),
                            "sink.ignore-null-value": "false" if keep_nulls else "true"})
    keys = [f"k{i}" for i in range(6)]
    state: dict[str, dict[str, str]] = {}
    for batch in range(3):
        rows = _random_rows(rnd, keys, rnd.randint(10, 40))
        tries = [rows, *(rnd.sample(rows, len(rows)) for _ in range(2))]
        neighbour = [r(f"n{batch}-{i}", f"n{i}") for i in range(3)]
        sent: list[tuple[list[object], int]] = []
        plan = f"e{batch + 1:019d}"
        with monkeypatch.context() as m:
            m.setattr(MutationBuffer, "_send", lambda self, mutations, ts: sent.append((mutations, ts)))
            msgs = [sink.task(t, batch=batch, plan=plan) for t in tries]
            beside = sink.task(neighbour, batch=batch, partition=1, plan=plan)
        assert len({m.slot for m in msgs}) == 3  # each try put at a timestamp of its own
        calls = sent + rnd.sample(sent, len(sent) // 3)
        rnd.shuffle(calls)
        conn = HBaseConnection(sink.opts, 0)
        try:
            for mutations, ts in calls:
                conn.call(lambda c, mu=mutations, t=ts: c.client.mutateRowsTs(sink.opts.table.encode(), mu, t, {}))
        finally:
            conn.close()
        won = rnd.randrange(3)
        # Spark hands the driver one report per task: the committed try's (the last of a partition)
        sink.commit([*(m for i, m in enumerate(msgs) if i != won), msgs[won], beside], batch)
        state = _applied(state, tries[won], keep_nulls)
        state.update({x["id"]: {"a": x["a"]} for x in neighbour})
        assert plain_rows(sink) == state, f"seed {seed} batch {batch} try {won}"
        assert committed_rows(sink) == state, f"seed {seed} batch {batch} try {won}"
        for key, cells in state.items():
            for column in cells:
                assert len(sink.versions(key.encode(), f"d:{column}".encode())) <= batch + 1, (key, column)


def test_an_attempt_noted_under_a_random_token_is_removed_at_slot_0(make_sink) -> None:
    """Upgrade: the release before this one, without Thrift2, noted tries under a random token
    and put at slot 0. A replay by this one abandons such an attempt and removes its puts
    there. The attempt is this release's, its note rewritten as that release wrote it."""
    from sparkbarrier.connectors.hbase.sink._commit_table import (
        TaskNote, delete_task_notes, put_cell, read_sink_row, write_note_chunks)

    old = make_sink(AB)
    old.task([r("a", "1")], batch=0, plan="e0000000000000000001")
    conn = HBaseConnection(old.opts, 0)
    try:
        (note,) = read_sink_row(conn, old.opts.commit_table, old.opts.sink_id).notes
        assert note.token == "s0"
        token = TaskNote(note.base_ms, note.partition, "9f2c41d07e3a", owner="9f2c41d07e3a", block=note.block)
        done = write_note_chunks(conn, old.opts.commit_table, old.opts.sink_id, token, [b"a"])
        put_cell(conn, old.opts.commit_table, old.opts.sink_id, done.column(), done.to_bytes())
        delete_task_notes(conn, old.opts.commit_table, old.opts.sink_id, [note])
    finally:
        conn.close()
    assert [n.rsplit(b"-", 1)[1] for n in old.notes()] == [b"9f2c41d07e3a"]  # no slot claimed
    replay = old.task([r("b", "2")], batch=0, plan="e0000000000000000002")
    assert old.commit([replay], 0).gaps == []
    assert plain_rows(old) == {"b": {"a": "2"}} == committed_rows(old)


def test_a_try_still_running_when_its_batch_commits_sends_nothing(make_sink) -> None:
    """A speculative copy Spark has not killed yet, past its placement when the driver commits
    the batch: the commit closed the attempt, so the copy's note is refused and it writes nothing
    (it would put other values, at a slot of its own, above the committed try's). A copy that
    places after the commit finds the batch committed and writes nothing either."""
    sink = make_sink(AB)
    sink.commit([sink.task([r("k", "0")], batch=0, plan="e0000000000000000001")], 0)
    late = HBaseTaskWriter(sink.opts, TaskIdentity("q1", 1, 0, "e0000000000000000002"))
    late.begin()
    late.add(pa.RecordBatch.from_pylist([r("k", "late", "late")], schema=AB))
    sink.commit([sink.task([r("k", "1")], batch=1, plan="e0000000000000000002")], 1)
    with pytest.raises(FencedError, match="being committed"):
        late.snapshot(final=True)
    late.close()
    after = sink.task([r("k", "after")], batch=1, plan="e0000000000000000002")
    assert after.replay_of_committed
    assert plain_rows(sink) == {"k": {"a": "1"}} == committed_rows(sink)


def _random_rows(rnd: random.Random, keys: list[str], n: int) -> list[dict[str, Any]]:
    """``n`` rows over ``keys``: a fifth deletes, the rest upserts with random nulls in ``a`` and ``b``."""
    rows = []
    for _ in range(n):
        key = rnd.choice(keys)
        if rnd.random() < 0.2:
            rows.append(r(key, op="delete"))
            continue
        rows.append(r(key, *(rnd.choice([None, f"{c}{rnd.randrange(9)}"]) for c in ("a", "b"))))
    return rows


def _applied(state: dict[str, dict[str, str]], rows: list[dict[str, Any]],
             keep_nulls: bool) -> dict[str, dict[str, str]]:
    """``state`` after ``rows``, by the netting test's model of the batch (``test_buffer_netting.model``)."""
    before = {k.encode(): {c.encode(): v.encode() for c, v in cells.items()} for k, cells in state.items()}
    batch = [(x["id"].encode(), x["op"] or "upsert",
              {c.encode(): None if x[c] is None else x[c].encode() for c in ("a", "b")}) for x in rows]
    after = model(before, batch, keep_nulls)
    return {k.decode(): {c.decode(): v.decode() for c, v in cells.items()} for k, cells in after.items()}


def test_exactly_once_and_at_least_once_follow_each_other_on_one_sink_id(make_sink) -> None:
    """Issue 49: a query switched to at-least-once under an exactly-once query's sink.id was fenced
    at its first batch (plan ids of the two modes were compared as strings). Both ways now."""
    eo = make_sink(AB)
    eo.commit([eo.task([r("a", "1")], batch=0, query="q-eo", plan="e0000000000000000010@1")], 0)
    alo = make_sink(AB, table=eo.opts.table, **{"delivery.guarantee": "at-least-once"})
    alo.commit([alo.task([r("b", "2")], batch=0, query="q-alo", plan="e0000000000000000011@1")], 0)
    back = make_sink(AB, table=eo.opts.table)
    back.commit([back.task([r("c", "3")], batch=0, query="q-eo2", plan="e0000000000000000012@1")], 0)
    assert plain_rows(eo) == {"a": {"a": "1"}, "b": {"a": "2"}, "c": {"a": "3"}}
    assert [h.query_id for h in eo.history()] == ["q-eo", "q-alo", "q-eo2"]


def test_the_batch_writes_at_the_planning_drivers_clock_not_an_executors(make_sink, monkeypatch) -> None:
    """Issue 49: the base came from whichever executor placed first; one 10 minutes ahead moved
    every later batch 10 minutes into the future. The plan carries the driver's clock."""
    sink = make_sink(AB)
    driver_now = int(time.time() * 1000)
    monkeypatch.setenv(CLOCK_OFFSET_ENV, str(10 * 60 * 1000))  # this executor is 10 minutes ahead
    msg = sink.task([r("a", "1")], batch=0, plan=f"e0000000000000000001@{driver_now}")
    monkeypatch.delenv(CLOCK_OFFSET_ENV)
    sink.commit([msg], 0)
    assert driver_now <= msg.base_ms < driver_now + 60_000
    (_, ts), = sink.versions(b"a", b"d:a")
    assert ts < int(time.time() * 1000) + 60_000


def test_the_sink_row_stays_small_and_notes_go_once_their_attempt_is_final(make_sink, monkeypatch) -> None:
    """A task's keys go into chunk rows of their own, not the sink row (which takes two cells per
    try); the notes of a committed attempt go when the next batch records its attempt; an
    abandoned attempt's notes go with the versions they name, when the replacing batch commits."""
    monkeypatch.setattr(_commit_table, "NOTE_CHUNK_BYTES", 64)  # many chunks from a few keys
    sink = make_sink(AB)
    rows = [r(f"key-{i:05d}", "v") for i in range(300)]
    msg = sink.task(rows, batch=0, plan="e0000000000000000001")
    notes = sink.notes()
    assert len(notes) == 1 and all(len(v) < 200 for v in notes.values())
    assert sink.note_rows() == 60  # 300 keys of 13 bytes with their lengths, 5 to a 64-byte chunk
    # the driver dies before the commit: a new plan abandons the attempt and writes other values
    replay = sink.task([r(f"key-{i:05d}", "w") for i in range(300)], batch=0, plan="e0000000000000000002")
    assert replay.abandoned == [msg.base_ms]
    sink.commit([replay], 0)
    assert [v for v, _ in sink.versions(b"key-00007", b"d:a")] == [b"w"]  # the abandoned put is gone
    assert [n for n in sink.notes() if str(msg.base_ms).encode() in n] == []
    # the next batch's attempt makes batch 0's notes final: they go, batch 1's stay until batch 2
    last = sink.task([r("z", "1")], batch=1, plan="e0000000000000000003")
    sink.commit([last], 1)
    assert [c.split(b"-")[1] for c in sink.notes()] == [str(last.base_ms).encode()]
    assert sink.note_rows() == 1


def test_a_table_with_new_version_behavior_is_refused_at_start_naming_the_alter(
        make_sink, servers, unique_name) -> None:
    """Under NEW_VERSION_BEHAVIOR a delete no longer masks a put with a lower timestamp that
    arrives after it (a late copy's, an abandoned attempt's): the query start refuses it."""
    table = unique_name("nvb")
    with thrift2_admin(*servers.hbase_thrift2) as admin:
        admin.create_table(table, {"d": FamilySpec(max_versions=10, keep_deleted_cells=KeepDeletedCells.TRUE,
                                                   attributes={b"NEW_VERSION_BEHAVIOR": b"true"})})
        assert admin.family_settings(table)["d"].new_version_behavior
    alter = re.escape(f"alter '{table}', {{NAME => 'd', NEW_VERSION_BEHAVIOR => 'false'}}")
    with pytest.raises(ConfigError, match=f"NEW_VERSION_BEHAVIOR => true.*{alter}") as exc:
        make_sink(AB, table=table, **{"create.table": "false"})
    assert exc.value.option == "table"


def test_a_replay_under_a_sink_id_another_series_committed_to_since_writes_nothing(make_sink) -> None:
    """Issue 49: a sink.id shared by a stream and batch writes (allowed): the stream's replay of
    batch 0, after the batch series committed on top of it, was applied a second time."""
    sink = make_sink(AB)
    sink.commit([sink.task([r("k", "stream")], batch=0, query="stream", plan="e0000000000000000001")], 0)
    sink.commit([sink.task([r("k", "series")], batch=0, query="series", plan="e0000000000000000002")], 0)
    replay = sink.task([r("k", "stream")], batch=0, query="stream", plan="e0000000000000000003")
    assert replay.replay_of_committed
    assert sink.commit([replay], 0) is None
    assert plain_rows(sink) == {"k": {"a": "series"}} == committed_rows(sink)
    assert [(h.query_id, h.batch_id) for h in sink.history()] == [("stream", 0), ("series", 0)]


def test_history_retention_keeps_the_newest_commits_and_one_is_refused(make_sink) -> None:
    sink = make_sink(AB, **{"commit.history.retain": "3"})
    for batch in range(6):
        sink.commit([sink.task([r("k", str(batch))], batch=batch, plan=f"e{batch + 1:019d}")], batch)
    # the task that placed batch 5 copied sequence 5 (batch 4) and kept the last 3 rows: 3, 4, 5;
    # sequence 6 (batch 5) is c:commit
    assert sink.history_rows() == [3, 4, 5]
    assert [h.batch_id for h in sink.history()] == [2, 3, 4, 5]
    assert [row["a"] for row in sink.read(as_of_batch=2)] == ["2"]
    with pytest.raises(ConfigError, match="commit.history.retain.*is 1"):
        make_sink(AB, **{"commit.history.retain": "1"})
