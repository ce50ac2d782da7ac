"""What a checkpointed *sink* implements, and a two-phase-commit base class for the common case.

After Flink's ``CheckpointedFunction`` + ``CheckpointListener`` as used by sinks, and its
``TwoPhaseCommitSinkFunction``: buffer or stage writes, *pre-commit* them when the
checkpoint's barrier arrives (``snapshot_state``), *commit* once the checkpoint is
complete everywhere (``notify_checkpoint_complete``), *abort* when it never will.

The protocol is engine-neutral; ``sparkbarrier.connectors.checkpointed`` runs it in
Spark, where a micro-batch is the checkpoint. Two ids, each with one name (docs/ids.md):
every method here takes Spark's micro-batch number, named ``batch_id``, on the executors
(``snapshot_state``) and on the driver (the notifications) -- the methods keep Flink's
names, their argument is the batch. The source's own counter, the *source checkpoint
id* (``barrier-kafka``'s ``checkpointId``, carried by its barriers, the ``checkpoint_id``
of :class:`~._functions.CheckpointedFunction`), is never passed as an argument: it
reaches the sink only as ``CompletedCheckpoint.source_checkpoints``.

Call order in Spark (who calls, where):

0. query start: ``validate(options, schema)`` in the planning worker, ``start(options,
   schema)`` in the commit worker (optional hooks, see :class:`CheckpointedSink`);
1. executor, once per write task: ``initialize_state(context)`` with the batch,
   partition, attempt and the sink's options;
2. executor: ``invoke(batch)`` for every Arrow batch of data rows (marker columns
   stripped), in input order per channel;
3. executor: ``snapshot_state(batch_id)`` when the barriers of every channel the
   task reads have arrived (exactly-once alignment) and once more at the end of the
   task if data arrived after the last one; each returns a picklable *handle* of what
   it pre-committed, which travels to the driver in the task's commit message. At the
   end of the input ``end_of_input()`` (Flink's ``endInput``), then one last
   ``snapshot_state`` if data arrived since the previous one (or always, if
   ``end_of_input`` returned True); ``close()`` when the task ends;
4. driver: ``notify_checkpoint_complete(batch_id, completed)`` when Spark commits
   the batch, with every task's handles; ``notify_checkpoint_aborted(batch_id,
   completed)`` when Spark aborts it. (An alignment declined on an executor is not
   passed on: its data goes into the task's next snapshot of the same batch.)

What Spark guarantees: a failed task is retried with the same input; a failed batch is
replayed with the same batch id and the same input after a restart; the driver commits
a batch at most once per run but may commit it again after a crash between the sink's
commit and Spark's commit log. So ``notify_checkpoint_complete`` must be idempotent for
the batch it is given (the Spark adapter's ledger makes sure a batch it saw completed is
never notified again; the window between the store's commit and the ledger's record is
the function's to cover), and pre-committed work of task attempts that lost must be
discarded by the commit (it is not in ``completed.handles``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CheckpointedSink", "CompletedCheckpoint", "SinkContext", "TwoPhaseCommitSink", "merge_offsets"]

Txn = TypeVar("Txn")


@dataclass(frozen=True)
class SinkContext:
    """Given to :meth:`CheckpointedSink.initialize_state` once per write task."""

    sink_name: str
    query_id: str
    batch_id: int
    partition_id: int
    attempt: int
    options: Mapping[str, str] = field(default_factory=dict)
    # The planned batch the task belongs to: its retries share it, a replay of the batch
    # after a driver restart gets another (barrier-hbase uses it to tell the two apart).
    plan_id: str = ""


@dataclass(frozen=True)
class CompletedCheckpoint:
    """What the driver learns about a completed (or aborted) checkpoint: Spark batch ``batch_id``.

    ``handles`` are the values ``snapshot_state`` returned on every task of the batch
    that reported (partition order; ``None`` results left out), typed ``object``: each is
    whatever the sink chose, back from a pickle, so the sink narrows them itself.
    ``source_offsets`` is
    the next offset per source channel (``"topic:partition"``) from the barriers the
    batch carried, merged over tasks; empty when the input has no barrier markers.
    ``source_checkpoints``: the source checkpoint ids whose barriers the batch carried (or
    that ``barrier-kafka`` planned for it), ascending; several when one batch read several.
    """

    batch_id: int
    query_id: str
    handles: tuple[object, ...] = ()
    source_offsets: Mapping[str, int] = field(default_factory=dict)
    source_checkpoints: tuple[int, ...] = ()


def merge_offsets(*sources: Mapping[str, int]) -> dict[str, int]:
    """Next offset per channel over several reports: the furthest wins.

    The one merge of source offsets (tasks of a batch, a batch on top of the previous
    commit): offsets mean "next to read", so the union with the maximum per channel is
    what all the reports together cover. Inputs are not mutated.
    """
    merged: dict[str, int] = {}
    for source in sources:
        for channel, nxt in source.items():
            merged[channel] = max(int(nxt), merged.get(channel, int(nxt)))
    return merged


class CheckpointedSink(ABC):
    """A sink that takes part in checkpoints: subclass it (see the module docstring for the call order).

    Required: :meth:`initialize_state`, :meth:`invoke`, :meth:`snapshot_state`,
    :meth:`notify_checkpoint_complete`, :meth:`notify_checkpoint_aborted`. Optional
    hooks have defaults that do nothing, so the adapter calls them unconditionally:
    :attr:`uses_ledger`, :meth:`validate`, :meth:`start` (query start, planning and
    commit workers), :meth:`end_of_input` and :meth:`close` (executor, per task).

    How it relates to :class:`~sparkbarrier.barrier.CheckpointedFunction`: that is the
    single-process operator interface the :class:`~sparkbarrier.barrier.InputProcessor`
    drives (snapshot and notifications in one place, state kept by the operator). A
    sink in Spark is split across processes: executors snapshot and return a *handle*,
    the driver is notified with every task's handles. The adapter runs each write
    task's ``CheckpointedSink`` as a ``CheckpointedFunction`` for the InputProcessor
    (``connectors/checkpointed/_task.py``), and delivers the notifications on the
    driver itself. The two are kept apart because their signatures differ in what
    crosses the process boundary (handles, :class:`CompletedCheckpoint`).
    """

    #: False when the store is its own durable record of which batches were applied
    #: (``barrier-hbase``'s commit table): the adapter then keeps no ledger of its own,
    #: (it would live beside Spark's checkpoint otherwise). Read on the driver, from a fresh instance.
    uses_ledger: bool = True

    # -- query start -------------------------------------------------------

    def validate(self, options: Mapping[str, str], schema: Any) -> None:
        """Planning worker, at most once per query run and process, before the first batch runs.

        Fail the query early: bad options, a missing table. ``schema`` is Spark's
        StructType of the stream, markers included. Runs on a fresh instance.
        """

    def start(self, options: Mapping[str, str], schema: Any) -> None:
        """Commit worker, once per query run and process, before its first notification.

        Keep what every commit needs (parsed options, clients); the started instance
        receives every later notification of the run in that process.
        """

    # -- executor ----------------------------------------------------------

    @abstractmethod
    def initialize_state(self, context: SinkContext) -> None:
        """Executor, once per task, before any data."""

    @abstractmethod
    def invoke(self, batch: pa.RecordBatch) -> None:
        """Executor: consume one Arrow batch of data rows."""

    @abstractmethod
    def snapshot_state(self, batch_id: int) -> object:
        """Executor: pre-commit everything invoked so far; return a picklable handle (or None).

        ``batch_id`` is the task's Spark batch (as in its :class:`SinkContext`), also when
        the snapshot was triggered by a source checkpoint's barriers: several snapshots of
        one task share it.
        """

    def end_of_input(self) -> bool:
        """Executor: the task's input is done (Flink's ``endInput``); a last snapshot may follow.

        Return True to get one last :meth:`snapshot_state` even when no data arrived
        since the previous one (a sink that holds data back between snapshots, such as
        ``barrier-hbase`` holding keys rewritten across flushes). The default, False,
        snapshots again only if data arrived or nothing was snapshotted yet.
        """
        return False

    def close(self) -> None:
        """Executor: the task ends (also after a failure); release clients. Not called on a crash."""

    # -- driver --------------------------------------------------------------

    @abstractmethod
    def notify_checkpoint_complete(self, batch_id: int, completed: CompletedCheckpoint) -> None:
        """Driver: the checkpoint is complete; publish its handles. Idempotent."""

    @abstractmethod
    def notify_checkpoint_aborted(self, batch_id: int, completed: CompletedCheckpoint | None = None) -> None:
        """Driver: Spark aborted the batch (or it was applied before and this is a replay); discard its handles."""


class TwoPhaseCommitSink(CheckpointedSink, Generic[Txn]):
    """Flink's ``TwoPhaseCommitSinkFunction`` for Spark: one transaction per snapshot.

    Subclasses implement :meth:`begin_transaction`, :meth:`write`, :meth:`pre_commit`
    (executor) and :meth:`commit` / :meth:`abort` (driver). A transaction starts lazily
    with the first data after a snapshot, so an empty task pre-commits nothing.
    ``self.context`` holds the task's :class:`SinkContext` on executors.
    """

    context: SinkContext | None = None
    _txn: Txn | None = None

    # -- executor ----------------------------------------------------------

    def initialize_state(self, context: SinkContext) -> None:
        self.context = context

    @abstractmethod
    def begin_transaction(self) -> Txn:
        """Open a transaction for the data until the next snapshot."""

    @abstractmethod
    def write(self, txn: Txn, batch: pa.RecordBatch) -> None:
        """Add ``batch`` to ``txn``."""

    @abstractmethod
    def pre_commit(self, txn: Txn) -> object:
        """Make ``txn`` durable but invisible (e.g. ``PREPARE TRANSACTION``); return its handle."""

    def invoke(self, batch: pa.RecordBatch) -> None:
        if self._txn is None:
            self._txn = self.begin_transaction()
        self.write(self._txn, batch)

    def snapshot_state(self, batch_id: int) -> object:  # noqa: ARG002 -- CheckpointedSink's signature
        if self._txn is None:
            return None
        txn, self._txn = self._txn, None
        return self.pre_commit(txn)

    # -- driver --------------------------------------------------------------
    # ``handles`` stay ``Sequence[Any]`` in commit and abort: they are what the subclass's
    # pre_commit returned, so its override names their type. ``Sequence[object]`` would
    # forbid that narrowing (a parameter can only widen in an override), and a handle
    # type parameter would break the runtime ``TwoPhaseCommitSink[list]`` unless it had
    # a PEP 696 default, which needs typing_extensions, not a dependency of this package.

    @abstractmethod
    def commit(self, handles: Sequence[Any], completed: CompletedCheckpoint) -> None:
        """Publish every pre-committed handle of the checkpoint. Must be idempotent."""

    def abort(self, handles: Sequence[Any], batch_id: int) -> None:
        """Discard pre-committed handles of a checkpoint that will never complete."""

    def notify_checkpoint_complete(self, batch_id: int,  # noqa: ARG002 -- CheckpointedSink's signature
                                   completed: CompletedCheckpoint) -> None:
        self.commit(completed.handles, completed)

    def notify_checkpoint_aborted(self, batch_id: int, completed: CompletedCheckpoint | None = None) -> None:
        if completed is not None:
            self.abort(completed.handles, batch_id)
