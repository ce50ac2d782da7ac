"""What user code implements to take part in checkpoints.

After Flink's ``CheckpointedFunction`` and ``CheckpointListener``. The
:class:`~._processor.InputProcessor` calls these synchronously, from the thread
that feeds it, never concurrently with data delivery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["InitializationContext", "CheckpointListener", "CheckpointedFunction"]


@dataclass(frozen=True)
class InitializationContext:
    """Passed to :meth:`CheckpointedFunction.initialize_state` once, before any data.

    ``restored_checkpoint_id`` is the checkpoint the state comes from, or None
    on a fresh start.
    """

    restored_checkpoint_id: int | None = None

    @property
    def is_restored(self) -> bool:
        return self.restored_checkpoint_id is not None


@runtime_checkable
class CheckpointListener(Protocol):
    """Learns the fate of checkpoints it snapshotted."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable everywhere: publish its effects.

        Implies every older checkpoint is complete too (they may never be
        notified individually). May arrive late or not at all (e.g. on a crash);
        must be idempotent.
        """

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` will never complete: drop what it staged."""


@runtime_checkable
class CheckpointedFunction(CheckpointListener, Protocol):
    """Operator state that is snapshotted at barriers (one process: the InputProcessor's).

    Sinks in Spark implement :class:`~sparkbarrier.barrier.CheckpointedSink` instead:
    its snapshot returns a handle for the driver and its notifications run there. The
    checkpointed-sink adapter presents each write task's sink to the InputProcessor as
    a ``CheckpointedFunction``.
    """

    def initialize_state(self, context: InitializationContext) -> None:
        """Restore (or create) state. Called once, before any data or barrier."""

    def snapshot_state(self, checkpoint_id: int) -> None:
        """Record state as of the barrier of ``checkpoint_id``.

        Under exactly-once it has seen exactly the data before the barrier on
        every channel; under at-least-once possibly more.
        """
