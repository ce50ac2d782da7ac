"""What an operator implements to take part in checkpoints, in one process.

After Flink's ``CheckpointedFunction`` and ``CheckpointListener``. The
:class:`~._processor.InputProcessor` calls these synchronously, from the thread
that feeds it, never concurrently with data delivery.

Which id: every ``checkpoint_id`` here is the id the barriers carry, the *source
checkpoint id* (``barrier-kafka``'s ``checkpointId``, its planning counter; see
docs/ids.md), never Spark's micro-batch id. A sink in Spark implements
:class:`~._sink.CheckpointedSink` instead, whose methods take the batch id as
``batch_id``; the adapter that runs one as a :class:`CheckpointedFunction`
(``connectors/checkpointed/_task.py``) is the one place the two ids meet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["CheckpointListener", "CheckpointedFunction", "InitializationContext"]


@dataclass(frozen=True)
class InitializationContext:
    """Passed to :meth:`CheckpointedFunction.initialize_state` once, before any data.

    ``restored_checkpoint_id`` is the source checkpoint id the state comes from, or
    None on a fresh start.
    """

    restored_checkpoint_id: int | None = None

    @property
    def is_restored(self) -> bool:
        return self.restored_checkpoint_id is not None


@runtime_checkable
class CheckpointListener(Protocol):
    """Learns the fate of checkpoints it snapshotted; ids are source checkpoint ids."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Source checkpoint ``checkpoint_id`` is durable everywhere: publish its effects.

        Implies every older checkpoint is complete too (they may never be
        notified individually). May arrive late or not at all (e.g. on a crash);
        must be idempotent.
        """

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Source checkpoint ``checkpoint_id`` will never complete: drop what it staged."""


@runtime_checkable
class CheckpointedFunction(CheckpointListener, Protocol):
    """Operator state that is snapshotted at barriers (one process: the InputProcessor's).

    The single-process, Flink-style operator interface: snapshot and notifications in one
    place, keyed by the *source checkpoint id* the barriers carry. Sinks in Spark
    implement :class:`~sparkbarrier.barrier.CheckpointedSink` instead: its snapshot
    returns a handle for the driver, its notifications run there, and all of them take
    Spark's ``batch_id`` (for a sink the micro-batch is the checkpoint). The
    checkpointed-sink adapter presents each write task's sink to the InputProcessor as a
    ``CheckpointedFunction`` (``connectors/checkpointed/_task.py``): a snapshot at source
    checkpoint ``checkpoint_id`` becomes the sink's snapshot for its task's ``batch_id``,
    and the source checkpoint id travels on, named ``source_checkpoints``.
    """

    def initialize_state(self, context: InitializationContext) -> None:
        """Restore (or create) state. Called once, before any data or barrier."""

    def snapshot_state(self, checkpoint_id: int) -> None:
        """Record state as of the barrier of source checkpoint ``checkpoint_id``.

        Under exactly-once it has seen exactly the data before the barrier on
        every channel; under at-least-once possibly more.
        """
