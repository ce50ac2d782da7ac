"""Feeds data and markers from N channels through a barrier handler.

The processor owns the buffers: one backlog per channel. Data (and markers)
read from a blocked channel are queued there, byte-counted via ``nbytes``, and
replayed in arrival order as soon as the handler releases the channel --
before anything read later from that channel. Replayed markers go through the
handler again, exactly as if they arrived now; a replayed barrier that blocks
the channel again simply leaves the rest of the backlog where it is, so a
burst of barriers costs linear, not quadratic, work. Order is kept per
channel; across channels replay goes channel by channel.

A connector typically feeds whole Arrow batches per channel with marker rows
inside (:meth:`InputProcessor.process_batch`); they are split at marker
positions with zero-copy slices.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from .._exceptions import ProtocolError
from ._aligner import CheckpointBarrierAligner
from ._channels import ChannelBook
from ._functions import CheckpointedFunction, InitializationContext
from ._guarantee import DeliveryGuarantee
from ._handler import AbortReason, BarrierHandler
from ._tracker import CheckpointBarrierTracker
from .markers import CancelCheckpointMarker, CheckpointBarrier, EndOfPartition, Marker, split_markers

if TYPE_CHECKING:  # pyarrow loads with the first processor (see markers: lookups import this package)
    import pyarrow as pa

__all__ = ["Downstream", "InputProcessor"]

log = logging.getLogger(__name__)

Downstream: TypeAlias = "Callable[[Hashable, pa.RecordBatch], None]"
"""Receives ``(channel, data batch)`` in processing order."""

Element: TypeAlias = "pa.RecordBatch | CheckpointBarrier | CancelCheckpointMarker | EndOfPartition"


class InputProcessor:
    """Runs the checkpoint protocol for one operator with ``channels`` inputs.

    Calls ``function.initialize_state`` on construction, ``snapshot_state``
    exactly when a checkpoint is aligned (before any data that follows the
    barrier is delivered), ``notify_checkpoint_aborted`` when the handler
    declines one, and delivers data to ``downstream``. Single-threaded: call
    from one thread; callbacks run on it synchronously and must not feed the
    processor themselves.

    Anything fed from an unknown channel, or from a channel after its
    ``EndOfPartition``, is a :class:`ProtocolError` naming the channel -- data
    as well as markers, since such data would be delivered outside every
    snapshot.

    When the input ends, call :meth:`end_of_input`: it declines a pending
    alignment and delivers what was buffered behind it, which would otherwise
    wait for ``EndOfPartition`` from every channel.

    ``max_buffered_bytes`` (exactly-once only) caps the data held in backlogs
    during an alignment; past it the checkpoint is declined and everything is
    released in order. None means no limit.
    """

    def __init__(
        self,
        channels: Sequence[Hashable],
        function: CheckpointedFunction,
        downstream: Downstream,
        *,
        guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE,
        max_buffered_bytes: int | None = None,
        context: InitializationContext | None = None,
    ) -> None:
        if max_buffered_bytes is not None and max_buffered_bytes < 0:
            raise ProtocolError(f"max_buffered_bytes must be >= 0, got {max_buffered_bytes}")
        import pyarrow as pa

        self._batch_type = pa.RecordBatch
        self._function = function
        self._downstream = downstream
        self._guarantee = DeliveryGuarantee(guarantee)
        self._handler: BarrierHandler
        if self._guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            self._handler = CheckpointBarrierAligner(channels, self)
        else:
            self._handler = CheckpointBarrierTracker(channels, self)
        # Arrival-time view of the channels. The handler's own book sees a marker
        # only when it is processed, which for a blocked channel is after replay,
        # and never sees data at all; this one refuses a corrupt element the moment
        # it is fed, before it can reach a backlog or ``downstream``.
        self._arrivals = ChannelBook(channels, "an input processor")
        self._max_buffered = max_buffered_bytes
        self._backlogs: dict[Hashable, deque[Element]] = {}  # only non-empty ones
        self._buffered_bytes = 0
        self._released = False
        self._input_ended = False
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

    # -- introspection ---------------------------------------------------------

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
        """Bytes of data waiting in backlogs (of blocked channels)."""
        return self._buffered_bytes

    # -- input ----------------------------------------------------------------

    def add_channel(self, channel: Hashable) -> None:
        """Declare an input channel first seen mid-stream (no-op for a known one).

        For inputs whose channels are only discovered as they arrive (a Spark task reads
        its partitions one after another). A checkpoint being aligned waits for the new
        channel's barrier too.
        """
        self._arrivals.add(channel)
        self._handler.add_channel(channel)

    def process(self, channel: Hashable, element: pa.RecordBatch | Marker) -> None:
        """Feed one data batch (no marker columns) or one marker read from ``channel``."""
        self._feed(channel, (element,))

    def process_batch(self, channel: Hashable, batch: pa.RecordBatch) -> None:
        """Feed an Arrow batch that may carry marker rows (see :mod:`.markers`)."""
        self._feed(channel, split_markers(batch))

    def process_all(self, elements: Iterable[tuple[Hashable, pa.RecordBatch | Marker]]) -> None:
        """Feed ``(channel, element)`` pairs in order."""
        for channel, element in elements:
            self._feed(channel, (element,))

    @property
    def input_ended(self) -> bool:
        """True once :meth:`end_of_input` was called."""
        return self._input_ended

    def end_of_input(self) -> None:
        """The input has ended: settle the pending checkpoint and deliver every buffered record.

        Who and when: the owner of the processor (e.g. the task that reads the
        channels) calls it once it knows no channel will deliver anything more --
        typically when its input iterator is exhausted -- whether or not every
        channel sent ``EndOfPartition``. Without it, records buffered behind a
        barrier whose alignment can no longer complete would never be delivered.

        What it does, as Flink's barrier buffer does on end of input: a pending
        alignment is declined (``notify_checkpoint_aborted`` with reason
        ``INPUT_END_OF_STREAM``, the same notification an ``EndOfPartition``
        during alignment gives), then each channel's backlog is replayed
        downstream in arrival order, channel by channel. Markers in a backlog are
        replayed through the handler as usual; a replayed barrier that starts a
        new alignment is declined the same way, so when this returns nothing is
        buffered and no checkpoint is left pending (exactly-once mode; in
        at-least-once mode every tracked checkpoint is aborted likewise). A
        checkpoint whose barriers all arrived was already snapshotted before and
        stays so; ``notify_checkpoint_complete`` may still be called afterwards.

        Afterwards every ``process*`` call is a :class:`ProtocolError`: input
        after the end would fall outside every snapshot. Idempotent: a second
        call does nothing. Like every other call, not to be made from a callback.
        """
        if self._input_ended:
            return
        self._input_ended = True
        while True:
            self._handler.end_of_input()
            if not self._backlogs:
                return
            stuck = [ch for ch in self._backlogs if self._handler.is_blocked(ch)]
            if stuck:  # a handler that does not release would loop forever here
                raise ProtocolError(
                    f"handler kept channels {stuck!r} blocked at end of input", channel=stuck[0]
                )
            self._drain()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Forward the coordinator's "checkpoint is durable" to the function."""
        self._function.notify_checkpoint_complete(checkpoint_id)

    def _feed(self, channel: Hashable, elements: Iterable[Element]) -> None:
        for element in elements:
            self._admit(channel, element)
            backlog = self._backlogs.get(channel)
            if backlog is not None or self._handler.is_blocked(channel):
                self._enqueue(channel, element)
                if self._over_limit():
                    self._drain()
            else:
                self._handle(channel, element)
                if self._released:
                    self._drain()

    def _admit(self, channel: Hashable, element: Element) -> None:
        """Refuse anything from an unknown channel or after the channel's EndOfPartition.

        Data there would be delivered outside every snapshot (no barrier can
        follow it), so it is a corrupt stream exactly like a marker in the same
        place: a :class:`ProtocolError` carrying ``channel`` (and the marker's
        ``checkpoint_id``). Checked on arrival, so an element queued behind a
        buffered EndOfPartition is refused too, by the call that fed it. After
        :meth:`end_of_input` every element is refused the same way.
        """
        if self._input_ended:
            raise ProtocolError(
                f"{type(element).__name__} on channel {channel!r} after end_of_input()",
                checkpoint_id=getattr(element, "checkpoint_id", None),
                channel=channel,
            )
        if isinstance(element, self._batch_type):
            self._arrivals.check_open(channel, f"data ({element.num_rows} rows)", None)
        elif isinstance(element, CheckpointBarrier):
            self._arrivals.check_open(channel, f"barrier {element.checkpoint_id}", element.checkpoint_id)
        elif isinstance(element, CancelCheckpointMarker):
            self._arrivals.check_open(channel, f"cancel marker {element.checkpoint_id}", element.checkpoint_id)
        elif isinstance(element, EndOfPartition):
            self._arrivals.close(channel)
        # anything else is refused by _handle with "cannot process"

    def _enqueue(self, channel: Hashable, element: Element) -> None:
        backlog = self._backlogs.get(channel)
        if backlog is None:
            backlog = self._backlogs[channel] = deque()
        backlog.append(element)
        if isinstance(element, self._batch_type):
            self._buffered_bytes += element.nbytes

    def _over_limit(self) -> bool:
        """Decline the alignment if backlogs exceed the limit; True if released."""
        if self._max_buffered is None or self._buffered_bytes <= self._max_buffered:
            return False
        return self._handler.alignment_limit_exceeded(self._buffered_bytes)

    def _drain(self) -> None:
        """Replay backlogs of unblocked channels until all are empty or blocked."""
        while True:
            self._released = False
            for channel in list(self._backlogs):
                backlog = self._backlogs[channel]
                while backlog and not self._handler.is_blocked(channel):
                    element = backlog.popleft()
                    if isinstance(element, self._batch_type):
                        self._buffered_bytes -= element.nbytes
                    self._handle(channel, element)
                if not backlog:
                    del self._backlogs[channel]
            # A new alignment may start with a backlog already over the limit.
            if not self._released and not self._over_limit():
                return

    def _handle(self, channel: Hashable, element: Element) -> None:
        handler = self._handler
        if isinstance(element, self._batch_type):
            self._downstream(channel, element)
        elif isinstance(element, CheckpointBarrier):
            self._released |= handler.process_barrier(element, channel)
        elif isinstance(element, CancelCheckpointMarker):
            self._released |= handler.process_cancel(element, channel)
        elif isinstance(element, EndOfPartition):
            self._released |= handler.process_end_of_partition(channel)
        else:
            raise ProtocolError(f"cannot process {type(element).__name__} from channel {channel!r}", channel=channel)
