"""Exactly-once barrier alignment, after Flink's ``CheckpointBarrierAligner``.

Contract (one instance per input, single-threaded; the caller buffers data of
blocked channels and replays it, in arrival order, when a call returns True):

1. One input channel: a barrier with a newer id triggers at once; nothing blocks.
2. The first barrier of checkpoint *n* starts an alignment and blocks its channel.
3. A newer id during an alignment declines *n* (``SUBSUMED``), releases, and
   starts aligning the new id.
4. An id older than, or equal to, the latest completed/declined id is ignored.
5. Barrier ids must strictly increase per channel; a repeat is a
   :class:`ProtocolError` carrying ``checkpoint_id`` and ``channel``. (Flink
   only detects repeats inside an alignment; a repeat is always a corrupt stream.)
6. When barriers received + closed channels == all channels: release, then
   trigger. The caller replays buffered data only after the trigger returned,
   so the snapshot never sees data that follows barrier *n*.
7. A cancel marker with a newer id, or the current id while aligning, declines
   (``CANCELLED``); later barriers of that id are ignored. Unlike Flink, a
   current alignment cut short by a *newer* cancel is also reported (as
   ``SUBSUMED``), so every started checkpoint ends in exactly one notification.
8. ``EndOfPartition`` closes the channel. A pending alignment is declined with
   ``INPUT_END_OF_STREAM``, as Flink does, rather than completed with one input
   fewer: the channel's data up to its end is not covered by barrier *n*, so a
   snapshot now could not be described by per-channel barrier positions.
   Alignments started later count closed channels as aligned.
9. :meth:`alignment_limit_exceeded` declines the alignment
   (``ALIGNMENT_LIMIT_EXCEEDED``) and releases everything; nothing is dropped.
10. :meth:`end_of_input` (the whole input ended, e.g. the task's data ran out
   before every channel sent ``EndOfPartition``) declines a pending alignment
   with ``INPUT_END_OF_STREAM`` -- the same notification as rule 8 -- and
   releases, as Flink's barrier buffer does on end of input.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

from .._exceptions import ProtocolError
from ._channels import ChannelHandler
from ._handler import AbortReason, CheckpointTarget
from .markers import CancelCheckpointMarker, CheckpointBarrier

__all__ = ["CheckpointBarrierAligner"]

log = logging.getLogger(__name__)


class CheckpointBarrierAligner(ChannelHandler):
    """Decides blocking, triggering and declining for exactly-once checkpoints."""

    def __init__(self, channels: Sequence[Hashable], target: CheckpointTarget) -> None:
        super().__init__(channels, "an aligner")
        self._closed = self._book.closed
        self._target = target
        self._blocked: set[Hashable] = set()
        self._current_id: int | None = None  # newest id started, triggered or declined

    # -- introspection -----------------------------------------------------

    @property
    def current_checkpoint_id(self) -> int | None:
        return self._current_id

    @property
    def aligning(self) -> bool:
        return bool(self._blocked)

    @property
    def closed_channels(self) -> frozenset[Hashable]:
        return frozenset(self._closed)

    def is_blocked(self, channel: Hashable) -> bool:
        return channel in self._blocked

    def __repr__(self) -> str:
        return (
            f"CheckpointBarrierAligner(current={self._current_id}, blocked={len(self._blocked)}, "
            f"closed={len(self._closed)}, channels={len(self._book.channels)})"
        )

    # -- protocol ----------------------------------------------------------

    def _aligning(self) -> int:
        """The checkpoint being aligned; only called while channels are blocked.

        An explicit error, not ``assert``: it must survive ``python -O``.
        """
        if self._current_id is None:
            raise ProtocolError("aligner state broken: channels blocked with no checkpoint "
                                "being aligned")
        return self._current_id

    def _newer(self, checkpoint_id: int) -> bool:
        return self._current_id is None or checkpoint_id > self._current_id

    def process_barrier(self, barrier: CheckpointBarrier, channel: Hashable) -> bool:
        cid = barrier.checkpoint_id
        self._book.record_barrier(channel, cid)

        if len(self._book.channels) == 1:
            if self._newer(cid):
                self._current_id = cid
                self._target.trigger_checkpoint(barrier)
            return False

        released = False
        if self._blocked:
            if cid == self._current_id:
                self._blocked.add(channel)
            elif self._newer(cid):
                log.warning(
                    "barrier %d arrived before checkpoint %s was aligned; declining it",
                    cid,
                    self._current_id,
                )
                declined = self._aligning()
                self._blocked.clear()
                released = True
                self._target.abort_checkpoint(declined, AbortReason.SUBSUMED)
                self._begin(cid, channel)
            else:
                return False
        elif self._newer(cid):
            self._begin(cid, channel)
        else:
            return False

        if len(self._blocked) + len(self._closed) == len(self._book.channels):
            log.debug("all barriers of checkpoint %d received; triggering", cid)
            self._blocked.clear()
            self._target.trigger_checkpoint(barrier)
            return True
        return released

    def _begin(self, checkpoint_id: int, channel: Hashable) -> None:
        log.debug("starting alignment of checkpoint %d on channel %r", checkpoint_id, channel)
        self._current_id = checkpoint_id
        self._blocked.add(channel)

    def process_cancel(self, marker: CancelCheckpointMarker, channel: Hashable) -> bool:
        cid = marker.checkpoint_id
        self._book.check_open(channel, f"cancel marker {cid}", cid)
        if len(self._book.channels) == 1:
            if self._newer(cid):
                self._current_id = cid
                self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
            return False
        if self._blocked:
            current = self._aligning()
            if cid == current:
                self._blocked.clear()
                self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
                return True
            if cid > current:
                log.warning("cancel of checkpoint %d arrived while aligning %d; declining both", cid, current)
                self._blocked.clear()
                self._current_id = cid
                self._target.abort_checkpoint(current, AbortReason.SUBSUMED)
                self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
                return True
            return False
        if self._newer(cid):
            # Nothing aligned yet: remember the id so its barriers are ignored.
            self._current_id = cid
            self._target.abort_checkpoint(cid, AbortReason.CANCELLED)
        return False

    def process_end_of_partition(self, channel: Hashable) -> bool:
        self._book.close(channel)
        if self._blocked:
            current = self._aligning()
            self._blocked.clear()
            self._target.abort_checkpoint(current, AbortReason.INPUT_END_OF_STREAM)
            return True
        return False

    def alignment_limit_exceeded(self, buffered_bytes: int) -> bool:
        if not self._blocked:
            return False
        current = self._aligning()
        log.warning(
            "alignment of checkpoint %d buffered %d bytes, over the limit; declining it",
            current,
            buffered_bytes,
        )
        self._blocked.clear()
        self._target.abort_checkpoint(current, AbortReason.ALIGNMENT_LIMIT_EXCEEDED)
        return True

    def end_of_input(self) -> bool:
        """Decline the pending alignment, if any, because no more input will arrive.

        The missing barriers can never come, so the checkpoint is declined with
        ``INPUT_END_OF_STREAM`` exactly as an ``EndOfPartition`` during alignment
        declines it. Channels stay open so the caller can replay what it buffered;
        a replayed barrier may start a new alignment, ended by calling this again.
        Returns True when channels were released; calling it with nothing pending
        is a no-op returning False.
        """
        if not self._blocked:
            return False
        current = self._aligning()
        log.info("input ended while aligning checkpoint %d; declining it", current)
        self._blocked.clear()
        self._target.abort_checkpoint(current, AbortReason.INPUT_END_OF_STREAM)
        return True
