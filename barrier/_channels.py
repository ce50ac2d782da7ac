"""Per-channel bookkeeping shared by the aligner and the tracker.

Both handlers must reject the same corrupt streams the same way: a marker from an
unknown channel, anything after a channel's ``EndOfPartition``, and a barrier id
that does not strictly increase on its channel. They also show their channels to the
input processor the same way (:class:`ChannelHandler`), so the ``channels`` /
``add_channel`` half of :class:`~._handler.BarrierHandler` is written once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from .._exceptions import ProtocolError

__all__ = ["ChannelBook", "ChannelHandler"]


class ChannelBook:
    """Which channels exist, which are closed, and the last barrier id of each."""

    def __init__(self, channels: Sequence[Hashable], role: str) -> None:
        if not channels:
            raise ProtocolError(f"{role} needs at least one input channel")
        if len(set(channels)) != len(channels):
            raise ProtocolError(f"duplicate channel names in {list(channels)}")
        self.channels = tuple(channels)
        self._known = frozenset(channels)
        self.closed: set[Hashable] = set()
        self._last_barrier: dict[Hashable, int] = {}

    def add(self, channel: Hashable) -> bool:
        """Add ``channel`` if it is new (a channel first seen mid-stream); True when added."""
        if channel in self._known:
            return False
        self.channels = (*self.channels, channel)
        self._known = self._known | {channel}
        return True

    @property
    def open_count(self) -> int:
        return len(self.channels) - len(self.closed)

    def check_open(self, channel: Hashable, what: str, checkpoint_id: int | None) -> None:
        if channel not in self._known:
            raise ProtocolError(
                f"{what} from unknown channel {channel!r}", checkpoint_id=checkpoint_id, channel=channel
            )
        if channel in self.closed:
            raise ProtocolError(
                f"{what} on channel {channel!r} after its EndOfPartition",
                checkpoint_id=checkpoint_id,
                channel=channel,
            )

    def record_barrier(self, channel: Hashable, checkpoint_id: int) -> None:
        """Accept barrier ``checkpoint_id`` on an open channel, or raise: ids strictly increase."""
        self.check_open(channel, f"barrier {checkpoint_id}", checkpoint_id)
        last = self._last_barrier.get(channel)
        if last is not None and checkpoint_id <= last:
            raise ProtocolError(
                f"stream corrupt: barrier {checkpoint_id} on channel {channel!r} after barrier {last} "
                "(barrier ids must strictly increase per channel)",
                checkpoint_id=checkpoint_id,
                channel=channel,
            )
        self._last_barrier[channel] = checkpoint_id

    def close(self, channel: Hashable) -> None:
        self.check_open(channel, "EndOfPartition", None)
        self.closed.add(channel)


class ChannelHandler:
    """The channel half of a barrier handler, over one :class:`ChannelBook`.

    Base of the aligner and the tracker: what a channel is, and what adding one means,
    does not depend on the delivery guarantee.
    """

    def __init__(self, channels: Sequence[Hashable], role: str) -> None:
        self._book = ChannelBook(channels, role)

    @property
    def channels(self) -> tuple[Hashable, ...]:
        return self._book.channels

    def add_channel(self, channel: Hashable) -> None:
        """Add an input channel first seen mid-stream (no-op for a known one).

        A checkpoint pending when the channel is added has not received its barrier
        from that channel, so it now also waits for it (the aligner's alignment and the
        tracker's count both compare against every open channel).
        """
        self._book.add(channel)
