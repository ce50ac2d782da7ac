"""The Kafka offset formats: the topic-partition key and ``barrier-kafka``'s source offset.

One floor below both readers: the ``barrier-kafka`` planner writes the source offset,
and Spark's checkpoint-log reader (:mod:`.storage._checkpoint_log`, used by the status tools and
every checkpointed sink) parses it back. Kept inside ``connectors/kafka`` it made the
log reader import the Kafka package, whose ``__init__`` re-exports the log reader: an
import circle hidden behind a function-level import.

The source offset is what Spark's offset log persists for every micro-batch.

JSON form (version 1)::

    {"version": 1, "checkpointId": 7, "timestampMs": 1700000000123,
     "offsets": {"orders": {"0": 42, "1": 17}}}

``offsets`` holds the *next* offset to read per topic-partition (Spark's layout).
``starts`` (optional, same layout) holds where partitions that entered the stream in
this checkpoint begin (discovered partitions start at their earliest offset *as seen
when the batch was planned*); a replay reads from there instead of looking earliest up
again, so it reads the same range or reports the loss. Readers that predate the field
ignore it.
``checkpointId`` increases by one only when the range advances; ``timestampMs`` is
fixed when the batch is planned and strictly increases. Because Spark persists
this dict, a replayed batch carries the same id and timestamp -- they are never
recomputed. Unknown versions are rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .._exceptions import ProtocolError
from ..state._json import Json, json_int, json_object

__all__ = ["OFFSET_VERSION", "SourceOffset", "TopicPartition", "nest_offsets"]


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A Kafka topic-partition; its channel form is ``"topic:partition"``."""

    topic: str
    partition: int

    @property
    def channel(self) -> str:
        return f"{self.topic}:{self.partition}"

    @classmethod
    def from_channel(cls, channel: str) -> TopicPartition:
        """Parse the channel form (the one parser of it: ledger, commit records, resume).

        Raises ProtocolError (``channel`` set): a channel is written by sparkbarrier
        itself, so a malformed one means a record from elsewhere or a corrupt one.
        """
        topic, sep, part = channel.rpartition(":")
        if not sep or not topic or not part.isdigit():
            raise ProtocolError(f"not a 'topic:partition' channel: {channel!r}", channel=channel)
        return cls(topic, int(part))

    def __str__(self) -> str:
        return self.channel

OFFSET_VERSION = 1


@dataclass(frozen=True)
class SourceOffset:
    """Next offsets per partition, stamped with the checkpoint that ends there."""

    checkpoint_id: int
    timestamp_ms: int
    offsets: Mapping[TopicPartition, int]
    starts: Mapping[TopicPartition, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", dict(sorted(self.offsets.items())))
        object.__setattr__(self, "starts", dict(sorted(self.starts.items())))

    def to_json(self) -> dict[str, Json]:
        data: dict[str, Json] = {
            "version": OFFSET_VERSION,
            "checkpointId": self.checkpoint_id,
            "timestampMs": self.timestamp_ms,
            "offsets": nest_offsets(self.offsets),
        }
        if self.starts:
            data["starts"] = nest_offsets(self.starts)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> SourceOffset:
        version = data.get("version")
        if version != OFFSET_VERSION:
            raise ProtocolError(
                f"barrier-kafka offset version {version!r} is not supported (this build "
                f"reads version {OFFSET_VERSION}); was the checkpoint written by another "
                f"source or a newer sparkbarrier?"
            )
        try:
            return cls(json_int(data["checkpointId"]), json_int(data["timestampMs"]),
                       _flat(data["offsets"]), _flat(data.get("starts", {})))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed barrier-kafka offset: {exc!r}") from None

    def channel_offsets(self) -> dict[str, int]:
        """``{"topic:partition": next_offset}`` -- the ledger's channel form."""
        return {tp.channel: off for tp, off in self.offsets.items()}


def nest_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's ``{"topic": {"partition": offset}}`` layout."""
    nested: dict[str, dict[str, int]] = {}
    for tp, off in offsets.items():
        nested.setdefault(tp.topic, {})[str(tp.partition)] = off
    return nested


def _flat(nested: Json) -> dict[TopicPartition, int]:
    """The flat form of Spark's nested layout; TypeError/ValueError when it is not that layout."""
    return {TopicPartition(topic, int(part)): json_int(off)
            for topic, parts in json_object(nested, "offsets").items()
            for part, off in json_object(parts, f"offsets of {topic!r}").items()}
