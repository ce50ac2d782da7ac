"""Property test of the placement rule (``_attempts.place``), no server.

Hypothesis draws histories of one sink: batches planned and replanned (driver restarts),
tasks of those plans starting in any interleaving (leftovers of dead drivers
included), another query taking the ``sink.id`` over, and commits. A dict stands in for
the commit table's two cells with the same check-and-put the real one does (the real
table is exercised by test_attempts.py). For every history:

* a task writes only in an attempt its own plan recorded, and the tasks that join one
  attempt agree on its base (a commit never sees two);
* an attempt that joins or replaces never goes below anything written before it: its
  range starts at or above the last commit's read bound and above every abandoned
  attempt of the same commit;
* every abandoned attempt's whole range lies inside the gap the committing attempt
  carries, and no committed attempt's range intersects a gap;
* a task of an older plan than the recorded one is fenced and changes nothing;
* a replay of a committed batch writes nothing;
* the history (``_committer``: the task that records an attempt copies the commit it
  builds on, the driver copies it only when no task reports the copy, before moving
  ``c:commit``) holds every committed record but the newest, byte for byte, after every
  commit, whether or not the recording task's copy was lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkbarrier._exceptions import FencedError
from sparkbarrier.connectors.hbase._attempts import place
from sparkbarrier.connectors.hbase._commit_table import AttemptRecord, CommitRecord
from sparkbarrier.connectors.hbase._timestamps import BATCH_SPAN_MS, TASK_WIDTH_MS


@dataclass
class Table:
    """The sink row: commit and attempt (bytes, as the commit table holds them)."""

    commit: bytes | None = None
    attempt: bytes | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)  # every attempt ever recorded
    committed: list[CommitRecord] = field(default_factory=list)
    history: dict[int, bytes] = field(default_factory=dict)  # the history rows: seq -> record


@dataclass
class Task:
    query: str
    batch: int
    plan: str
    base: int | None = None
    prev: int | None = None
    gap: list[int] | None = None
    replay: bool = False
    kept: int | None = None  # the commit this task copied into the history


def start(table: Table, task: Task, now: int, *, copy_lost: bool = False) -> bool:
    """One task's begin (``plan_attempt`` over the dict); False when fenced."""
    for _ in range(5):
        commit = CommitRecord.from_bytes(table.commit) if table.commit else None
        attempt = AttemptRecord.from_bytes(table.attempt) if table.attempt else None
        try:
            p = place(commit, attempt, query_id=task.query, batch_id=task.batch, plan=task.plan, now_ms=now,
                      flush_rows=10, flush_bytes=100)
        except FencedError:
            return False
        if p.record is not None:
            expected, table.attempt = table.attempt, p.record.to_bytes()
            assert expected is not None or attempt is None
            table.attempts.append(p.record)
            if commit is not None and not copy_lost:  # copy_lost: died after the checkAndPut; the retry joins
                table.history[commit.seq] = table.commit  # type: ignore[assignment]
                task.kept = commit.seq
        task.base, task.prev, task.gap, task.replay = p.base_ms, p.prev_seq, p.gap, p.replay_of_committed
        if not p.replay_of_committed:  # a plan's tasks write only in an attempt their own plan recorded
            owner = [a for a in table.attempts if a.base_ms == p.base_ms]
            assert [(a.query_id, a.batch_id, a.plan) for a in owner] == [(task.query, task.batch, task.plan)]
        return True
    raise AssertionError("no agreement")


def commit(table: Table, tasks: list[Task], batch: int, query: str) -> bool:
    """The driver's commit over the tasks that started (``Committer.commit``'s checks)."""
    if not tasks:
        return False
    assert len({(t.base, t.prev) for t in tasks}) == 1, "tasks of one plan disagree on the base"
    first = tasks[0]
    current = CommitRecord.from_bytes(table.commit) if table.commit else None
    if current is not None and current.query_id == query and current.batch_id == batch:
        assert first.replay and first.base == current.ts_lo
        return True
    if (current.seq if current else None) != first.prev:
        return False  # fenced by another writer's commit
    if current is not None and not any(t.kept == current.seq for t in tasks):
        table.history[current.seq] = table.commit  # type: ignore[assignment]
    ts_hi = first.base + TASK_WIDTH_MS * (1 + max(range(len(tasks))))
    gaps = list(current.gaps) if current else []
    if first.gap:
        gaps.append(first.gap)
    record = CommitRecord(sink_id="s", table="t", seq=(current.seq if current else 0) + 1, query_id=query,
                          batch_id=batch, ts_lo=first.base, ts_hi=ts_hi,
                          read_bound=max(ts_hi, current.read_bound if current else 0), gaps=gaps)
    table.commit = record.to_bytes()
    table.committed.append(record)
    assert table.history == {r.seq: r.to_bytes() for r in table.committed[:-1]}, "history lacks a commit"
    return True


# A history: per batch, a list of steps; each step is one plan of the batch (a driver
# run), how many of its tasks start (then it dies, or all start and it commits), and
# whether a leftover task of the previous plan starts after it.
step = st.tuples(st.integers(1, 4), st.booleans(), st.booleans(), st.sampled_from(["q1", "q1", "q1", "q2"]),
                 st.booleans())
histories = st.lists(st.lists(step, min_size=1, max_size=4), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(histories, st.integers(0, 5000))
def test_placement_follows_ids_only_and_never_lets_an_abandoned_attempt_show(history, clock_step) -> None:
    table = Table()
    now, plan_no = 1_000_000, 0
    for batch, steps in enumerate(history):
        done = False
        previous: list[Task] = []
        for n_tasks, commits, leftover, query, copy_lost in steps:
            plan_no += 1
            plan = f"{plan_no:06d}"
            now += clock_step
            tasks = [Task(query, batch, plan) for _ in range(n_tasks)]
            started = [t for t in tasks if start(table, t, now, copy_lost=copy_lost)]
            assert len(started) == len(tasks), "a task of the newest plan was fenced"
            if leftover and previous:
                stale = Task(previous[0].query, batch, previous[0].plan)
                before = table.attempt
                if previous[0].query == query:
                    assert not start(table, stale, now), "a task of an older plan was not fenced"
                    assert table.attempt == before
            previous = tasks
            if commits and commit(table, started, batch, query):
                if started[0].replay:
                    assert all(t.replay for t in started)
                done = True
                break
        if not done:
            continue
    check(table)


def check(table: Table) -> None:
    """Every attempt above everything recorded before it; nothing abandoned in a committed view."""
    committed = {(r.query_id, r.batch_id, r.ts_lo): r for r in table.committed}

    def end(a: AttemptRecord) -> int:
        done = committed.get((a.query_id, a.batch_id, a.base_ms))
        return done.ts_hi if done is not None else a.base_ms + BATCH_SPAN_MS

    for i, earlier in enumerate(table.attempts):
        for later in table.attempts[i + 1:]:
            assert later.base_ms >= end(earlier), "an attempt went below one recorded before it"
    if not table.committed:
        return
    final = table.committed[-1]
    for record in table.committed:
        for lo, hi in final.gaps:
            assert not (lo < record.ts_hi and record.ts_lo < hi), "a committed range lies in a gap"
    for a in table.attempts:
        if (a.query_id, a.batch_id, a.base_ms) in committed or a.base_ms >= final.read_bound:
            continue  # committed, or still above every committed view
        lo, hi = a.base_ms, a.base_ms + BATCH_SPAN_MS
        assert any(g_lo <= lo and hi <= g_hi for g_lo, g_hi in final.gaps), (
            f"abandoned attempt {lo}..{hi} is visible below the read bound; gaps {final.gaps}")
