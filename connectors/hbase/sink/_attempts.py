"""Where a batch attempt writes: decided from ids the protocol owns, never from the data.

The ids: the query id and Spark's batch id; the *plan* (``plan_id``: an epoch the
driver raises in the commit table for every batch it plans, ``raise_plan_epoch``, so a
later plan is larger whatever the clocks say); a write task's Spark partition id; and
the commit sequence. The rule (:func:`place`, executor, once per write task; the sink
row is its only input besides the task's ids):

1. The last commit is this (query, batch): a replay of a committed batch, nothing to write.
2. The recorded attempt has a *newer* plan, or this query committed a later batch: the
   task is a leftover (of a replanned driver, a speculative copy, an older batch), fenced.
3. The in-flight attempt is this plan's, on the same commit: a retry or a copy joins it
   (its base and key test), fenced once the driver is committing it (``closing``).
4. The in-flight attempt is an *older* plan's and produced no commit (a driver that died
   mid-batch, a ``sink.id`` takeover): abandoned; the new attempt records its base (and
   those it carried) in ``abandoned`` and starts above what it wrote (:func:`written_end`).
5. Otherwise a new attempt at ``max(planning clock, the last commit's read bound)``.

Why that is exact, step by step against this code: docs/hbase-guarantees.md. The clock
is the planning driver's, carried in the plan id (``e<epoch>@<ms>``, :func:`plan_clock`),
so an executor's clock changes nothing; a clock behind makes the base the floor.

In-flight state is read in this release's format and its predecessor's, no older one
(:func:`check_formats`): removing an abandoned attempt exactly needs its writes noted
where this release finds them. Committed records are not in flight: they read as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...._exceptions import ConfigError, FencedError, ProtocolError
from ._commit_table import AttemptRecord, CommitRecord, TaskNote
from ._keyed import levels
from ._timestamps import BATCH_SPAN_MS, TASK_WIDTH_MS, next_base

__all__ = ["Placement", "check_formats", "check_writes", "place", "plan_clock", "written_end"]


@dataclass(frozen=True)
class Placement:
    """Where one task writes: the attempt's base, and the attempt record to write if it is new.

    ``record`` is None when the task joins an attempt that exists (a retry, or another
    task of the same plan), or replays a committed batch (``replay_of_committed``: the
    task writes nothing).
    """

    base_ms: int
    prev_seq: int | None
    replay_of_committed: bool
    flush_rows: int
    flush_bytes: int
    record: AttemptRecord | None = None
    abandoned: list[int] = field(default_factory=list)
    unnoted: list[int] = field(default_factory=list)  # of ``abandoned``: at-least-once attempts, puts unnoted
    # The attempt's bytes as the commit table holds them (set by ``_committer.place_task``):
    # each try's note (one per try, ``_writer._note``) and the driver's commit are conditional on them.
    attempt_raw: bytes | None = None
    # Set by ``_committer.place_task``, never by :func:`place`: the sequence of the commit
    # this task copied into the sink's history after recording its new attempt.
    kept_history: int | None = None
    # How far above each of ``abandoned`` its tasks may have written (``AttemptRecord.reach_ms``).
    reach_ms: int = BATCH_SPAN_MS
    # The modulus, hash and residues the attempt's tasks test their keys under (``AttemptRecord``, ``_keyed``).
    keyed_tasks: int = 0
    key_hash: str = ""  # "": Spark's (``_keyed.DEFAULT_HASH``)
    key_residues: list[int] = field(default_factory=list)


def plan_clock(plan_id: str) -> int | None:
    """The planning driver's clock (epoch ms) a plan id carries after ``@``.

    Every plan this release raises has one (``_sink_function.raise_plan_id``); None for an
    id without one, such as tests drive tasks with (then the placing process's clock is used).
    """
    _, at, ms = plan_id.partition("@")
    return int(ms) if at and ms.isdigit() else None


def check_formats(commit: CommitRecord | None, attempt: AttemptRecord | None, *, sink_id: str,
                  commit_table: str, notes: Sequence[TaskNote] = ()) -> None:
    """Refuse a batch left in flight by a release before 2026-11-29 (see module doc).

    Driver at query start, executor before every placement. Those releases recorded no
    ``keyed_tasks`` and noted no block (``TaskNote.block``: their task ``p`` wrote in block
    ``p`` of another layout); an attempt of the release after them carries the bases of
    such attempts it abandoned, whose done notes have no block. The refusal names the
    format and two ways out: finish the batch with the release the user upgraded from,
    which reads it; or delete ``c:attempt``, after which the next plan places afresh above
    the last commit and what the attempt wrote stays, below the replay's writes but in no
    gap. That placement takes its base from the planning clock, so the way out waits until
    that clock is past everything the attempt may have written.
    """
    if attempt is None or _produced(commit, attempt):
        return
    ranges = {attempt.base_ms, *attempt.abandoned}
    if attempt.keyed_tasks and attempt.gap is None and not any(
            n.base_ms in ranges and n.chunks is not None and n.block is None for n in notes):
        return
    end = max([b + attempt.reach_ms for b in ranges] + [attempt.gap[1] if attempt.gap else 0])
    raise ProtocolError(
        f"sink.id {sink_id!r}: batch {attempt.batch_id} of query {attempt.query_id} was left in flight by a "
        f"release before 2026-11-29, whose attempts and notes this release does not read, so it cannot replay "
        f"that batch exactly. Finish batch {attempt.batch_id} with the release you upgraded from (it removes what "
        f"the attempt wrote and commits), then restart on this one. Or give that attempt's writes up: once the "
        f"driver's clock is past {end} (epoch ms; they lie below it), delete cell c:attempt of row {sink_id!r} in "
        f"commit table {commit_table!r} (HBase shell: deleteall '{commit_table}', '{sink_id}', 'c:attempt'); they "
        f"then stay in the table as versions below the replay's, in no gap, so committed reads see those the "
        f"replay does not overwrite")


def check_writes(commit: CommitRecord | None, attempt: AttemptRecord | None, writes: dict[str, str],
                 sink_id: str) -> None:
    """Refuse options a replay cannot be exact under (query start and every placement).

    A ``sink.id``'s commits describe one table: its committed and as-of views read it,
    and a replay of a batch committed there writes nothing. And a replay removes the
    abandoned attempt's noted puts from the sink's columns *as the replay maps them*,
    while that attempt's delete markers stay: under another table, column mapping, op
    column or null handling, some of its cells would stay, or its deletes would mask what
    the replay does not write again. Records of earlier releases carry no ``writes``:
    nothing to compare.
    """
    if commit is not None and commit.table and commit.table != writes.get("table", commit.table):
        raise ConfigError(
            f"sink.id {sink_id!r} commits into HBase table {commit.table!r} (last: batch {commit.batch_id} of query "
            f"{commit.query_id}); this query writes table {writes['table']!r}. A sink.id keeps the commits of one "
            f"table (its committed and as-of views, and the replays of its batches, read them): set option 'table' "
            f"back to {commit.table!r}, or give the other table its own sink.id", option="table")
    if attempt is None or not attempt.writes or _produced(commit, attempt) or attempt.writes == writes:
        return
    changed = sorted(k for k in set(attempt.writes) | set(writes) if attempt.writes.get(k) != writes.get(k))
    was = ", ".join(f"{k}={attempt.writes.get(k, '')!r}" for k in changed)
    now = ", ".join(f"{k}={writes.get(k, '')!r}" for k in changed)
    raise ConfigError(
        f"sink.id {sink_id!r}: batch {attempt.batch_id} of query {attempt.query_id} was being written with {was} and "
        f"never committed; this query has {now}. Its replay removes what that attempt wrote and must write the "
        f"same cells, so it runs only under the same options: restart with {was} until batch {attempt.batch_id} "
        f"commits, then change them", option=changed[0])


def place(commit: CommitRecord | None, attempt: AttemptRecord | None, *, query_id: str, batch_id: int,
          plan_id: str, now_ms: int, flush_rows: int, flush_bytes: int, sink_id: str = "",
          noting: bool = True, writes: dict[str, str] | None = None,
          span_ms: int = BATCH_SPAN_MS, notes: Sequence[TaskNote] | None = None) -> Placement:
    """The rule of the module docstring; pure (the caller reads the row, refuses an older
    format with :func:`check_formats` and writes ``record``).

    ``writes`` (``HBaseSinkOptions.write_shape``) is checked against the records first
    (:func:`check_writes`) and recorded with a new attempt. ``span_ms``: the timestamps this
    plan's tasks may use (``sink.max-write-tasks`` * 8 ms); a new attempt records the larger
    of it and what the attempts it abandons may have used. ``notes``: the sink row's try
    notes; given, a new attempt over an abandoned exactly-once one starts above what that
    attempt's tries noted (:func:`written_end`) rather than above its whole span, so a
    replay of a keyed batch moves 8 ms, not the width of the cluster. The caller reads the
    notes again once its record is in (:func:`written_end`'s doc).
    """
    if writes is not None:
        check_writes(commit, attempt, writes, sink_id)
    if commit is not None and commit.query_id == query_id and commit.batch_id == batch_id:
        return Placement(commit.ts_lo, commit.seq - 1 if commit.seq > 1 else None, True,
                         commit.flush_rows, commit.flush_bytes)
    if attempt is not None and attempt.plan > plan_id:
        raise FencedError(
            f"sink {sink_id!r}: batch {attempt.batch_id} of query {attempt.query_id} was planned (plan "
            f"{attempt.plan}) after this task's plan ({plan_id or 'none'}, batch {batch_id}); this task is a "
            f"leftover (a stopped driver's, a speculative copy's or an older batch's) and writes nothing",
            batch_id=batch_id)
    if commit is not None and commit.query_id == query_id and commit.batch_id > batch_id:
        raise FencedError(
            f"sink {sink_id!r}: batch {commit.batch_id} of this query is committed already; this task of "
            f"batch {batch_id} is a leftover and writes nothing", batch_id=batch_id)
    prev = commit.seq if commit is not None else None
    floor = commit.read_bound if commit is not None else 0
    reach = 0
    abandoned: list[int] = []
    unnoted: list[int] = []
    if attempt is not None and not _produced(commit, attempt):
        ours = attempt.prev_seq == prev and attempt.query_id == query_id and attempt.batch_id == batch_id
        if ours and attempt.plan == plan_id:
            if attempt.closing:
                raise FencedError(
                    f"sink {sink_id!r}: batch {batch_id} of query {query_id} is being committed; this try of one "
                    f"of its tasks is a leftover (a speculative or lost executor's copy) and writes nothing",
                    batch_id=batch_id)
            return Placement(attempt.base_ms, attempt.prev_seq, False, attempt.flush_rows,
                             attempt.flush_bytes, abandoned=list(attempt.abandoned), unnoted=list(attempt.unnoted),
                             reach_ms=attempt.reach_ms, keyed_tasks=attempt.keyed_tasks,
                             key_hash=attempt.key_hash, key_residues=list(attempt.key_residues))
        # Abandoned: an older plan of this batch, another query's attempt (a takeover), or
        # an attempt whose writer lost the commit to another one (built on an older commit).
        # It carries what it abandoned only if that too sits above the last commit.
        carried = attempt.prev_seq == prev
        reach = attempt.reach_ms  # its own span, and every one it carries (``AttemptRecord.span_ms``)
        if carried:
            abandoned = list(attempt.abandoned)
            unnoted = list(attempt.unnoted)
        abandoned.append(attempt.base_ms)
        if attempt.at_least_once:
            unnoted.append(attempt.base_ms)
        if notes is None or attempt.at_least_once:
            floor = max([floor, *(b + reach for b in abandoned)])
        else:  # above what its tries noted (everything it carries lies below its own base)
            floor = max(floor, written_end(attempt, notes))
    modulus = ((commit.key_modulus or commit.tasks) if commit is not None else 0) or 1
    residues = list(commit.key_residues) if commit is not None else []
    span = max(span_ms + (levels(modulus, residues) - 1) * TASK_WIDTH_MS, reach)  # the keyed blocks too
    record = AttemptRecord(query_id, batch_id, next_base(now_ms, floor), prev, None, flush_rows=flush_rows,
                           flush_bytes=flush_bytes, plan=plan_id, abandoned=abandoned, noted=True,
                           at_least_once=not noting, unnoted=unnoted, writes=dict(writes or {}),
                           span_ms=0 if span == BATCH_SPAN_MS else span, keyed_tasks=modulus,
                           key_hash=commit.key_hash if commit is not None else "", key_residues=residues)
    return Placement(record.base_ms, prev, False, flush_rows, flush_bytes, record, abandoned=abandoned,
                     unnoted=unnoted, reach_ms=record.reach_ms, keyed_tasks=record.keyed_tasks,
                     key_hash=record.key_hash, key_residues=list(record.key_residues))


def written_end(attempt: AttemptRecord, notes: Sequence[TaskNote]) -> int:
    """Above every cell an exactly-once ``attempt`` wrote: its base plus its tries' noted blocks.

    A try sends nothing, delete markers included, before its note is done, and the note
    records its block (``TaskNote.put_block``); the done note is a ``checkAndPut`` on the
    attempt as the try placed it. So once a new attempt replaced it, the notes read are
    all it will ever write, and a read made before the replacement may miss only notes
    done in between: ``_committer.place_task`` reads them again after it recorded the new
    attempt, and moves that attempt up if one was. At least one block above the base,
    so no two attempts share a base (their notes are told apart by it).
    """
    blocks = [n.put_block for n in notes if n.base_ms == attempt.base_ms and n.chunks is not None]
    return attempt.base_ms + (1 + max(blocks, default=0)) * TASK_WIDTH_MS


def _produced(commit: CommitRecord | None, attempt: AttemptRecord) -> bool:
    """Whether ``attempt`` is the one the last commit committed (then nothing is abandoned)."""
    return (commit is not None and attempt.query_id == commit.query_id and attempt.batch_id == commit.batch_id
            and attempt.base_ms == commit.ts_lo)
