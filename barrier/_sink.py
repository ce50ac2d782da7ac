"""What a checkpointed *sink* implements, and a two-phase-commit base class for the common case.

After Flink's ``CheckpointedFunction`` + ``CheckpointListener`` as used by sinks, and its
``TwoPhaseCommitSinkFunction``: buffer or stage writes, *pre-commit* them when the
checkpoint's barrier arrives (``snapshot_state``), *commit* once the checkpoint is
complete everywhere (``notify_checkpoint_complete``), *abort* when it never will.

The protocol is engine-neutral; ``sparkbarrier.connectors.checkpointed`` runs it in
Spark, where a micro-batch is the checkpoint: the checkpoint id a sink sees is the Spark
batch id, on the executors (``snapshot_state``) and on the driver (the notifications).

Call order in Spark (who calls, where):

1. executor, once per write task: ``initialize_state(context)`` with the batch,
   partition, attempt and the sink's options;
2. executor: ``invoke(batch)`` for every Arrow batch of data rows (marker columns
   stripped), in input order per channel;
3. executor: ``snapshot_state(checkpoint_id)`` when the barriers of every channel the
   task reads have arrived (exactly-once alignment) and once more at the end of the
   task if data arrived after the last one; each returns a picklable *handle* of what
   it pre-committed, which travels to the driver in the task's commit message. A
   function with an ``end_of_input()`` method hears when the task's input is done
   (Flink's ``endInput``), and then always gets one last ``snapshot_state``;
4. driver: ``notify_checkpoint_complete(checkpoint_id, completed)`` when Spark commits
   the batch, with every task's handles; ``notify_checkpoint_aborted(checkpoint_id,
   completed)`` when Spark aborts it (executors also get it, without handles, when an
   alignment is declined).

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
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import pyarrow as pa

__all__ = ["SinkContext", "CompletedCheckpoint", "CheckpointedSink", "TwoPhaseCommitSink", "merge_offsets"]

Txn = TypeVar("Txn")


@dataclass(frozen=True)
class SinkContext:
    """Given to :meth:`CheckpointedSink.initialize_state` once per write task."""

    sink_name: str
    query_id: str
    checkpoint_id: int
    partition_id: int
    attempt: int
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompletedCheckpoint:
    """What the driver learns about a completed (or aborted) checkpoint.

    ``handles`` are the values ``snapshot_state`` returned on every task of the batch
    that reported (partition order; ``None`` results left out). ``source_offsets`` is
    the next offset per source channel (``"topic:partition"``) from the barriers the
    batch carried, merged over tasks; empty when the input has no barrier markers.
    """

    checkpoint_id: int
    query_id: str
    handles: tuple[Any, ...] = ()
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


@runtime_checkable
class CheckpointedSink(Protocol):
    """A sink that takes part in checkpoints (see the module docstring for the call order)."""

    def initialize_state(self, context: SinkContext) -> None:
        """Executor, once per task, before any data."""

    def invoke(self, batch: pa.RecordBatch) -> None:
        """Executor: consume one Arrow batch of data rows."""

    def snapshot_state(self, checkpoint_id: int) -> Any:
        """Executor: pre-commit everything invoked so far; return a picklable handle (or None)."""

    # Optional: ``end_of_input(self) -> None`` (executor), see step 3 above.

    def notify_checkpoint_complete(self, checkpoint_id: int, completed: CompletedCheckpoint) -> None:
        """Driver: the checkpoint is complete; publish its handles. Idempotent."""

    def notify_checkpoint_aborted(self, checkpoint_id: int, completed: CompletedCheckpoint | None = None) -> None:
        """Driver (Spark abort, with handles) or executor (declined alignment, none): discard."""


class TwoPhaseCommitSink(ABC, Generic[Txn]):
    """Flink's ``TwoPhaseCommitSinkFunction`` for Spark: one transaction per snapshot.

    Subclasses implement :meth:`begin_transaction`, :meth:`write`, :meth:`pre_commit`
    (executor) and :meth:`commit` / :meth:`abort` (driver). A transaction starts lazily
    with the first data after a snapshot, so an empty task pre-commits nothing.
    ``self.context`` holds the task's :class:`SinkContext` on executors.
    """

    context: SinkContext | None = None
    _txn: Any = None

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
    def pre_commit(self, txn: Txn) -> Any:
        """Make ``txn`` durable but invisible (e.g. ``PREPARE TRANSACTION``); return its handle."""

    def invoke(self, batch: pa.RecordBatch) -> None:
        if self._txn is None:
            self._txn = self.begin_transaction()
        self.write(self._txn, batch)

    def snapshot_state(self, checkpoint_id: int) -> Any:
        if self._txn is None:
            return None
        txn, self._txn = self._txn, None
        return self.pre_commit(txn)

    # -- driver --------------------------------------------------------------

    @abstractmethod
    def commit(self, handles: Sequence[Any], completed: CompletedCheckpoint) -> None:
        """Publish every pre-committed handle of the checkpoint. Must be idempotent."""

    def abort(self, handles: Sequence[Any], checkpoint_id: int) -> None:
        """Discard pre-committed handles of a checkpoint that will never complete."""

    def notify_checkpoint_complete(self, checkpoint_id: int, completed: CompletedCheckpoint) -> None:
        self.commit(completed.handles, completed)

    def notify_checkpoint_aborted(self, checkpoint_id: int, completed: CompletedCheckpoint | None = None) -> None:
        if completed is not None:
            self.abort(completed.handles, checkpoint_id)
