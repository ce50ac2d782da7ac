"""The source offset: what Spark's offset log persists for every micro-batch.

JSON form (version 1)::

    {"version": 1, "checkpointId": 7, "timestampMs": 1700000000123,
     "offsets": {"orders": {"0": 42, "1": 17}}}

``offsets`` holds the *next* offset to read per topic-partition (Spark's layout).
``checkpointId`` increases by one only when the range advances; ``timestampMs`` is
fixed when the batch is planned and strictly increases. Because Spark persists
this dict, a replayed batch carries the same id and timestamp -- they are never
recomputed. Unknown versions are rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._exceptions import ProtocolError
from ._positions import TopicPartition

__all__ = ["OFFSET_VERSION", "SourceOffset"]

OFFSET_VERSION = 1


@dataclass(frozen=True)
class SourceOffset:
    """Next offsets per partition, stamped with the checkpoint that ends there."""

    checkpoint_id: int
    timestamp_ms: int
    offsets: Mapping[TopicPartition, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", dict(sorted(self.offsets.items())))

    def to_json(self) -> dict[str, Any]:
        nested: dict[str, dict[str, int]] = {}
        for tp, off in self.offsets.items():
            nested.setdefault(tp.topic, {})[str(tp.partition)] = off
        return {
            "version": OFFSET_VERSION,
            "checkpointId": self.checkpoint_id,
            "timestampMs": self.timestamp_ms,
            "offsets": nested,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceOffset:
        version = data.get("version")
        if version != OFFSET_VERSION:
            raise ProtocolError(
                f"barrier-kafka offset version {version!r} is not supported (this build "
                f"reads version {OFFSET_VERSION}); was the checkpoint written by another "
                f"source or a newer sparkbarrier?"
            )
        try:
            offsets = {
                TopicPartition(topic, int(part)): int(off)
                for topic, parts in data["offsets"].items()
                for part, off in parts.items()
            }
            return cls(int(data["checkpointId"]), int(data["timestampMs"]), offsets)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed barrier-kafka offset: {exc!r}") from None

    def channel_offsets(self) -> dict[str, int]:
        """``{"topic:partition": next_offset}`` -- the ledger's channel form."""
        return {tp.channel: off for tp, off in self.offsets.items()}
