"""What every barrier handler shares: abort reasons and the notification target.

A handler (the exactly-once :class:`~._aligner.CheckpointBarrierAligner` or the
at-least-once :class:`~._tracker.CheckpointBarrierTracker`) decides, marker by
marker, when a checkpoint is triggered or declined. It does not move data: it
says which channels are blocked and returns ``True`` from a ``process_*`` call
when blocked channels were released, so the caller replays what it buffered.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from .markers import CancelCheckpointMarker, CheckpointBarrier

__all__ = ["AbortReason", "BarrierHandler", "CheckpointTarget"]


class AbortReason(str, enum.Enum):
    """Why a checkpoint was declined (Flink's ``CheckpointFailureReason``)."""

    SUBSUMED = "subsumed"
    """A barrier of a newer checkpoint arrived before this one was aligned."""
    CANCELLED = "cancelled"
    """A ``CancelCheckpointMarker`` arrived for this (or a newer) checkpoint."""
    INPUT_END_OF_STREAM = "input_end_of_stream"
    """A channel ended, or the whole input did, while the checkpoint was pending."""
    ALIGNMENT_LIMIT_EXCEEDED = "alignment_limit_exceeded"
    """Buffered data during the alignment exceeded the byte limit."""


@runtime_checkable
class CheckpointTarget(Protocol):
    """Receives a handler's decisions, synchronously, in protocol order."""

    def trigger_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """All barriers of ``barrier.checkpoint_id`` arrived: snapshot now."""

    def abort_checkpoint(self, checkpoint_id: int, reason: AbortReason) -> None:
        """``checkpoint_id`` will not be triggered by this handler."""


class BarrierHandler(Protocol):
    """The contract shared by the aligner and the tracker."""

    @property
    def channels(self) -> tuple[Hashable, ...]: ...

    def add_channel(self, channel: Hashable) -> None:
        """Add a channel first seen mid-stream (no-op for a known one)."""

    def is_blocked(self, channel: Hashable) -> bool:
        """True while data of ``channel`` must be buffered, not processed."""

    def process_barrier(self, barrier: CheckpointBarrier, channel: Hashable) -> bool:
        """Handle a barrier read from ``channel``; True when blocks were released."""

    def process_cancel(self, marker: CancelCheckpointMarker, channel: Hashable) -> bool:
        """Handle a cancel marker read from ``channel``; True when blocks were released."""

    def process_end_of_partition(self, channel: Hashable) -> bool:
        """``channel`` ended; True when blocks were released."""

    def alignment_limit_exceeded(self, buffered_bytes: int) -> bool:
        """The caller buffered too much; abort the alignment and release."""

    def end_of_input(self) -> bool:
        """No more input will arrive on any channel: decline what is pending
        (``INPUT_END_OF_STREAM``) and release; True when blocks were released.

        Channels are not closed, so buffered elements can still be replayed
        through ``process_*``; a replayed barrier may start a new alignment, which
        the caller ends by calling this again (see ``InputProcessor.end_of_input``).
        """
