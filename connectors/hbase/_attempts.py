"""Where a batch attempt writes: decided from ids the protocol owns, never from the data.

The rule (executor, once per write task, in :func:`place`; the commit table's sink row
is its only input besides the task's own ids):

1. The last commit is this (query, batch): a replay of a committed batch. Nothing is
   written (the batch is in the table already); the driver's commit is a no-op.
2. The in-flight attempt is this (query, batch), on top of the same commit, and was
   started by this task's *plan* (the planned batch whose pickled writer the task
   runs): a retry of a task of the same plan. It reuses the attempt's base, and its
   block is its Spark task id (partition id), as the failed try's was.
3. The in-flight attempt is this (query, batch) on top of the same commit, but from an
   *older* plan (a driver that died mid-batch; the query restarted and replanned it),
   or it is any other attempt that did not produce the last commit (another query took
   the ``sink.id`` over, or lost the commit to one): the attempt is abandoned.
   Its timestamp range ``[base, base + BATCH_SPAN_MS)`` becomes a *gap* (merged with
   the gap that attempt already carried) and the new attempt's base starts above it.
4. The in-flight attempt is this (query, batch) from a *newer* plan: this task is a
   leftover of a driver that died and was replanned; it is fenced
   (:class:`~sparkbarrier.FencedError`) and writes nothing.
5. Otherwise a new attempt at ``max(now, the last commit's read bound)``.

Why it is exact (for every query shape Spark allows before the sink). Inside one attempt
a write task's block is its partition id and its rounds follow its input, so the
attempt that commits writes what a run without failures of that plan writes. Every
cell an abandoned attempt wrote lies in the gap, strictly below that attempt: the
batch's input is the same (Spark replays a batch from its offsets), so each (row,
column) the abandoned attempt touched is touched again above it, with the batch's final
effect (a put, or a delete marker that masks everything older). Plain reads therefore
show the committing attempt's values; committed and as-of reads skip the gap; and the
driver removes the gap's puts before the batch commits (``_rollback``, Thrift2), so the
version history holds one version per batch. Nothing here looks at the rows.

Plan ids sort by the time their batch was planned (``new_run_id``), so "older" is
well defined across driver restarts; a plan id of the previous release (none) sorts
first. The one clock assumption: a restarted driver's clock is not behind the dead
driver's by more than the restart took (seconds). Were it, rule 4 would fence the
new run's tasks until its clock passed, a stall, never a wrong value.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._exceptions import FencedError
from ._commit_table import AttemptRecord, CommitRecord
from ._timestamps import BATCH_SPAN_MS, next_base

__all__ = ["Placement", "place"]


@dataclass(frozen=True)
class Placement:
    """Where one task writes: the attempt's base, and the attempt record to write if it is new.

    ``record`` is None when the task joins an attempt that exists (a retry, or another
    task of the same plan), or replays a committed batch (``replay_of_committed``: the
    task writes nothing).
    """

    base_ms: int
    prev_seq: int | None
    gap: list[int] | None
    replay_of_committed: bool
    flush_rows: int
    flush_bytes: int
    record: AttemptRecord | None = None
    # Set by ``_committer.plan_attempt``, never by :func:`place`: the sequence of the commit
    # this task copied into the sink's history after recording its new attempt.
    kept_history: int | None = None


def place(commit: CommitRecord | None, attempt: AttemptRecord | None, *, query_id: str, batch_id: int,
          plan: str, now_ms: int, flush_rows: int, flush_bytes: int, sink_id: str = "") -> Placement:
    """The rule of the module docstring; pure (the caller reads the row and writes ``record``)."""
    if commit is not None and commit.query_id == query_id and commit.batch_id == batch_id:
        return Placement(commit.ts_lo, commit.seq - 1 if commit.seq > 1 else None, None, True,
                         commit.flush_rows, commit.flush_bytes)
    prev = commit.seq if commit is not None else None
    floor = commit.read_bound if commit is not None else 0
    gap = None
    if attempt is not None and not _produced(commit, attempt):
        ours = attempt.prev_seq == prev and attempt.query_id == query_id and attempt.batch_id == batch_id
        if ours and attempt.plan == plan:
            return Placement(attempt.base_ms, attempt.prev_seq, attempt.gap, False, attempt.flush_rows,
                             attempt.flush_bytes)
        if ours and attempt.plan > plan:
            raise FencedError(
                f"sink {sink_id!r}: batch {batch_id} was planned again (plan {attempt.plan}) after this task's "
                f"plan ({plan or 'none'}); this task belongs to a driver that stopped and writes nothing",
                batch_id=batch_id)
        # Abandoned: an older plan of this batch, another query's attempt (a takeover), or
        # an attempt whose writer lost the commit to another one (built on an older commit).
        # Its gap carries the attempts it replaced only if they too sit above the last commit.
        lo = attempt.gap[0] if attempt.gap and attempt.prev_seq == prev else attempt.base_ms
        gap = [lo, attempt.base_ms + BATCH_SPAN_MS]
        floor = max(floor, gap[1])
    record = AttemptRecord(query_id, batch_id, next_base(now_ms, floor), prev, gap, flush_rows=flush_rows,
                           flush_bytes=flush_bytes, plan=plan)
    return Placement(record.base_ms, prev, gap, False, flush_rows, flush_bytes, record)


def _produced(commit: CommitRecord | None, attempt: AttemptRecord) -> bool:
    """Whether ``attempt`` is the one the last commit committed (then nothing is abandoned)."""
    return (commit is not None and attempt.query_id == commit.query_id and attempt.batch_id == commit.batch_id
            and attempt.base_ms == commit.ts_lo)
