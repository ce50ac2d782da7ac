"""Feeds data and markers from N channels through a barrier handler.

The processor owns the buffers: data (and markers) read from a blocked channel
are queued, byte-counted via ``nbytes``, and replayed in arrival order as soon
as the handler releases the channel -- before anything read later. Replayed
markers go through the handler again, exactly as if they arrived now.

A connector typically feeds whole Arrow batches per channel with marker rows
inside (:meth:`InputProcessor.process_batch`); they are split at marker
positions with zero-copy slices.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence

import pyarrow as pa

from .._exceptions import ProtocolError
from ._aligner import CheckpointBarrierAligner
from ._functions import CheckpointedFunction, InitializationContext
from ._handler import AbortReason, BarrierHandler
from ._tracker import CheckpointBarrierTracker
from .markers import CancelCheckpointMarker, CheckpointBarrier, EndOfPartition, Marker, split_markers

__all__ = ["CheckpointingMode", "InputProcessor", "Downstream"]

log = logging.getLogger(__name__)

Downstream = Callable[[Hashable, pa.RecordBatch], None]
"""Receives ``(channel, data batch)`` in processing order."""

Element = pa.RecordBatch | CheckpointBarrier | CancelCheckpointMarker | EndOfPartition


class CheckpointingMode(str, enum.Enum):
    EXACTLY_ONCE = "exactly_once"
    """Align barriers: block channels that delivered barrier *n* until all did."""
    AT_LEAST_ONCE = "at_least_once"
    """Track barriers without blocking."""


class InputProcessor:
    """Runs the checkpoint protocol for one operator with ``channels`` inputs.

    Calls ``function.initialize_state`` on construction, ``snapshot_state``
    exactly when a checkpoint is aligned (before any data that follows the
    barrier is delivered), ``notify_checkpoint_aborted`` when the handler
    declines one, and delivers data to ``downstream``. Single-threaded: call
    from one thread; callbacks run on it synchronously.

    ``max_buffered_bytes`` (exactly-once only) caps data buffered during one
    alignment; past it the checkpoint is declined and everything is released in
    order. None means no limit.
    """

    def __init__(
        self,
        channels: Sequence[Hashable],
        function: CheckpointedFunction,
        downstream: Downstream,
        *,
        mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE,
        max_buffered_bytes: int | None = None,
        context: InitializationContext | None = None,
    ) -> None:
        if max_buffered_bytes is not None and max_buffered_bytes < 0:
            raise ProtocolError(f"max_buffered_bytes must be >= 0, got {max_buffered_bytes}")
        self._function = function
        self._downstream = downstream
        self._mode = CheckpointingMode(mode)
        self._handler: BarrierHandler
        if self._mode is CheckpointingMode.EXACTLY_ONCE:
            self._handler = CheckpointBarrierAligner(channels, self)
        else:
            self._handler = CheckpointBarrierTracker(channels, self)
        self._max_buffered = max_buffered_bytes
        self._queue: deque[tuple[Hashable, Element]] = deque()  # read, not yet handled
        self._buffer: deque[tuple[Hashable, Element]] = deque()  # held for blocked channels
        self._buffered_bytes = 0
        self._draining = False
        self._last_triggered: int | None = None
        self._aborted: deque[tuple[int, AbortReason]] = deque(maxlen=100)  # diagnostics only
        function.initialize_state(context or InitializationContext())

    # -- CheckpointTarget ----------------------------------------------------

    def trigger_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self._last_triggered = barrier.checkpoint_id
        self._function.snapshot_state(barrier.checkpoint_id)

    def abort_checkpoint(self, checkpoint_id: int, reason: AbortReason) -> None:
        log.info("checkpoint %d declined: %s", checkpoint_id, reason.value)
        self._aborted.append((checkpoint_id, reason))
        self._function.notify_checkpoint_aborted(checkpoint_id)

    # -- input ----------------------------------------------------------------

    @property
    def handler(self) -> BarrierHandler:
        return self._handler

    @property
    def last_triggered(self) -> int | None:
        """Id of the newest checkpoint snapshotted, or None."""
        return self._last_triggered

    @property
    def recent_aborts(self) -> tuple[tuple[int, AbortReason], ...]:
        """The last (up to 100) declined checkpoints with their reasons."""
        return tuple(self._aborted)

    @property
    def buffered_bytes(self) -> int:
        return self._buffered_bytes

    def process(self, channel: Hashable, element: pa.RecordBatch | Marker) -> None:
        """Feed one data batch (no marker columns) or one marker read from ``channel``."""
        self._queue.append((channel, element))
        self._drain()

    def process_batch(self, channel: Hashable, batch: pa.RecordBatch) -> None:
        """Feed an Arrow batch that may carry marker rows (see :mod:`.markers`)."""
        self._queue.extend((channel, part) for part in split_markers(batch))
        self._drain()

    def process_all(self, elements: Iterable[tuple[Hashable, pa.RecordBatch | Marker]]) -> None:
        self._queue.extend(elements)
        self._drain()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Forward the coordinator's "checkpoint is durable" to the function."""
        self._function.notify_checkpoint_complete(checkpoint_id)

    def _drain(self) -> None:
        if self._draining:  # re-entered from a callback: the outer loop picks it up
            return
        self._draining = True
        try:
            while self._queue:
                channel, element = self._queue.popleft()
                self._handle(channel, element)
        finally:
            self._draining = False

    def _handle(self, channel: Hashable, element: Element) -> None:
        handler = self._handler
        if handler.is_blocked(channel):
            self._buffer.append((channel, element))
            if isinstance(element, pa.RecordBatch):
                self._buffered_bytes += element.nbytes
                if self._max_buffered is not None and self._buffered_bytes > self._max_buffered:
                    if handler.alignment_limit_exceeded(self._buffered_bytes):
                        self._release()
            return
        if isinstance(element, pa.RecordBatch):
            self._downstream(channel, element)
        elif isinstance(element, CheckpointBarrier):
            if handler.process_barrier(element, channel):
                self._release()
        elif isinstance(element, CancelCheckpointMarker):
            if handler.process_cancel(element, channel):
                self._release()
        elif isinstance(element, EndOfPartition):
            if handler.process_end_of_partition(channel):
                self._release()
        else:
            raise ProtocolError(f"cannot process {type(element).__name__} from channel {channel!r}", channel=channel)

    def _release(self) -> None:
        """Put buffered elements back in front of unread input, in arrival order."""
        if self._buffer:
            self._queue.extendleft(reversed(self._buffer))
            self._buffer.clear()
        self._buffered_bytes = 0
