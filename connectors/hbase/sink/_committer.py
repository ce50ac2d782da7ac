"""The sink's commit protocol: executors agree on a timestamp base, the driver commits it.

Executor (:func:`place_task`, once per write task): read the sink's row in the commit
table, decide where the task writes (``_attempts``, from ids only) and record a new
attempt with ``checkAndPut``, so the tasks of one plan agree on its base.

Driver (:class:`Committer`, Spark's ``commit``/``abort``): close the attempt, remove the
noted puts of abandoned attempts and of every try Spark did not commit, write
``c:commit`` with a ``checkAndPut`` conditional on the closed attempt
(docs/hbase-guarantees.md, step 5). The history copy of the commit a batch builds on is
written by the task that records its attempt, off the driver's serial path; the driver
writes it only when no task reports having done so, before ``c:commit`` moves past it.
The commit worker keeps the last record it wrote per sink (:data:`_LAST_WRITTEN`) and,
when the tasks started from it, checks-and-puts against it without reading the row
first: the ``checkAndPut`` compares exact bytes, so a record anyone changed meanwhile
fails it and the commit reads the row (the cache is an expected value, never trusted).
``abort`` deletes nothing: the batch's cells sit above the committed read bound, and its
replay (a new plan) abandons them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pyspark.sql.datasource import WriterCommitMessage

from ...._exceptions import FencedError, ProtocolError, SinkError
from ....barrier._sink import merge_offsets
from ..client._connection import HBaseConnection
from ..client._connection_pool import release
from ..client._thrift2 import Thrift2Admin
from ..client._version_deletes import delete_versions
from ._attempts import Placement, check_formats, place, plan_clock, written_end
from ._commit_table import (
    ATTEMPT_COLUMN,
    COMMIT_COLUMN,
    AttemptRecord,
    CommitRecord,
    SinkRow,
    SinkState,
    TaskNote,
    check_and_put,
    delete_task_notes,
    prune_history,
    put_cell,
    put_history,
    read_history,
    read_note_keys,
    read_sink_row,
    read_state,
)
from ._keyed import choose_keying, levels
from ._timestamps import BATCH_SPAN_MS, TASK_WIDTH_MS, TaskClock, next_base, now_ms

__all__ = ["Committer", "HBaseCommitMessage", "place_task"]

log = logging.getLogger(__name__)
_MAX_PLAN_ROUNDS = 20
# (commit table, sink.id) -> the commit record this process last wrote there, as bytes.
# Spark runs each commit in a reused Python worker on the driver; see the module doc.
_LAST_WRITTEN: dict[tuple[str, str], bytes] = {}
AHEAD_WARN_MS = 5_000  # cells further ahead of the driver's clock than this are worth a warning
_AHEAD_WARNED: dict[str, int] = {}  # sink.id -> the driver clock of its last such warning


@dataclass
class HBaseCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver (picklable, no secrets)."""

    sink_id: str
    query_id: str
    batch_id: int
    partition_id: int
    base_ms: int
    prev_seq: int | None
    replay_of_committed: bool
    flush_rows: int = 1000
    flush_bytes: int = 2 << 20
    rows: int = 0
    ts_end: int | None = None
    kept_history: int | None = None  # the commit (sequence) this task copied into the history
    abandoned: list[int] = field(default_factory=list)  # bases of the attempts this one replaced
    unnoted: list[int] = field(default_factory=list)  # of those, at-least-once ones: their ranges become gaps
    attempt_raw: bytes | None = None  # the attempt's bytes: the commit is conditional on them
    notes: int = 0  # notes this try wrote (c:task-<base>-<partition>-<try>): 1 once it noted its keys
    slot: int | None = None  # the put slot this try claimed (None: it claimed none, see ``_writer._note``)
    reach_ms: int = BATCH_SPAN_MS  # how far above each abandoned base its tasks may have written
    # The task's keys' classes per partitioner (``_keyed.KeyClasses``; None: it wrote no key):
    # the commit chooses from them the partitioner the next batch's tasks test under.
    key_classes: dict[str, list[int]] | None = None


def place_task(conn: HBaseConnection, commit_table: str, sink_id: str, query_id: str,
                 batch_id: int, *, plan_id: str = "", fenced: bool = True, max_rows: int = 1000,
                 max_size: int = 2 << 20, history_retain: int = 0,
                 writes: dict[str, str] | None = None, span_ms: int = BATCH_SPAN_MS) -> Placement:
    """The timestamp base and flush limits this task writes with (executor; one get of the sink
    row, at most one checkAndPut, and after a recorded attempt one ``mutateRows``).

    The decision is ``_attempts.place`` (ids only); this reads its input and records a new
    attempt, with ``max_rows``/``max_size`` (a retry in the same plan uses the recorded
    ones). The task that records the attempt (one per plan) also copies the commit it
    builds on into the history (``kept_history``), off the driver's serial path; the copy
    is of bytes read from ``c:commit``, so a committed record, whatever happens after.
    """
    for _ in range(_MAX_PLAN_ROUNDS):
        row = read_sink_row(conn, commit_table, sink_id)  # the notes too: _tidy needs no get of its own
        state = row.state
        current = state.commit  # parsed once: placed on, and copied into the history below
        check_formats(current, state.attempt, sink_id=sink_id, commit_table=commit_table, notes=row.notes)
        clock = plan_clock(plan_id)
        placed_at = clock if clock is not None else now_ms()
        placement = place(current, state.attempt, query_id=query_id, batch_id=batch_id, plan_id=plan_id,
                          now_ms=placed_at, flush_rows=max_rows, flush_bytes=max_size, sink_id=sink_id,
                          noting=fenced, writes=writes, span_ms=span_ms, notes=row.notes if fenced else None)
        if placement.record is None:
            return replace(placement, attempt_raw=None if placement.replay_of_committed else state.attempt_raw)
        if current is not None and current.query_id != query_id:
            # A sink.id shared by a stream and batch writes: another series committed last, so
            # this batch may be committed further back (a replay after a restart). Read only here.
            earlier = next((r for r in read_history(conn, commit_table, sink_id)
                            if r.query_id == query_id and r.batch_id == batch_id), None)
            if earlier is not None:
                return Placement(earlier.ts_lo, earlier.seq - 1 if earlier.seq > 1 else None, True,
                                 earlier.flush_rows, earlier.flush_bytes)
        if placement.abandoned:
            log.info("sink %s batch %d: plan %s abandons the attempt it found (abandoned attempts at %s); the "
                     "new attempt writes at %d", sink_id, batch_id, plan_id or "-", placement.abandoned,
                     placement.base_ms)
        raw = placement.record.to_bytes()
        if not fenced:
            put_cell(conn, commit_table, sink_id, ATTEMPT_COLUMN, raw)
            if current is not None:
                _tidy(conn, commit_table, sink_id, current, history_retain, row)
            return replace(placement, attempt_raw=raw)
        if check_and_put(conn, commit_table, sink_id, ATTEMPT_COLUMN, state.attempt_raw, raw):
            if placement.abandoned and state.attempt is not None and not state.attempt.at_least_once:
                # Placed above what the abandoned attempt's tries had noted when the row was
                # read; one may have finished its note since, never after the put above.
                end = written_end(state.attempt, read_sink_row(conn, commit_table, sink_id).notes)
                if end > placement.base_ms:
                    higher = replace(placement.record, base_ms=next_base(placed_at, end))
                    if not check_and_put(conn, commit_table, sink_id, ATTEMPT_COLUMN, raw, higher.to_bytes()):
                        continue
                    placement, raw = replace(placement, base_ms=higher.base_ms, record=higher), higher.to_bytes()
            if current is None:
                return replace(placement, attempt_raw=raw)
            kept = _tidy(conn, commit_table, sink_id, current, history_retain, row, keep=state.commit_raw)
            return replace(placement, attempt_raw=raw, kept_history=current.seq if kept else None)
    raise ProtocolError(f"sink {sink_id!r}: could not agree on a timestamp base for batch "
                        f"{batch_id} after {_MAX_PLAN_ROUNDS} rounds (another writer keeps racing)")


def _tidy(conn: HBaseConnection, commit_table: str, sink_id: str, current: CommitRecord, retain: int,
          row: SinkRow, *, keep: bytes | None = None) -> bool:
    """Copy the last commit into the history (``keep``: its bytes) and delete what no one
    will read again: notes made final by it, history past retention. True if the copy landed.

    Run by the task that recorded a new attempt (one per batch, off the driver's serial
    path), on the sink row it read before recording it; the copy and the deletes go in
    one ``mutateRows``. Every attempt still to be removed started above the last commit's
    read bound (``_attempts``), so a note at or below its base belongs to the committed
    attempt itself or to a leftover try (a late copy, a failed run's task) whose attempt
    was removed already. History rows at or below ``current.seq - retain`` go when
    ``commit.history.retain`` is set. A failure is logged, not raised: the next batch's
    task deletes again, and a record no task reports copied is copied by the driver's
    commit before ``c:commit`` moves past it.
    """
    final = [n for n in row.notes if n.base_ms <= current.ts_lo]
    try:
        delete_task_notes(conn, commit_table, sink_id, final, history=(current, keep) if keep is not None else None)
    except SinkError as exc:
        log.info("sink %s: the notes of committed attempts stay until the next batch%s (%s)", sink_id,
                 ", and the driver's commit copies the last commit into the history" if keep is not None else "", exc)
        return False
    try:
        if retain and current.seq > retain:
            prune_history(conn, commit_table, sink_id, keep_above=current.seq - retain)
    except SinkError as exc:
        log.info("sink %s: old history rows stay until the next batch (%s)", sink_id, exc)
    return keep is not None


def _last_per_task(msgs: Sequence[HBaseCommitMessage]) -> list[HBaseCommitMessage]:
    """Each task's last report: a task reports at every snapshot, with running totals."""
    last: dict[int, HBaseCommitMessage] = {}
    for m in msgs:
        last[m.partition_id] = m
    return list(last.values())


def _committed_meanwhile(state: SinkState, first: HBaseCommitMessage) -> CommitRecord | None:
    """The commit record, when it is this attempt's: another commit of the same attempt went through."""
    again = state.commit
    if again is None or (again.query_id, again.batch_id, again.ts_lo) != (first.query_id, first.batch_id,
                                                                          first.base_ms):
        return None
    log.info("sink %s batch %d was committed meanwhile by another commit of the same attempt",
             first.sink_id, first.batch_id)
    return again


def _merge_gaps(old: list[list[int]], *new: list[list[int]]) -> list[list[int]]:
    """The committed record's gaps: the earlier ones, then each abandoned range, overlapping or touching ones joined.

    An attempt abandoned after another starts where that one's writes end when the
    planning clock had not passed the floor (``_attempts``), so their ranges touch and are
    written as one. A joined range covers what its parts cover, nothing between them.
    """
    gaps = [list(g) for g in old]
    for lo, hi in sorted(g for ranges in new for g in ranges):
        if lo >= hi:
            continue
        if gaps and gaps[-1][0] <= lo <= gaps[-1][1]:
            gaps[-1][1] = max(gaps[-1][1], hi)
        else:
            gaps.append([lo, hi])
    return gaps


def _warn_if_ahead(record: CommitRecord, tasks: Sequence[HBaseCommitMessage]) -> None:
    """Say when the batch's cells end more than :data:`AHEAD_WARN_MS` ahead of the driver's clock.

    Only tasks that are not keyed (``_keyed``) move cells ahead: each owns 8 ms per batch,
    so batches of many such tasks that come faster than that climb above the clock, and
    TTLs, time-range reads and a server's timestamp slop then see the future. The fix is
    the user's (partition by the row key, or fewer tasks), so the warning names it; given
    at most once a minute per sink and process, since each batch would repeat it.
    """
    ahead = record.ts_hi - 1 - record.committed_at_ms
    if ahead <= AHEAD_WARN_MS:
        return
    last = _AHEAD_WARNED.get(record.sink_id)
    if last is not None and record.committed_at_ms - last < 60_000:
        return
    _AHEAD_WARNED[record.sink_id] = record.committed_at_ms
    attempt = AttemptRecord.from_bytes(tasks[0].attempt_raw) if tasks and tasks[0].attempt_raw else None
    shared = levels(attempt.keyed_tasks, attempt.key_residues) if attempt else 1  # keyed tasks end within them
    own = sum(1 for m in tasks if m.ts_end is not None and m.ts_end - m.base_ms > shared * TASK_WIDTH_MS)
    log.warning("sink %s batch %d: its cells end %.1f s ahead of this driver's clock: %d of its %d write tasks "
                "are not hash-partitioned by the row key, and each such task takes %d ms of timestamps per batch, "
                "more than the batches' interval allows. repartition(n, %r) before the sink (then every task shares "
                "one %d ms block), or fewer partitions reaching the sink, keeps cells on the clock",
                record.sink_id, record.batch_id, ahead / 1000, own, record.tasks, TASK_WIDTH_MS, record.rowkey,
                TASK_WIDTH_MS)


class Committer:
    """Driver side of the protocol (a fresh instance per Spark commit/abort call)."""

    def __init__(self, conn: HBaseConnection, commit_table: str, table: str, *, fenced: bool,
                 schema_json: str, rowkey: str, columns: list[list[str]],
                 thrift2: Callable[[], Thrift2Admin] | None = None) -> None:
        self._conn, self._commit_table, self._table = conn, commit_table, table
        self._thrift2 = thrift2
        self._fenced = fenced
        self._schema_json, self._rowkey, self._columns = schema_json, rowkey, columns
        self._qualified = sorted({(c[1].encode(), c[2].encode()) for c in columns})

    def commit(self, messages: Sequence[WriterCommitMessage | None], batch_id: int, *,
               offsets: Mapping[str, int] | None = None,
               source_checkpoints: Sequence[int] = ()) -> CommitRecord | None:
        """Record checkpoint ``batch_id`` atomically; idempotent for an already-committed batch.

        ``offsets`` (next offset per source channel) and ``source_checkpoints`` are the
        batch's, merged over its tasks by the checkpointed-sink adapter (the one place
        task reports are merged); the record carries the previous commit's offsets
        forward for channels this batch did not read. The fault points around this call
        are the adapter's too, so each fires once per batch.
        """
        msgs = [m for m in messages if isinstance(m, HBaseCommitMessage)]
        if not msgs:
            log.info("batch %d: no write task reported; nothing to commit", batch_id)
            return None
        first = msgs[0]
        if first.batch_id != batch_id:
            # The batch id arrives twice (the driver's argument, every task's report); the
            # record is written from the reports, so the two must agree.
            raise ProtocolError(f"barrier-hbase: Spark commits batch {batch_id}, but its write tasks report batch "
                                f"{first.batch_id} (a bug in the call order, please report it)")
        keys = {(m.sink_id, m.query_id, m.batch_id, m.base_ms, m.prev_seq, m.attempt_raw) for m in msgs}
        if len(keys) != 1:
            raise FencedError(
                f"batch {batch_id}: write tasks disagree on the timestamp base {sorted(map(str, keys))}; "
                "another writer is using the same sink.id", batch_id=batch_id)
        remembered = _LAST_WRITTEN.pop((self._commit_table, first.sink_id), None) if self._fenced else None
        if remembered is not None:
            last = CommitRecord.from_bytes(remembered)
            # Only the record the tasks started from, and never this batch's own: an
            # already-committed batch is answered from a fresh read.
            if last.seq == first.prev_seq and (last.query_id, last.batch_id) != (first.query_id, first.batch_id):
                record = self._commit_over(SinkState(remembered, None), msgs, batch_id, offsets,
                                           source_checkpoints, remembered=True)
                if record is not None:
                    return record
                # the row no longer holds what this worker wrote: read it, as without a memory
        state = read_state(self._conn, self._commit_table, first.sink_id)
        return self._commit_over(state, msgs, batch_id, offsets, source_checkpoints, remembered=False)

    def _commit_over(self, state: SinkState, msgs: Sequence[HBaseCommitMessage], batch_id: int,
                     offsets: Mapping[str, int] | None, source_checkpoints: Sequence[int], *,
                     remembered: bool) -> CommitRecord | None:
        """Commit over ``state``; None only when ``remembered`` and the row no longer holds it."""
        first = msgs[0]
        current = state.commit
        if current is not None and current.query_id == first.query_id and current.batch_id == first.batch_id:
            if current.ts_lo != first.base_ms:
                raise FencedError(f"sink {first.sink_id!r}: batch {batch_id} is committed at timestamp base "
                                  f"{current.ts_lo}, the tasks wrote at {first.base_ms}", batch_id=batch_id)
            log.info("sink %s batch %d already committed (seq %d); commit is a no-op",
                     first.sink_id, batch_id, current.seq)
            return current
        if all(m.replay_of_committed for m in msgs):
            # Committed earlier, under a sink.id another series has committed to since
            # (``place_task`` found it in the history): nothing was written, nothing to commit.
            log.info("sink %s batch %d was committed before another series' batch; commit is a no-op",
                     first.sink_id, batch_id)
            return None
        current_seq = current.seq if current is not None else None
        if self._fenced and current_seq != first.prev_seq:
            raise FencedError(
                f"sink {first.sink_id!r}: expected last committed sequence {first.prev_seq}, found "
                f"{current_seq} (query {current.query_id if current else None}, batch "
                f"{current.batch_id if current else None}); another writer uses this sink.id",
                batch_id=batch_id)
        covered = merge_offsets(current.offsets if current is not None else {}, offsets or {})
        # Exactly-once tasks of this release reported their attempt's bytes: close it first,
        # so no try of it can note (and then send) anything more, then remove every try's
        # puts but the committing ones'.
        attempt = first.attempt_raw
        closing = self._fenced and attempt is not None
        if closing and attempt is not None:
            closed = self._close(first, attempt, batch_id)
            if isinstance(closed, CommitRecord):
                return closed
            attempt = closed
        if first.abandoned or closing:  # one get of the notes serves both removals
            row = read_sink_row(self._conn, self._commit_table, first.sink_id)
            if first.abandoned:
                self._remove_abandoned(first.sink_id, first.abandoned, row.notes)
            if closing:
                self._remove_losers(first.sink_id, first.base_ms, msgs, row.notes)
        ends = [m.ts_end for m in msgs if m.ts_end is not None]
        ts_hi = max(ends) if ends else first.base_ms
        task_count = len({m.partition_id for m in msgs})
        keying = choose_keying(((m.partition_id, m.key_classes) for m in _last_per_task(msgs)), task_count)
        record = CommitRecord(
            sink_id=first.sink_id, table=self._table, seq=(current_seq or 0) + 1, query_id=first.query_id,
            batch_id=first.batch_id, ts_lo=first.base_ms, ts_hi=ts_hi,
            read_bound=max(ts_hi, current.read_bound if current is not None else 0), offsets=covered,
            source_checkpoints=sorted(set(source_checkpoints)),
            gaps=_merge_gaps(current.gaps if current is not None else [],
                             # below this attempt's base: it started above all they wrote (``_attempts``)
                             [[b, min(b + first.reach_ms, first.base_ms)] for b in first.abandoned
                              if self._thrift2 is None or b in first.unnoted]),
            schema_json=self._schema_json, rowkey=self._rowkey, columns=self._columns,
            committed_at_ms=now_ms(), flush_rows=first.flush_rows, flush_bytes=first.flush_bytes,
            tasks=task_count, key_hash=keying[0], key_residues=keying[2],
            key_modulus=0 if keying[1] == task_count else keying[1],
        )
        if current is not None and not any(m.kept_history == current.seq for m in msgs):
            # No task copied the commit it built on (its task died after recording the
            # attempt, at-least-once tasks copy nothing, or it ran before this release): copy
            # it before c:commit moves on, whichever mode wrote it.
            put_history(self._conn, self._commit_table, current, raw=state.commit_raw)
        if not self._fenced:
            put_cell(self._conn, self._commit_table, first.sink_id, COMMIT_COLUMN, record.to_bytes())
            put_history(self._conn, self._commit_table, record)
        else:
            # Conditional on the attempt the tasks wrote in, as this commit closed it (a newer
            # plan or another writer replaces c:attempt before writing anything); an earlier
            # release's tasks reported no attempt bytes: then on the commit record they
            # started from, as it did.
            if not check_and_put(self._conn, self._commit_table, first.sink_id, COMMIT_COLUMN,
                                 attempt if attempt is not None else state.commit_raw, record.to_bytes(),
                                 check=ATTEMPT_COLUMN if attempt is not None else None):
                if remembered:
                    return None
                again = _committed_meanwhile(read_state(self._conn, self._commit_table, first.sink_id), first)
                if again is not None:
                    return again
                raise FencedError(f"sink {first.sink_id!r}: the attempt of batch {batch_id} was replaced, or the "
                                  f"commit record changed, while committing; a newer plan or another writer "
                                  f"uses this sink.id", batch_id=batch_id)
            _LAST_WRITTEN[(self._commit_table, first.sink_id)] = record.to_bytes()
        tasks = _last_per_task(msgs)
        log.info("sink %s committed batch %d as sequence %d (%d rows, timestamps %d..%d)", first.sink_id,
                 batch_id, record.seq, sum(m.rows for m in tasks), record.ts_lo, record.ts_hi)
        _warn_if_ahead(record, tasks)
        return record

    def _close(self, first: HBaseCommitMessage, attempt_raw: bytes, batch_id: int) -> bytes | CommitRecord:
        """Mark the tasks' attempt as being committed; its bytes as closed (the commit's condition).

        A try notes its keys with a ``checkAndPut`` conditional on the attempt's bytes as it
        placed them (``_writer._note``), so from here on a leftover try of this attempt (a
        speculative copy Spark has not yet killed, a retry of a lost executor's task) sends
        nothing; and a try that places now is fenced (``_attempts``). Every try that may
        still send is thus noted before :meth:`_remove_losers` reads the notes. A record
        closed already by an earlier commit call of this attempt is used as it is; a
        commit that went through meanwhile is returned.
        """
        closed = replace(AttemptRecord.from_bytes(attempt_raw), closing=True).to_bytes()
        if check_and_put(self._conn, self._commit_table, first.sink_id, ATTEMPT_COLUMN, attempt_raw, closed):
            return closed
        state = read_state(self._conn, self._commit_table, first.sink_id)
        if state.attempt_raw == closed:
            return closed
        again = _committed_meanwhile(state, first)
        if again is not None:
            return again
        raise FencedError(f"sink {first.sink_id!r}: the attempt of batch {batch_id} was replaced before its "
                          f"commit; a newer plan or another writer uses this sink.id", batch_id=batch_id)

    def _remove_losers(self, sink_id: str, base_ms: int, msgs: Sequence[HBaseCommitMessage],
                       notes: list[TaskNote]) -> None:
        """Delete the puts of every try of this attempt whose report Spark did not commit.

        Each try of a task puts at its own slot (``_writer._note``), and Spark commits one
        try per task: the one whose report it holds. Another try (a failed one, the loser
        of a speculative race) may have put other values where it saw a key's rows in
        another order; its noted versions are deleted exactly (row, the sink's columns,
        its slot's timestamp), so each row ends as the committing try left it. A late
        write of such a try is masked by the version delete all the same, and the attempt
        is closed, so no try notes anything after this read.
        """
        winners = {m.partition_id: m for m in _last_per_task(msgs)}
        losers = []
        for note in notes:
            if note.base_ms != base_ms or note.chunks is None:
                continue  # another attempt's, or one that sent nothing
            won = winners.get(note.partition)
            if won is None or won.slot != note.slot:
                losers.append(note)
        if losers:  # exactly once has Thrift2 (``_options.parse_sink_options``)
            removed = self._delete_noted(sink_id, losers)
            log.info("batch of sink %s: removed the puts of %d try(ies) Spark did not commit (%d cell version(s))",
                     sink_id, len(losers), removed)

    def _remove_abandoned(self, sink_id: str, bases: list[int], notes: list[TaskNote]) -> None:
        """Delete exactly the versions the abandoned attempts noted, then their notes, before this batch commits.

        From the notes alone (``_commit_table.TaskNote``): each noted key, each of the sink's columns, the put
        timestamp of the noting task's block. No scan; nothing of another writer's rows
        or columns. A noted write that lands after this is masked by the version delete
        all the same. The notes go right after their versions, so a replay of this commit
        (a crash before it lands) finds nothing left and removes nothing twice: each
        abandoned attempt costs what it wrote, once.
        """
        wanted = set(bases)
        mine = [n for n in notes if n.base_ms in wanted]
        if not mine:
            return
        removed = self._delete_noted(sink_id, mine, abandoned=True)
        if removed is not None:
            log.info("removed the noted puts of %d abandoned attempt(s) (%d cell version(s), %d note(s)) from %s",
                     len(wanted), removed, len(mine), self._table)

    def _delete_noted(self, sink_id: str, notes: list[TaskNote], *, abandoned: bool = False) -> int | None:
        """Delete the versions ``notes`` noted, then the notes.

        One Thrift2 version delete per noted key and sink column, at the put timestamp of
        the noting try's slot, sent over several Thrift2 connections at once
        (``_version_deletes``: as fast as the batch's tasks wrote them, not one chunk after
        another). Returns the versions deleted; None when there is no Thrift2 (the notes
        stay, and the versions with them).
        """
        if self._thrift2 is None:
            if abandoned:
                log.warning("an attempt of this batch was abandoned (a driver restart or a sink.id takeover); its "
                            "puts stay in table %s as older versions: committed and as-of reads skip them and plain "
                            "reads show this batch's values above them, but a read of all versions lists them. Set "
                            "hbase.thrift2.host so the sink removes them", self._table)
            return None
        connect, qualified = self._thrift2, self._qualified

        def cells() -> Iterator[tuple[bytes, bytes, bytes, int]]:
            for note in notes:
                if note.chunks is None:
                    continue  # still being written when replaced: it sent nothing
                ts = TaskClock(note.base_ms, note.put_block).slot_put_ts(note.slot)
                for key in read_note_keys(self._conn, self._commit_table, sink_id, note):
                    for family, qualifier in qualified:
                        yield key, family, qualifier, ts

        removed = delete_versions(connect, self._table, cells())
        delete_task_notes(self._conn, self._commit_table, sink_id, notes)
        return removed

    def close(self, *, keep: bool = False) -> None:
        """``keep``: the commit went through, so its connection serves the next one
        (``_connection_pool``); otherwise it is closed."""
        if keep:
            release(self._conn)
        else:
            self._conn.close()

    def abort(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
        """Nothing to undo: the batch's cells sit above the committed read bound (see module doc)."""
        bases = sorted({m.base_ms for m in messages if isinstance(m, HBaseCommitMessage)})
        written = f" at timestamp base {bases[0] if len(bases) == 1 else bases}" if bases else ""
        log.warning("batch %d aborted; nothing to do: whatever its tasks wrote%s stays invisible to committed "
                    "readers, and its replay rewrites and commits it", batch_id, written)
