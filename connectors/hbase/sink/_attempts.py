"""Where a batch attempt writes: decided from ids the protocol owns, never from the data.

The ids: the query id and Spark's batch id; the *plan* (``plan_id``: the planned batch
whose pickled writer the task runs, an epoch the driver raises in the commit table for
every batch it plans, ``raise_plan_epoch``: a later plan has a larger one, whatever the
clocks say); a write task's Spark partition id; and the commit sequence.

The rule (executor, once per write task, in :func:`place`; the commit table's sink row
is its only input besides the task's own ids):

1. The last commit is this (query, batch): a replay of a committed batch. Nothing is
   written (the batch is in the table already); the driver's commit is a no-op.
2. The recorded attempt has a *newer* plan than this task, or the last commit is a later
   batch of this query: this task is a leftover (of a driver that died and was
   replanned, a speculative copy that outlived its stage, a task of an older batch): it
   is fenced (:class:`~sparkbarrier.FencedError`) and writes nothing.
3. The in-flight attempt is this (query, batch), on top of the same commit, and was
   started by this task's plan: a retry or a concurrent copy of a task of the same
   plan. It reuses the attempt's base and key test (``keyed_tasks``, ``key_hash``,
   ``key_residues``), so its block is the
   other copy's (``_timestamps.task_block``: from its partition id and its keys, the same
   rows on every try); it puts at a slot of its own in that block (``_writer``).
   Once the driver began committing the attempt (``closing``) it is a leftover: fenced.
4. The in-flight attempt is from an *older* plan and did not produce the last commit
   (a driver that died mid-batch; another query that took the ``sink.id`` over, or lost
   the commit to one): it is abandoned. Its base joins the new attempt's ``abandoned``
   list (with the bases it had abandoned itself on top of the same commit), and the new
   attempt starts above all of them.
5. Otherwise a new attempt at ``max(now, the last commit's read bound)``.

Why it is exact (for every query shape Spark allows before the sink). Inside one attempt
a write task's block follows from its partition id and whether all its keys hash to its
own residue under the attempt's modulus and partitioner (``_keyed``; two keyed tasks share no key, every other task
has a block of its own), and it writes each key's net change once (``_buffer``:
a key's net change is a function of its own rows): its delete markers at the block's first
millisecond, the same for every try whatever the order of its rows, and its puts at the
slot its try claimed. The commit first closes the attempt (no try notes, and so sends,
anything after that), then deletes the noted puts of every try Spark did not commit
(``_committer``), so each row ends as the committing try left it in whatever order the
tries' rows and write calls arrived, and the attempt that commits writes what a run
without failures of that plan writes. An abandoned attempt's tries noted their keys in the commit
table before sending anything, conditional on their attempt still being the recorded one
(``_commit_table``: ``c:task-*``); once replaced, none can send anything. Before the
replacing attempt commits, the driver deletes exactly the noted versions (row, the
sink's columns, the put timestamp of the try's slot): no scan, nothing
of another writer's rows or columns, nothing outside those timestamps; a note whose
mutations land later is masked by the version delete all the same. Only an abandoned
at-least-once attempt (its tries note nothing: ``unnoted``), or any without Thrift2,
leaves puts, and only its range becomes a gap the committed and as-of views skip. The
abandoned attempt's delete markers (HBase cannot take them back) mask only versions below that range, which the
committing attempt's own deletes of the same rows mask too, the batch's input being the
same. Nothing here looks at the rows.

A clock only chooses a new attempt's base (``max(now, everything written before)``), and
that clock is the planning driver's, carried in the plan id (``e<epoch>@<ms>``,
:func:`plan_clock`): one clock per batch, chosen by the protocol, so an executor whose
clock runs ahead or behind changes nothing. A clock behind another makes the base the
floor, never a lower one, and plans are ordered by epochs, not clocks.

In-flight state is read in this release's format and its predecessor's, no older one
(:func:`check_formats`, at query start and before every placement): removing an
abandoned attempt exactly needs its writes noted in ``c:task-*`` cells, and a replay
over an attempt whose writes it cannot find would leave them where committed reads see
them. Committed records are not in flight: their gaps and history read as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ...._exceptions import ConfigError, FencedError, ProtocolError
from ._commit_table import AttemptRecord, CommitRecord, TaskNote
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
    # The modulus and the hash the attempt's tasks test their keys under (``AttemptRecord.keyed_tasks``
    # and ``key_hash``, ``_keyed``).
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
                  commit_table: str, flush_notes: Collection[int] = ()) -> None:
    """Refuse a batch in flight in a format older than this release's predecessor's (see module doc).

    Driver at query start, executor before every placement, and the driver's commit of a
    batch that abandoned attempts (an old release's task may note a flush until its attempt
    is replaced). ``flush_notes``: the bases of the sink row's ``c:log-*`` cells. The
    refusal names the format and two ways out: finish the batch with the release the
    user upgraded from, which reads it; or delete ``c:attempt``, after which the next plan places
    afresh above the last commit and what the attempt wrote stays, below the replay's
    writes but in no gap. That placement takes its base from the planning clock, so the
    way out waits until that clock is past everything the attempt may have written.
    """
    if attempt is None or _produced(commit, attempt):
        return
    ranges = [attempt.base_ms, *attempt.abandoned]
    if not attempt.noted:
        what = "was left in flight by a release before 2026-11-27, which noted nothing of what its tasks wrote"
    elif attempt.gap is not None:
        what = (f"is in flight over an attempt a release before 2026-11-27 left (timestamps {attempt.gap[0]}.."
                f"{attempt.gap[1]}), which noted nothing of what its tasks wrote")
    elif flush_notes and set(ranges) & set(flush_notes):
        what = "has c:log-* flush notes of a release before 2026-11-28, whose format this release does not read"
    else:
        return
    end = max([b + attempt.reach_ms for b in ranges] + [attempt.gap[1] if attempt.gap else 0])
    raise ProtocolError(
        f"sink.id {sink_id!r}: batch {attempt.batch_id} of query {attempt.query_id} {what}. This release removes "
        f"an abandoned attempt's writes only from its c:task-* notes, so it cannot replay that batch exactly. "
        f"Finish batch {attempt.batch_id} with the release you upgraded from (it removes what the attempt wrote "
        f"and commits), then restart on this one. Or give that attempt's writes up: once the driver's clock is "
        f"past {end} (epoch ms; they lie below it), delete cell c:attempt of row {sink_id!r} in commit table "
        f"{commit_table!r} (HBase shell: deleteall '{commit_table}', '{sink_id}', 'c:attempt'); they then stay in "
        f"the table as versions below the replay's, in no gap, so committed reads see those the replay does not "
        f"overwrite")


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
    span = max(span_ms, reach)
    record = AttemptRecord(query_id, batch_id, next_base(now_ms, floor), prev, None, flush_rows=flush_rows,
                           flush_bytes=flush_bytes, plan=plan_id, abandoned=abandoned, noted=True,
                           at_least_once=not noting, unnoted=unnoted, writes=dict(writes or {}),
                           span_ms=0 if span == BATCH_SPAN_MS else span,
                           keyed_tasks=(commit.tasks if commit is not None else 0) or 1,
                           key_hash=commit.key_hash if commit is not None else "",
                           key_residues=list(commit.key_residues) if commit is not None else [])
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
