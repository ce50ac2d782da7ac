"""Tiny DSL shared by the barrier tests: scripts of markers and a recording target."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from sparkbarrier.barrier import (
    AbortReason,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointBarrierAligner,
    CheckpointBarrierTracker,
    InitializationContext,
)

Event = tuple


@dataclass
class Recorder:
    """CheckpointTarget that logs ("trigger", id) / ("abort", id, reason)."""

    log: list[tuple] = field(default_factory=list)

    def trigger_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self.log.append(("trigger", barrier.checkpoint_id))

    def abort_checkpoint(self, checkpoint_id: int, reason: AbortReason) -> None:
        self.log.append(("abort", checkpoint_id, reason))


def feed(handler, events: Sequence[Event]) -> list[bool]:
    """Events: ("b", ch, id) barrier, ("c", ch, id) cancel, ("e", ch) end of partition."""
    released = []
    for ev in events:
        if ev[0] == "b":
            released.append(handler.process_barrier(CheckpointBarrier(ev[2], 1000 + ev[2]), ev[1]))
        elif ev[0] == "c":
            released.append(handler.process_cancel(CancelCheckpointMarker(ev[2]), ev[1]))
        elif ev[0] == "e":
            released.append(handler.process_end_of_partition(ev[1]))
        else:
            raise ValueError(ev)
    return released


def aligner(channels: Sequence[Hashable]) -> tuple[CheckpointBarrierAligner, Recorder]:
    rec = Recorder()
    return CheckpointBarrierAligner(channels, rec), rec


def tracker(channels: Sequence[Hashable], **kw) -> tuple[CheckpointBarrierTracker, Recorder]:
    rec = Recorder()
    return CheckpointBarrierTracker(channels, rec, **kw), rec


@dataclass
class RecordingFunction:
    """CheckpointedFunction that logs every callback, with data seen so far."""

    events: list[tuple] = field(default_factory=list)
    context: InitializationContext | None = None

    def initialize_state(self, context: InitializationContext) -> None:
        self.context = context

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.events.append(("snapshot", checkpoint_id))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.events.append(("complete", checkpoint_id))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.events.append(("aborted", checkpoint_id))
