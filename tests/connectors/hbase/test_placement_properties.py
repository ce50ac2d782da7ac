"""Property test of the sink's protocol (``_attempts.place``, flush notes, the conditional commit), no server.

Hypothesis draws histories of one sink row shared with neighbours: batches planned and
replanned (driver restarts), tasks of those plans and copies of them (speculation, a
lost executor that still runs) starting and flushing in any interleaving, flushes whose
mutations land late (after the commit, after a replay), leftovers of older plans and of
older batches, another query taking the ``sink.id`` over, a second sink and a plain
client writing other columns and rows of the same table *at the same timestamps*, and
commits. A small model of HBase stands in (cells by (row, column, timestamp), exact
version deletes that mask a put whenever it lands; the real table is exercised by
test_attempts.py and test_duplicate_attempts.py), with the commit table's sink row and
the same check-and-put the real one does. For every history:

* a task writes only in an attempt its own plan recorded, the tasks that join one
  attempt agree on its base, and a task of an older plan or of an older batch is fenced
  at placement or at its next flush note, and sends nothing after that;
* a commit goes through only while its attempt is the recorded one, and closes it first:
  a try of that attempt that placed before the commit and writes after it is fenced;
* each try of a task puts at a slot of its own; once a batch commits, every put of a try
  Spark did not commit (a copy, a failed try) is masked, and so is every put an abandoned
  attempt ever sends (also one landing after the commit), and nothing else: no version
  of the neighbours' columns or rows, none of a committed try;
* every attempt starts above everything written before it (a replay above what the
  abandoned attempt's tries noted, not its whole span), and the committed record has no gap: every abandoned attempt's puts are removed, so no range needs hiding;
* keyed tasks (``_keyed``: no key of theirs in another task of their rank) share their
  rank's block (a later ``minPartitions`` split of a residue: rank 1), every other task
  writes in its own above the ranks, and a key held by several
  tasks ends as the one with the highest block left it (the one try Spark committed);
* a replay of a committed batch writes nothing, and the history holds every committed
  record but the newest, byte for byte.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkbarrier._exceptions import FencedError
from sparkbarrier.connectors.hbase.sink._attempts import place
from sparkbarrier.connectors.hbase.sink._commit_table import AttemptRecord, CommitRecord, TaskNote
from sparkbarrier.connectors.hbase.sink._timestamps import TRY_SLOTS, TaskClock, task_block

SINK_COLUMN = "d:v"
OTHER_SINK_COLUMN = "d:w"  # a second sink on the same table and family
PLAIN_COLUMN = "d:c"  # a plain client


@dataclass
class Table:
    """The sink row (bytes, as the commit table holds them) and the data table's model."""

    commit: bytes | None = None
    attempt: bytes | None = None
    notes: dict[bytes, bytes] = field(default_factory=dict)
    note_keys: dict[bytes, list[str]] = field(default_factory=dict)  # the note's chunk rows
    winners: set[int] = field(default_factory=set)  # the tries Spark committed
    attempts: list[AttemptRecord] = field(default_factory=list)  # every attempt ever recorded
    committed: list[CommitRecord] = field(default_factory=list)
    history: dict[int, bytes] = field(default_factory=dict)
    puts: dict[tuple[str, str, int], str] = field(default_factory=dict)  # (row, column, ts) -> writer
    masked: set[tuple[str, str, int]] = field(default_factory=set)  # exact version deletes
    in_flight: list[tuple[str, str, int, str]] = field(default_factory=list)  # sent, not landed yet
    expected: dict[str, int] = field(default_factory=dict)  # a committed row -> the partition whose put it shows
    partitions: dict[int, int] = field(default_factory=dict)  # try id -> its task's partition

    def cap_attempt(self, expected: bytes | None, value: bytes) -> bool:
        if self.attempt != expected:
            return False
        self.attempt = value
        return True


@dataclass
class Task:
    query: str
    batch: int
    plan: str
    partition: int
    rows: list[str]
    base: int | None = None
    prev: int | None = None
    abandoned: list[int] = field(default_factory=list)
    attempt_raw: bytes | None = None
    replay: bool = False
    kept: int | None = None
    fenced: bool = False
    slot: int | None = None
    sent: bool = False
    keyed: bool = False  # every key of the task is its own (the real test: ``_keyed``)
    rank: int = 0  # its block if keyed: a later split of a residue another keyed task holds is block 1
    levels: int = 1  # the attempt's keyed blocks (``_keyed.levels``)
    try_id: int = field(default_factory=itertools.count().__next__)

    def layout(self) -> dict[str, Any]:
        """Where a copy of this task writes: the same block."""
        return {"keyed": self.keyed, "rank": self.rank, "levels": self.levels}

    @property
    def block(self) -> int:
        return task_block(self.partition, keyed_at=self.rank if self.keyed else None, levels=self.levels)


def start(table: Table, task: Task, now: int) -> bool:
    """One task's begin (``place_task`` over the model); False when fenced."""
    for _ in range(5):
        commit = CommitRecord.from_bytes(table.commit) if table.commit else None
        attempt = AttemptRecord.from_bytes(table.attempt) if table.attempt else None
        try:
            notes = [TaskNote.from_cell(c, v) for c, v in table.notes.items()]
            p = place(commit, attempt, query_id=task.query, batch_id=task.batch, plan_id=task.plan, now_ms=now,
                      flush_rows=10, flush_bytes=100, notes=notes)
        except FencedError:
            task.fenced = True
            return False
        raw = table.attempt
        if p.record is not None:
            raw = p.record.to_bytes()
            if not table.cap_attempt(table.attempt, raw):
                continue
            table.attempts.append(p.record)
            if commit is not None:
                table.history[commit.seq] = table.commit  # type: ignore[assignment]
                task.kept = commit.seq
        task.base, task.prev, task.abandoned, task.replay = p.base_ms, p.prev_seq, p.abandoned, p.replay_of_committed
        task.attempt_raw = None if p.replay_of_committed else raw
        if not p.replay_of_committed:  # a plan's tasks write only in an attempt their own plan recorded
            owner = [a for a in table.attempts if a.base_ms == p.base_ms]
            assert [(a.query_id, a.batch_id, a.plan) for a in owner] == [(task.query, task.batch, task.plan)]
        return True
    raise AssertionError("no agreement")


def flush(table: Table, task: Task, *, lands_now: bool) -> None:
    """The try's write (``_writer._note`` then ``_buffer._write``); called again, the same call twice.

    The first call claims the first free put slot of the task's block (a note cell that
    must not exist), notes the keys, and sends only if its note's ``checkAndPut`` on
    ``c:attempt`` holds; a later call sends the same mutations again (a transport retry).
    """
    if task.fenced or task.replay or task.base is None:
        return
    clock = TaskClock(task.base, task.block)
    if not task.sent:
        free = [k for k in range(TRY_SLOTS) if TaskNote(task.base, task.partition, f"s{k}").column() not in table.notes]
        assert free, "no put slot left"
        note = TaskNote(task.base, task.partition, f"s{free[0]}", owner=str(task.try_id))
        table.notes[note.column()] = note.to_bytes()
        if table.attempt != task.attempt_raw:  # the note's checkAndPut is refused: remove it, send nothing
            del table.notes[note.column()]
            task.fenced = True
            return
        table.notes[note.column()] = replace(note, chunks=1, keys=len(task.rows), block=task.block).to_bytes()
        table.note_keys[note.column()] = list(task.rows)
        task.slot, task.sent = free[0], True
        table.partitions[task.try_id] = task.partition
    assert task.slot is not None
    for row in task.rows:
        cell = (row, SINK_COLUMN, clock.slot_put_ts(task.slot), f"{task.base}/{task.try_id}")
        if lands_now:
            land(table, cell)
        else:
            table.in_flight.append(cell)


def land(table: Table, cell: tuple[str, str, int, str]) -> None:
    row, column, ts, writer = cell
    table.puts[(row, column, ts)] = writer


def commit(table: Table, tasks: list[Task], batch: int, query: str, rnd: Any) -> bool:
    """The driver's commit over the tasks that started (``Committer.commit``'s checks and removal)."""
    if not tasks:
        return False
    assert len({(t.base, t.prev, t.attempt_raw) for t in tasks}) == 1, "tasks of one plan disagree on the base"
    first = tasks[0]
    current = CommitRecord.from_bytes(table.commit) if table.commit else None
    if current is not None and current.query_id == query and current.batch_id == batch:
        assert first.replay and first.base == current.ts_lo
        return True
    if (current.seq if current else None) != first.prev or table.attempt != first.attempt_raw:
        return False  # conditional on the attempt: fenced
    assert first.base is not None and first.attempt_raw is not None
    table.attempt = replace(AttemptRecord.from_bytes(first.attempt_raw), closing=True).to_bytes()  # closed
    wanted = set(first.abandoned)
    # Spark commits one try per task, any that wrote: the rest are removed with the abandoned attempts
    by_partition: dict[int, list[Task]] = {}
    for t in tasks:
        if t.sent:
            by_partition.setdefault(t.partition, []).append(t)
    won = {str(rnd.choice(tries).try_id) for tries in by_partition.values()}
    table.winners |= {int(w) for w in won}
    for column, raw in list(table.notes.items()):
        note = TaskNote.from_cell(column, raw)
        loser = note.base_ms == first.base and note.chunks is not None and note.owner not in won
        if note.base_ms in wanted or loser:
            ts = TaskClock(note.base_ms, note.put_block).slot_put_ts(note.slot)
            table.masked |= {(key, SINK_COLUMN, ts) for key in table.note_keys[column]}
    if current is not None and not any(t.kept == current.seq for t in tasks):
        table.history[current.seq] = table.commit  # type: ignore[assignment]
    ts_hi = max(TaskClock(first.base, t.block).block_end() for t in tasks)
    for row in {r for t in tasks for r in t.rows}:  # the task whose change the row must show
        table.expected[row] = max((t.block, t.partition) for t in tasks if row in t.rows)[1]
    gaps = list(current.gaps) if current else []
    record = CommitRecord(sink_id="s", table="t", seq=(current.seq if current else 0) + 1, query_id=query,
                          batch_id=batch, ts_lo=first.base, ts_hi=ts_hi,
                          read_bound=max(ts_hi, current.read_bound if current else 0), gaps=gaps)
    table.commit = record.to_bytes()
    table.committed.append(record)
    table.notes, table.note_keys = {}, {}
    assert table.history == {r.seq: r.to_bytes() for r in table.committed[:-1]}, "history lacks a commit"
    return True


# A history: per batch, a list of plans (driver runs). Per plan: how many tasks, whether a
# copy of each task runs too, whether the plan commits, the query, whether a leftover of the
# previous plan (or of the previous batch) starts and flushes after it, and which of the
# flushes land late (after the commit).
plan_step = st.tuples(st.integers(1, 3), st.booleans(), st.booleans(), st.sampled_from(["q1", "q1", "q1", "q2"]),
                      st.booleans(), st.lists(st.booleans(), min_size=6, max_size=6),
                      st.lists(st.booleans(), min_size=3, max_size=3), st.booleans())
histories = st.lists(st.lists(plan_step, min_size=1, max_size=4), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(histories, st.integers(0, 5000), st.randoms(use_true_random=False))
def test_only_the_committing_attempt_and_the_neighbours_stay(history, clock_step, rnd) -> None:
    table = Table()
    now, plan_no = 1_000_000, 0
    neighbours: set[tuple[str, str, int]] = set()
    leftovers: list[Task] = []
    for batch, steps in enumerate(history):
        previous: list[Task] = []
        for n_tasks, copies, commits, query, leftover, late, keyed, share in steps:
            plan_no += 1
            plan = f"e{plan_no:019d}"
            now += clock_step
            tasks = [Task(query, batch, plan, p, [f"k{batch}-{p}-{i}" for i in range(2)], keyed=keyed[p])
                     for p in range(n_tasks)]
            if share and n_tasks > 1:  # a key in two tasks (round-robin, minPartitions)
                tasks[-1].rows.append(tasks[0].rows[0])
                if tasks[0].keyed and tasks[-1].keyed:  # a later split of task 0's residue: rank 1
                    tasks[-1].rank = 1
                    for t in tasks:
                        t.levels = 2
                else:  # holding another's key, it is not keyed (``_keyed``)
                    tasks[-1].keyed = False
            if copies:
                tasks += [Task(query, batch, plan, t.partition, t.rows, **t.layout()) for t in list(tasks)]
            started = [t for t in tasks if start(table, t, now)]
            assert len(started) == len(tasks), "a task of the newest plan was fenced"
            # Neighbours write the same rows' other columns, and other rows, at this attempt's timestamps.
            for t in started[:1]:
                if t.base is not None:
                    for ts in range(t.base, t.base + 24):
                        for cell in ((t.rows[0], OTHER_SINK_COLUMN, ts), (t.rows[0], PLAIN_COLUMN, ts),
                                     (f"side-{ts}", SINK_COLUMN, ts)):
                            neighbours.add(cell)
                            land(table, (*cell, "neighbour"))
            for i, t in enumerate(rnd.sample(started, len(started)) * 2):  # every task flushes twice, interleaved
                flush(table, t, lands_now=not late[i % len(late)])
            if leftover and previous:
                stale = [Task(p.query, p.batch, p.plan, p.partition, p.rows, **p.layout()) for p in previous[:1]]
                stale += [Task(p.query, p.batch, p.plan, p.partition, p.rows, p.base, p.prev, p.abandoned,
                               p.attempt_raw, p.replay, **p.layout()) for p in previous[:1]]  # started earlier
                for s in stale:
                    before = (table.attempt, dict(table.notes))
                    if s.base is None and start(table, s, now):
                        raise AssertionError("a task of an older plan was not fenced")
                    s.fenced = s.fenced or s.base is None
                    flush(table, s, lands_now=True)
                    assert (table.attempt, table.notes) == before, "a leftover changed the sink row"
            previous = started
            # a copy of task 0 that places before the commit and writes after it (Spark kills
            # the loser of a speculative race asynchronously)
            straggler = Task(query, batch, plan, 0, tasks[0].rows, **tasks[0].layout()) if copies else None
            if straggler is not None and not start(table, straggler, now):
                straggler = None
            if commits and commit(table, started, batch, query, rnd):
                if straggler is not None:
                    flush(table, straggler, lands_now=True)
                    assert not straggler.sent, "a try placed before the commit wrote after it"
                leftovers = started
                break
        for t in leftovers:  # tasks of a committed batch that outlive it (a speculative copy)
            late_copy = Task(t.query, t.batch, t.plan, t.partition, t.rows, **t.layout())
            if batch > t.batch and start(table, late_copy, now) and not late_copy.replay:
                raise AssertionError("a task of an older batch was not fenced")
    for cell in table.in_flight:  # whatever was sent lands, however late
        land(table, cell)
    check(table, neighbours)


def check(table: Table, neighbours: set[tuple[str, str, int]]) -> None:
    committed = {(r.query_id, r.batch_id, r.ts_lo): r for r in table.committed}
    assert not (table.masked & neighbours), "a neighbour's version was deleted"

    def end(a: AttemptRecord) -> int:
        """Above everything ``a`` wrote (its delete markers sit at or below its puts' blocks)."""
        done = committed.get((a.query_id, a.batch_id, a.base_ms))
        if done is not None:
            return done.ts_hi
        sent = [ts for (_, _, ts), w in table.puts.items() if w.partition("/")[0] == str(a.base_ms)]
        return max(sent, default=a.base_ms) + 1

    for i, earlier in enumerate(table.attempts):
        for later in table.attempts[i + 1:]:
            assert later.base_ms >= end(earlier), "an attempt went below one recorded before it"
    if not table.committed:
        return
    final = table.committed[-1]
    bases = {r.ts_lo for r in table.committed}
    for (row, column, ts), writer in table.puts.items():
        if writer == "neighbour":
            continue
        base_text, _, try_id = writer.partition("/")
        base = int(base_text)
        if base in bases:
            if int(try_id) in table.winners:
                assert (row, column, ts) not in table.masked, "a committed try's version was deleted"
            else:
                assert (row, column, ts) in table.masked, "a put of a try Spark did not commit stays"
        elif base < final.read_bound:  # abandoned below what readers see
            assert (row, column, ts) in table.masked, f"an abandoned put at {ts} stays"
    shown: dict[str, tuple[int, int]] = {}  # a row's newest unmasked put of a committed attempt: (ts, try)
    for (row, column, ts), writer in table.puts.items():
        base_text, _, try_id = writer.partition("/")
        if column == SINK_COLUMN and writer != "neighbour" and int(base_text) in bases \
                and (row, column, ts) not in table.masked:
            shown[row] = max(shown.get(row, (ts, int(try_id))), (ts, int(try_id)))
    for row, (_, try_id) in shown.items():
        assert table.partitions[try_id] == table.expected[row], f"row {row} shows another task's put"
    for record in table.committed:
        for lo, hi in final.gaps:
            assert not (lo < record.ts_hi and record.ts_lo < hi), "a committed range lies in a gap"
    assert final.gaps == [], "a gap for an attempt whose puts were removed"
