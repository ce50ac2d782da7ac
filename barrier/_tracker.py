"""At-least-once barrier tracking, after Flink's ``CheckpointBarrierTracker``.

Never blocks: data keeps flowing, so a snapshot may include records that follow
the barrier on some channels (they are replayed after a restore: at least once).

Contract:

* A checkpoint triggers once barriers from every open channel arrived; it is
  then removed together with every older pending checkpoint (subsumed), and
  the target is notified unless the checkpoint was aborted meanwhile.
* The first barrier of an id is tracked only if the id is newer than the latest
  tracked id; at most :data:`MAX_CHECKPOINTS_TO_TRACK` are tracked (the oldest
  is dropped with a warning).
* A cancel marker aborts every older pending checkpoint and its own id; each
  checkpoint is notified aborted at most once. Cancels are counted like
  barriers so the entry disappears once every channel reported.
* ``EndOfPartition`` aborts every pending checkpoint (``INPUT_END_OF_STREAM``),
  as Flink does; later checkpoints need barriers only from open channels.
* :meth:`~CheckpointBarrierTracker.end_of_input` aborts every pending
  checkpoint the same way: their missing barriers can never arrive.
* Barrier ids must strictly increase per channel (:class:`ProtocolError`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ._channels import ChannelHandler
from ._handler import AbortReason, CheckpointTarget
from .markers import CancelCheckpointMarker, CheckpointBarrier

__all__ = ["MAX_CHECKPOINTS_TO_TRACK", "CheckpointBarrierTracker"]

log = logging.getLogger(__name__)

MAX_CHECKPOINTS_TO_TRACK = 50


@dataclass
class _Count:
    checkpoint_id: int
    count: int = 1
    aborted: bool = False

    def mark_aborted(self) -> bool:
        """True the first time only, so each checkpoint is notified once."""
        first = not self.aborted
        self.aborted = True
        return first


class CheckpointBarrierTracker(ChannelHandler):
    """Counts barriers per checkpoint without ever blocking a channel."""

    def __init__(
        self,
        channels: Sequence[Hashable],
        target: CheckpointTarget,
        *,
        max_tracked: int = MAX_CHECKPOINTS_TO_TRACK,
    ) -> None:
        super().__init__(channels, "a tracker")
        self._closed = self._book.closed
        self._target = target
        self._max_tracked = max_tracked
        self._pending: deque[_Count] = deque()
        self._latest_pending: int | None = None

    @property
    def pending_ids(self) -> tuple[int, ...]:
        return tuple(c.checkpoint_id for c in self._pending)

    def is_blocked(self, channel: Hashable) -> bool:  # noqa: ARG002 -- BarrierHandler's signature
        return False

    def _open_count(self) -> int:
        return self._book.open_count

    def process_barrier(self, barrier: CheckpointBarrier, channel: Hashable) -> bool:
        cid = barrier.checkpoint_id
        self._book.record_barrier(channel, cid)

        if len(self._book.channels) == 1:
            self._target.trigger_checkpoint(barrier)
            return False

        for pos, entry in enumerate(self._pending):
            if entry.checkpoint_id == cid:
                entry.count += 1
                self._maybe_complete(pos, entry, barrier)
                return False

        if self._latest_pending is None or cid > self._latest_pending:
            self._latest_pending = cid
            entry = _Count(cid)
            self._pending.append(entry)
            if len(self._pending) > self._max_tracked:
                dropped = self._pending.popleft()
                log.warning(
                    "tracking more than %d checkpoints; forgetting checkpoint %d",
                    self._max_tracked,
                    dropped.checkpoint_id,
                )
            self._maybe_complete(len(self._pending) - 1, entry, barrier)
        return False

    def _maybe_complete(self, pos: int, entry: _Count, barrier: CheckpointBarrier) -> None:
        if entry.count < self._open_count():
            return
        for _ in range(pos + 1):
            self._pending.popleft()
        if not entry.aborted:
            log.debug("all barriers of checkpoint %d received", entry.checkpoint_id)
            self._target.trigger_checkpoint(barrier)

    def process_cancel(self, marker: CancelCheckpointMarker, channel: Hashable) -> bool:
        cid = marker.checkpoint_id
        self._book.check_open(channel, f"cancel marker {cid}", cid)
        if len(self._book.channels) == 1:
            self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
            return False

        while self._pending and self._pending[0].checkpoint_id < cid:
            older = self._pending.popleft()
            if older.mark_aborted():
                self._target.abort_checkpoint(older.checkpoint_id, AbortReason.CANCELLED)

        head = self._pending[0] if self._pending else None
        if head is not None and head.checkpoint_id == cid:
            if head.mark_aborted():
                self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
            head.count += 1
            if head.count >= self._open_count():
                self._pending.popleft()
        elif self._latest_pending is None or cid > self._latest_pending:
            self._latest_pending = cid
            self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
            entry = _Count(cid, aborted=True)
            if entry.count < self._open_count():
                self._pending.appendleft(entry)
        return False

    def process_end_of_partition(self, channel: Hashable) -> bool:
        self._book.close(channel)
        self._abort_pending()
        return False

    def end_of_input(self) -> bool:
        """No more input will arrive: abort every pending checkpoint.

        Same notification as an ``EndOfPartition`` (``INPUT_END_OF_STREAM``), each
        checkpoint at most once. Nothing is buffered, so nothing is released:
        always returns False. Idempotent.
        """
        self._abort_pending()
        return False

    def _abort_pending(self) -> None:
        while self._pending:
            entry = self._pending.popleft()
            if entry.mark_aborted():
                self._target.abort_checkpoint(entry.checkpoint_id, AbortReason.INPUT_END_OF_STREAM)

    def alignment_limit_exceeded(self, buffered_bytes: int) -> bool:  # noqa: ARG002 -- BarrierHandler's
        return False  # nothing is ever buffered
