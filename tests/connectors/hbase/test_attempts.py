"""The kill-point matrix: every fault point of a batch × every query shape, against a real HBase.

A batch's tasks are driven by hand (no Spark; ``hbase_tasks``): a *plan* is one planned
batch, the way Spark hands the batch's records to write tasks. A driver restart replans
the batch, and the replay's plan may hand the records to other task ids (Spark's JVM
Kafka source plans offset ranges in no fixed order) or, behind a round-robin shuffle, to
other tasks altogether. Each case runs three batches; the middle one is hit by the fault
and finished by later plans. The judge is a second sink that ran, without failures, the
plans that committed: the plain scan, every cell's version values, the committed view
and the as-of view of every batch must be equal (``_attempts``: where a task writes
follows from the batch, plan and task ids, never from the data).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import happybase
import pyarrow as pa
import pytest

from sparkbarrier._exceptions import FencedError, FlushError, ProtocolError, SinkError
from sparkbarrier.connectors.hbase.sink._buffer import FAULT_AFTER_PARTIAL_FLUSH
from sparkbarrier.connectors.hbase.sink._commit_table import ATTEMPT_COLUMN, AttemptRecord, read_state
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
from sparkbarrier.connectors._partitioners import spark_hashes
from sparkbarrier.connectors.hbase.sink._timestamps import BATCH_SPAN_MS, MAX_TASKS, TASK_WIDTH_MS, batch_span_ms
from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV
from hbase_tasks import spark_schema

pytestmark = [pytest.mark.hbase]

OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string()), ("op", pa.string())])
FLUSH = {"op.column": "op", "sink.buffer-flush.max-rows": "2"}
Row = dict
Records = dict[str, list[Row]]  # Kafka channel ("topic:partition") -> its records in offset order


def records(seed: int, channels: list[str], per_channel: int = 9) -> Records:
    """Keyed upserts and deletes; keys repeat inside a channel (its per-key order is Kafka's)."""
    rnd = random.Random(seed)
    out: Records = {}
    for channel in channels:
        rows = []
        for i in range(per_channel):
            key = f"{channel.replace(':', '-')}-k{rnd.randrange(3)}"
            if rnd.random() < 0.25:
                rows.append({"id": key, "v": None, "s": None, "op": "delete"})
            else:
                rows.append({"id": key, "v": seed * 100 + i, "s": rnd.choice([None, "x", "y"]), "op": None})
        out[channel] = rows
    return out


# -- query shapes: (records, replay variant) -> the input of each write task, by task id ---

def _channels(recs: Records, variant: int) -> list[str]:
    """The order Spark planned the channels in: the replay's differs (the JVM source's order)."""
    names = sorted(recs)
    return names if variant == 0 else names[::-1]


def one_task_per_partition(recs: Records, variant: int) -> list[list[Row]]:
    return [recs[c] for c in _channels(recs, variant)]


def min_partitions(recs: Records, variant: int) -> list[list[Row]]:
    """Spark's minPartitions: each partition's range cut into consecutive splits, in offset order."""
    tasks = []
    for c in _channels(recs, variant):
        rows = recs[c]
        cut = [0, len(rows) // 3, 2 * len(rows) // 3, len(rows)]
        tasks += [rows[a:b] for a, b in zip(cut, cut[1:])]
    return tasks


def spark_partition(key: str, n: int) -> int:
    """Where Spark's ``HashPartitioning`` sends ``key`` among ``n`` partitions (then the task is keyed, ``_keyed``)."""
    return int(spark_hashes([key.encode()], "bytes")[0]) % n


def hash_shuffle(recs: Records, variant: int, n: int = 3) -> list[list[Row]]:
    """repartition(n, key): a key's rows in one task, in its partition's order."""
    tasks: list[list[Row]] = [[] for _ in range(n)]
    for c in _channels(recs, variant):
        for r in recs[c]:
            tasks[spark_partition(r["id"], n)].append(r)
    return tasks


def round_robin(recs: Records, variant: int, n: int = 3) -> list[list[Row]]:
    """repartition(n): rows dealt over the tasks; the replay deals them in another order."""
    tasks: list[list[Row]] = [[] for _ in range(n)]
    for i, r in enumerate(r for c in _channels(recs, variant) for r in recs[c]):
        tasks[i % n].append(r)
    return tasks


def aggregation(recs: Records, variant: int, n: int = 2) -> list[list[Row]]:
    """groupBy(key).agg(last): one row per key, by hash; a replay meets the keys in another order."""
    last: dict[str, Row] = {}
    for c in sorted(recs):
        for r in recs[c]:
            last[r["id"]] = r
    tasks: list[list[Row]] = [[] for _ in range(n)]
    for key in sorted(last, reverse=bool(variant)):
        tasks[spark_partition(key, n)].append(last[key])
    return tasks


def coalesce_one(recs: Records, variant: int) -> list[list[Row]]:
    return [[r for c in _channels(recs, variant) for r in recs[c]]]


SHAPES: dict[str, tuple[Callable[[Records, int], list[list[Row]]], list[str]]] = {
    "per-partition": (one_task_per_partition, ["t:0", "t:1"]),
    "minPartitions": (min_partitions, ["t:0", "t:1"]),
    "hash-shuffle": (hash_shuffle, ["t:0", "t:1"]),
    "round-robin": (round_robin, ["t:0", "t:1"]),
    "aggregation": (aggregation, ["t:0", "t:1"]),
    "coalesce": (coalesce_one, ["t:0", "t:1"]),
    "union-two-topics": (one_task_per_partition, ["a:0", "a:1", "b:0"]),
}


# -- kill points of the middle batch -----------------------------------------------------

@dataclass
class Run:
    sink: object
    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    shape: Callable[[Records, int], list[list[Row]]]
    plans: int = 0

    def plan_id(self) -> str:
        self.plans += 1
        return f"plan-{self.plans:03d}"

    def tasks(self, recs: Records, batch: int, variant: int, plan: str, *, upto: int | None = None) -> list:
        inputs = self.shape(recs, variant)
        return [self.sink.task(rows, batch=batch, partition=p, plan=plan)  # empty ones too, as Spark runs them
                for p, rows in enumerate(inputs[:upto])]

    def crash_in_task(self, recs: Records, batch: int, variant: int, plan: str, task: int, flush: int) -> None:
        """Tasks before ``task`` finish; ``task`` dies after its ``flush``-th flush; the rest never run."""
        inputs = self.shape(recs, variant)
        self.tasks(recs, batch, variant, plan, upto=task)
        state = self.tmp / f"faults-{plan}"
        state.mkdir()
        self.monkeypatch.setenv(FAULT_ENV, f"{FAULT_AFTER_PARTIAL_FLUSH}@{flush}")
        self.monkeypatch.setenv(FAULT_STATE_DIR_ENV, str(state))
        try:
            with pytest.raises(FlushError):
                self.sink.task(inputs[task], batch=batch, partition=task, plan=plan)
        finally:
            self.monkeypatch.delenv(FAULT_ENV)
            self.monkeypatch.delenv(FAULT_STATE_DIR_ENV)


def _biggest(run: Run, recs: Records) -> int:
    """The task with the most rows (the first of them): it flushes more than once."""
    inputs = run.shape(recs, 0)
    return max(range(len(inputs)), key=lambda p: (len(inputs[p]), -p))


def kill_mid_write(run: Run, recs: Records, batch: int) -> int:
    """The driver dies while the last task is writing (after its first flush); replay on the other plan."""
    last = max(p for p, rows in enumerate(run.shape(recs, 0)) if rows)  # the last task that writes
    run.crash_in_task(recs, batch, 0, run.plan_id(), task=last, flush=1)
    run.sink.commit(run.tasks(recs, batch, 1, run.plan_id()), batch)
    return 1


def kill_after_flush_before_commit(run: Run, recs: Records, batch: int) -> int:
    run.tasks(recs, batch, 0, run.plan_id())
    run.sink.commit(run.tasks(recs, batch, 1, run.plan_id()), batch)
    return 1


def kill_after_commit_before_commit_log(run: Run, recs: Records, batch: int) -> int:
    """Spark replays a batch the sink committed: the replay writes nothing, its commit is a no-op."""
    run.sink.commit(run.tasks(recs, batch, 0, run.plan_id()), batch)
    replay = run.tasks(recs, batch, 1, run.plan_id())
    assert all(m.replay_of_committed for m in replay)
    run.sink.commit(replay, batch)
    return 0


def task_retry_then_commit(run: Run, recs: Records, batch: int) -> int:
    """A task fails mid-write and Spark retries it in the same plan (same input): no restart."""
    plan = run.plan_id()
    run.crash_in_task(recs, batch, 0, plan, task=_biggest(run, recs), flush=2)
    run.sink.commit(run.tasks(recs, batch, 0, plan), batch)
    return 0


def killed_twice(run: Run, recs: Records, batch: int) -> int:
    """Killed mid-write, then killed again after the replay flushed everything: three plans."""
    run.crash_in_task(recs, batch, 0, run.plan_id(), task=_biggest(run, recs), flush=1)
    run.tasks(recs, batch, 1, run.plan_id())
    run.sink.commit(run.tasks(recs, batch, 0, run.plan_id()), batch)
    return 0


KILLS = {
    "mid-write": kill_mid_write,
    "after-flush-before-commit": kill_after_flush_before_commit,
    "after-commit-before-commit-log": kill_after_commit_before_commit_log,
    "task-retry": task_retry_then_commit,
    "killed-twice": killed_twice,
}


def cells(sink) -> dict[tuple[bytes, bytes], list[bytes]]:
    """Every cell's version values, newest first (timestamps differ between sinks; values must not)."""
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        table = conn.table(sink.opts.table)
        out = {}
        for key, data in table.scan():
            for column in data:
                out[(key, column)] = [v for v in table.cells(key, column, versions=1000)]
        return out
    finally:
        conn.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kill", list(KILLS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_kill_point_and_query_shape_ends_as_a_run_without_failures(
        shape: str, kill: str, make_sink, monkeypatch, tmp_path) -> None:
    split, channels = SHAPES[shape]
    batches = [records(seed, channels) for seed in (1, 2, 3)]
    sink, clean = make_sink(OPS, **FLUSH), make_sink(OPS, **FLUSH)
    run = Run(sink, tmp_path, monkeypatch, split)
    sink.commit(run.tasks(batches[0], 0, 0, run.plan_id()), 0)
    committed_variant = KILLS[kill](run, batches[1], 1)
    sink.commit(run.tasks(batches[2], 2, 0, run.plan_id()), 2)

    for batch, variant in ((0, 0), (1, committed_variant), (2, 0)):
        clean.commit([clean.task(rows, batch=batch, partition=p, plan="clean")
                      for p, rows in enumerate(split(batches[batch], variant))], batch)

    assert sink.plain() == clean.plain()
    assert cells(sink) == cells(clean)  # one version per batch that changed a cell: nothing abandoned stays
    assert sink.read() == clean.read()
    for batch in (0, 1, 2):
        assert sink.read(as_of_batch=batch) == clean.read(as_of_batch=batch), batch
    history = sink.history()  # every commit once, in order; all but the newest copied into rows
    assert [r.batch_id for r in history] == [0, 1, 2] and [r.seq for r in history] == [1, 2, 3]
    assert sink.history_rows() == [1, 2]
    if shape in ("hash-shuffle", "aggregation"):  # Spark's hash partitioning: keyed tasks, one block (``_keyed``)
        assert history[2].ts_hi - history[2].ts_lo == TASK_WIDTH_MS


def test_a_replay_writes_above_the_abandoned_attempt_and_removes_exactly_what_it_noted(make_sink) -> None:
    sink = make_sink(OPS, **FLUSH)
    first = sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0, partition=1, plan="p1")
    replay = sink.task([{"id": "b", "v": 2, "s": None, "op": None}], batch=0, partition=1, plan="p2")
    # above what the abandoned try noted it wrote: task 1's own block (2; only task 0 is keyed
    # in a first batch), not the attempt's whole span
    assert replay.base_ms >= first.base_ms + 3 * TASK_WIDTH_MS
    assert replay.abandoned == [first.base_ms]
    record = sink.commit([replay], 0)
    assert record.gaps == []  # its puts are removed: no range of the table needs hiding from readers
    # "a" was only in the abandoned attempt (a query whose input changed): its noted put is
    # removed (the version), not read.
    assert sink.read() == [{"id": "b", "v": 2, "s": None}]
    assert b"a" not in sink.plain()
    # the abandoned attempt's notes go with its versions; the committed one's when the next batch places
    assert [c for c in sink.notes() if str(first.base_ms).encode() in c] == []
    assert all(str(replay.base_ms).encode() in c for c in sink.notes())


def test_an_abandoned_attempt_without_notes_keeps_its_gap(make_sink) -> None:
    """At least once notes nothing: its abandoned puts stay, and the views skip their range."""
    alo = make_sink(OPS, **FLUSH, **{"delivery.guarantee": "at-least-once"})
    first = alo.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0, plan="e0000000000000000001")
    sink = make_sink(OPS, table=alo.opts.table, **FLUSH)
    replay = sink.task([{"id": "b", "v": 2, "s": None, "op": None}], batch=0, plan="e0000000000000000002")
    record = sink.commit([replay], 0)
    assert record.gaps == [[first.base_ms, first.base_ms + batch_span_ms(MAX_TASKS)]]
    assert sink.read() == [{"id": "b", "v": 2, "s": None}]


def test_a_task_of_an_older_plan_is_fenced_once_the_batch_was_planned_again(make_sink) -> None:
    sink = make_sink(OPS, **FLUSH)
    sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0, partition=0, plan="p2")
    with pytest.raises(FencedError, match="leftover"):
        sink.task([{"id": "a", "v": 9, "s": None, "op": None}], batch=0, partition=1, plan="p1")


def test_an_at_least_once_thrift1_only_sink_leaves_the_abandoned_cells_as_older_versions_only(make_sink) -> None:
    """Without hbase.thrift2.port nothing can delete exact versions (exactly once is refused
    then, ``test_sink_options``): at least once, what stays, and where."""
    sink = make_sink(OPS, **FLUSH, **{"hbase.thrift2.port": "", "create.table": "true",
                                      "delivery.guarantee": "at-least-once"})
    rows = [{"id": "a", "v": 1, "s": None, "op": None}, {"id": "a", "v": 2, "s": None, "op": None},
            {"id": "a", "v": 3, "s": None, "op": None}]
    sink.commit([sink.task([{"id": "a", "v": 0, "s": None, "op": None}], batch=0, plan="p0")], 0)
    sink.task(rows, batch=1, plan="p1")
    sink.commit([sink.task(rows, batch=1, plan="p2")], 1)
    assert sink.read() == [{"id": "a", "v": 3, "s": None}] == sink.read(as_of_batch=1)
    assert sink.read(as_of_batch=0) == [{"id": "a", "v": 0, "s": None}]
    assert sink.plain()[b"a"][b"d:v"] == (3).to_bytes(8, "big", signed=True)
    # The abandoned attempt's version stays below the replay's, in the gap. Each attempt
    # wrote "a" once (a task writes each key once, _buffer).
    three, zero = ((n).to_bytes(8, "big", signed=True) for n in (3, 0))
    assert [v for v, _ in sink.versions(b"a", b"d:v")] == [three, three, zero]


def test_an_attempt_a_release_before_2026_11_27_left_in_flight_is_refused_until_given_up(make_sink) -> None:
    """Upgrade: a batch a release before 2026-11-27 left in flight (an attempt without a plan or
    notes, a fingerprint claim, a put in its range) is refused at query start and where a task
    places, before anything is recorded; the message's way out (delete c:attempt once the
    driver's clock is past the attempt's range) lets the replay commit above the old put,
    which stays as an older version."""
    sink = make_sink(OPS, **FLUSH)
    sink.commit([sink.task([{"id": "a", "v": 0, "s": None, "op": None}], batch=0, plan="")], 0)
    commit_table, sink_id = sink.opts.commit_table, sink.opts.sink_id
    conn = HBaseConnection(sink.opts, 0)
    try:
        base = read_state(conn, commit_table, sink_id).commit.read_bound + 10
        # Byte for byte what that release wrote: no plan, no notes, and a block claim.
        legacy = AttemptRecord("q1", 1, base, 1, None, flush_rows=2).to_bytes()
        assert b'"plan"' not in legacy and b'"logged"' not in legacy
        claim = (b'{"base_ms":%d,"block":3,"fingerprint":"%032x","plan":"0f3a","task":0,"version":2}'
                 % (base, 7))
        conn.call(lambda c: c.table(commit_table).put(sink_id.encode(), {ATTEMPT_COLUMN: legacy, b"c:block-3": claim}))
        conn.call(lambda c: c.table(sink.opts.table).put(b"a", {b"d:v": (5).to_bytes(8, "big", signed=True)},
                                                         timestamp=base + 3 * 8 + 1))
        end = base + BATCH_SPAN_MS
        with pytest.raises(ProtocolError, match="left in flight by a release before 2026-11-29") as at_start:
            sink.driver.validate(sink.raw, spark_schema(OPS))
        with pytest.raises(ProtocolError, match="left in flight by a release before 2026-11-29") as placed:
            sink.task([{"id": "a", "v": 7, "s": None, "op": None}], batch=1, plan=f"e0000000000000000002@{end}")
        assert str(placed.value) == str(at_start.value)
        assert f"past {end}" in str(placed.value)
        assert f"deleteall '{commit_table}', '{sink_id}', 'c:attempt'" in str(placed.value)
        assert read_state(conn, commit_table, sink_id).attempt_raw == legacy  # nothing recorded
        # The way out, as the shell's deleteall: every version of the cell.
        conn.call(lambda c: c.table(commit_table).delete(sink_id.encode(), columns=[ATTEMPT_COLUMN]))
    finally:
        conn.close()
    sink.driver.validate(sink.raw, spark_schema(OPS))
    replay = sink.task([{"id": "a", "v": 7, "s": None, "op": None}], batch=1, plan=f"e0000000000000000002@{end}")
    assert replay.base_ms >= end and replay.abandoned == []
    assert sink.commit([replay], 1).gaps == []
    assert sink.read() == [{"id": "a", "v": 7, "s": None}]
    assert [v for v, _ in sink.versions(b"a", b"d:v")] == [(n).to_bytes(8, "big", signed=True) for n in (7, 5, 0)]
    assert sink.read(as_of_batch=0) == [{"id": "a", "v": 0, "s": None}]


def test_an_attempt_over_notes_without_a_block_is_refused(make_sink) -> None:
    """The release before 2026-11-29 noted tries without a block (note version 2), task ``p``
    writing in block ``p`` of its layout; the release after it read such notes. This one
    refuses an attempt in flight over one before it records anything: the note of a task of
    partition 2 is rewritten as that release wrote it (version 2)."""
    from sparkbarrier.connectors.hbase.sink._commit_table import (
        TaskNote, delete_task_notes, put_cell, read_sink_row, write_note_chunks)

    sink = make_sink(OPS, **FLUSH)
    sink.commit([sink.task([{"id": "a", "v": 0, "s": None, "op": None}], batch=0, plan="e0000000000000000001")], 0)
    sink.task([{"id": k, "v": 5, "s": None, "op": None} for k in ("a", "b")], batch=1, partition=2,
              plan="e0000000000000000002")
    commit_table, sink_id = sink.opts.commit_table, sink.opts.sink_id
    conn = HBaseConnection(sink.opts, 0)
    try:
        (note,) = read_sink_row(conn, commit_table, sink_id).notes
        v2 = write_note_chunks(conn, commit_table, sink_id, TaskNote(note.base_ms, 3, note.token, owner=note.owner),
                               [b"a", b"b"])
        put_cell(conn, commit_table, sink_id, v2.column(), v2.to_bytes())
        delete_task_notes(conn, commit_table, sink_id, [note])
        (again,) = read_sink_row(conn, commit_table, sink_id).notes
        assert again.block is None and again.chunks == 1 and b'"version":2' in again.to_bytes()
        attempt = read_state(conn, commit_table, sink_id).attempt_raw
        with pytest.raises(ProtocolError, match="left in flight by a release before 2026-11-29"):
            sink.task([{"id": "a", "v": 7, "s": None, "op": None}], batch=1, plan="e0000000000000000003")
        assert read_state(conn, commit_table, sink_id).attempt_raw == attempt  # nothing recorded
    finally:
        conn.close()


def test_a_note_done_after_the_replay_read_the_row_moves_the_replay_up(make_sink, monkeypatch) -> None:
    """A try of the abandoned attempt finishes its note (block 20) between the replay's read of
    the sink row and its checkAndPut: the replay reads the notes again once its attempt is
    in, and moves it above that block before any task writes (its clock an hour behind, so
    only the floor decides)."""
    from dataclasses import replace

    from sparkbarrier.connectors.hbase.sink import _committer
    from sparkbarrier.connectors.hbase.sink._commit_table import TaskNote, put_cell, write_note_chunks
    from sparkbarrier.connectors.hbase.sink._timestamps import CLOCK_OFFSET_ENV

    sink = make_sink(OPS, **FLUSH)
    first = sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0, plan="e0000000000000000001")
    real, raced = _committer.check_and_put, []

    def racing(conn, table, sink_id, column, expected, value, **kw):  # noqa: ANN001, ANN003, ANN202
        if column == ATTEMPT_COLUMN and not raced:
            raced.append(column)
            late = write_note_chunks(conn, table, sink_id, TaskNote(first.base_ms, 19, "s0"), [b"z"])
            put_cell(conn, table, sink_id, late.column(), replace(late, block=20).to_bytes())
        return real(conn, table, sink_id, column, expected, value, **kw)

    monkeypatch.setattr(_committer, "check_and_put", racing)
    monkeypatch.setenv(CLOCK_OFFSET_ENV, str(-3_600_000))
    replay = sink.task([{"id": "a", "v": 2, "s": None, "op": None}], batch=0, plan="e0000000000000000002")
    assert raced and replay.abandoned == [first.base_ms]
    assert replay.base_ms == first.base_ms + 21 * TASK_WIDTH_MS
    sink.commit([replay], 0)
    assert sink.read() == [{"id": "a", "v": 2, "s": None}]


def test_a_new_attempt_records_its_plan(make_sink) -> None:
    sink = make_sink(OPS, **FLUSH)
    sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0, plan="p1")
    conn = HBaseConnection(sink.opts, 0)
    try:
        raw = conn.call(lambda c: c.table(sink.opts.commit_table).row(sink.opts.sink_id.encode(),
                                                                       columns=[ATTEMPT_COLUMN]))
    finally:
        conn.close()
    assert AttemptRecord.from_bytes(raw[ATTEMPT_COLUMN]).plan == "p1"


def test_a_task_costs_one_commit_table_read_and_the_first_task_one_check_and_put(make_sink, monkeypatch) -> None:
    """Round trips per task and batch: the fingerprint claims' checkAndPut is gone (was: one more
    per task), and the history copy moved from the driver's commit to the task that records
    the attempt (the driver's commit is two checkAndPuts: closing the attempt, then the
    record; and one get of the notes, to remove the tries Spark did not commit, counted since
    the commit reads them with ``read_sink_row``)."""
    from sparkbarrier.connectors.hbase.sink import _committer

    calls = {"read": 0, "cap": 0, "history": 0}
    read, row, cap = _committer.read_state, _committer.read_sink_row, _committer.check_and_put
    history, tidy = _committer.put_history, _committer.delete_task_notes

    def counted(name, fn):
        def call(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        return call

    def tidied(*a, **k):  # the history copy rides on the tidy's mutateRows (one round trip)
        calls["history"] += k.get("history") is not None
        return tidy(*a, **k)

    sink = make_sink(OPS, **FLUSH)
    monkeypatch.setattr(_committer, "read_state", counted("read", read))
    monkeypatch.setattr(_committer, "read_sink_row", counted("read", row))  # a task's one get: state and notes
    monkeypatch.setattr(_committer, "check_and_put", counted("cap", cap))
    monkeypatch.setattr(_committer, "put_history", counted("history", history))
    monkeypatch.setattr(_committer, "delete_task_notes", tidied)
    rows = [{"id": f"k{i}", "v": i, "s": None, "op": None} for i in range(5)]  # three flushes per task
    msgs = [sink.task(rows, batch=0, partition=p, plan="p1") for p in range(3)]
    assert calls == {"read": 3, "cap": 1, "history": 0}  # nothing committed yet, nothing to copy
    calls.update(read=0, cap=0)
    sink.commit(msgs, 0)
    # closing the attempt, then the commit record; a get of the state, and the get of the notes
    assert calls == {"read": 2, "cap": 2, "history": 0}
    calls.update(read=0, cap=0)
    msgs = [sink.task(rows, batch=1, partition=p, plan="p2") for p in range(3)]  # the next batch
    assert calls == {"read": 3, "cap": 1, "history": 1}  # the first task copies commit 1 into the history
    assert [m.kept_history for m in msgs] == [1, None, None]
    calls.update(read=0, cap=0, history=0)
    sink.commit(msgs, 1)
    assert calls == {"read": 1, "cap": 2, "history": 0}  # the commit worker remembers the record: the notes' get only
    assert sink.read() == [{"id": f"k{i}", "v": i, "s": None} for i in range(5)]
    assert [(r.seq, r.batch_id) for r in sink.history()] == [(1, 0), (2, 1)]  # commit 2 is c:commit
    assert sink.history_rows() == [1]


def test_the_driver_copies_the_commit_into_the_history_when_no_task_reports_it(make_sink, monkeypatch) -> None:
    """The task that recorded the attempt died before its history copy; its retry (same plan)
    joins the attempt and copies nothing, so the driver's commit copies commit 1 before its
    checkAndPut moves c:commit past it."""
    from sparkbarrier.connectors.hbase.sink import _committer

    sink = make_sink(OPS, **FLUSH)
    rows = [{"id": "a", "v": 1, "s": None, "op": None}]
    sink.commit([sink.task(rows, batch=0, plan="p1")], 0)

    def dies(*_a, **_k):
        raise RuntimeError("task killed after recording its attempt")

    with monkeypatch.context() as m:
        m.setattr(_committer, "delete_task_notes", dies)  # the tidy that carries the history copy
        with pytest.raises(RuntimeError, match="killed"):
            sink.task([{"id": "a", "v": 2, "s": None, "op": None}], batch=1, plan="p2")
    assert sink.history_rows() == []
    retry = sink.task([{"id": "a", "v": 2, "s": None, "op": None}], batch=1, plan="p2")
    assert retry.kept_history is None
    sink.commit([retry], 1)
    assert sink.history_rows() == [1]
    assert [(r.seq, r.batch_id) for r in sink.history()] == [(1, 0), (2, 1)]
    assert sink.read(as_of_batch=0) == [{"id": "a", "v": 1, "s": None}]
    assert sink.read(as_of_batch=1) == sink.read() == [{"id": "a", "v": 2, "s": None}]


def test_a_history_copy_the_server_refuses_is_logged_and_made_good_by_the_driver(make_sink, monkeypatch) -> None:
    """The task that records the attempt copies the last commit into the history in the same
    mutateRows as its tidy; when the server refuses it, the task goes on (the copy is not
    needed for writing), reports no copy, and the driver's commit copies the record."""
    from sparkbarrier.connectors.hbase.sink import _committer

    sink = make_sink(OPS, **FLUSH)
    sink.commit([sink.task([{"id": "a", "v": 1, "s": None, "op": None}], batch=0, plan="p1")], 0)

    def refused(*_a, **_k):
        raise SinkError("the region is not online")

    with monkeypatch.context() as m:
        m.setattr(_committer, "delete_task_notes", refused)
        msg = sink.task([{"id": "a", "v": 2, "s": None, "op": None}], batch=1, plan="p2")
    assert msg.kept_history is None
    assert sink.history_rows() == []
    sink.commit([msg], 1)
    assert sink.history_rows() == [1]
    assert sink.read(as_of_batch=0) == [{"id": "a", "v": 1, "s": None}]
    assert sink.read() == [{"id": "a", "v": 2, "s": None}]


def test_a_remembered_record_that_changed_is_read_again_and_fences(make_sink) -> None:
    """The commit worker's memory of its last record is only an expected value: the commit is
    conditional on the tasks' attempt, which another writer replaces before it commits; the
    checkAndPut fails, the commit reads the row and decides as without a memory (here:
    another writer committed, so FencedError and no write)."""
    from dataclasses import replace

    from sparkbarrier.connectors.hbase.sink._commit_table import COMMIT_COLUMN, CommitRecord, put_cell

    sink = make_sink(OPS, **FLUSH)
    rows = [{"id": "a", "v": 1, "s": None, "op": None}]
    sink.commit([sink.task(rows, batch=0, plan="p1")], 0)
    pending = sink.task([{"id": "a", "v": 2, "s": None, "op": None}], batch=1, plan="p2")
    conn = HBaseConnection(sink.opts, 0)
    try:
        ours = read_state(conn, sink.opts.commit_table, sink.opts.sink_id).commit
        assert ours is not None and ours.seq == pending.prev_seq
        theirs = replace(ours, seq=ours.seq + 1, query_id="other-query", batch_id=7)
        their_attempt = AttemptRecord("other-query", 7, ours.read_bound + 1, ours.seq, plan="p3", noted=True)
        put_cell(conn, sink.opts.commit_table, sink.opts.sink_id, ATTEMPT_COLUMN, their_attempt.to_bytes())
        put_cell(conn, sink.opts.commit_table, sink.opts.sink_id, COMMIT_COLUMN, theirs.to_bytes())
        with pytest.raises(FencedError, match="another writer"):
            sink.commit([pending], 1)
        after = read_state(conn, sink.opts.commit_table, sink.opts.sink_id).commit_raw
    finally:
        conn.close()
    assert after is not None and CommitRecord.from_bytes(after) == theirs
