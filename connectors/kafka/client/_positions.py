"""Value objects for topic-partitions and starting positions (no sentinel offsets).

Spark's Kafka source spells "earliest" and "latest" inside per-partition JSON as
``-2`` and ``-1``. Those numbers are accepted at the user surface only; inside,
a start is one of :class:`Earliest`, :class:`Latest` or :class:`AtOffset`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...._exceptions import ConfigError
from ..._kafka_offsets import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "SPARK_EARLIEST",
    "SPARK_LATEST",
    "AtOffset",
    "Earliest",
    "Latest",
    "PartitionStart",
    "StartKind",
    "TopicPartition",
]


@dataclass(frozen=True)
class Earliest:
    """Start at the oldest offset still retained."""


@dataclass(frozen=True)
class Latest:
    """Start after the newest offset at resolution time."""


@dataclass(frozen=True)
class AtOffset:
    """Start at this exact offset (the next offset to read)."""

    offset: int


PartitionStart = Earliest | Latest | AtOffset
EARLIEST = Earliest()
LATEST = Latest()

# Spark's JSON spelling of earliest/latest: accepted when parsing user input, and
# written only where sparkbarrier produces a ``startingOffsets`` JSON for the user
# (``connectors.resume``). Never used as an offset inside.
SPARK_EARLIEST = -2
SPARK_LATEST = -1


def start_from_spark_json(option: str, topic: str, partition: str, raw: object) -> PartitionStart:
    """Translate one value of a ``startingOffsets`` JSON into a start position."""
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise ConfigError(
            f"option {option!r}: offset for {topic}:{partition} must be a whole number "
            f"(-2 = earliest, -1 = latest), got {raw!r}",
            option=option,
        )
    if raw == SPARK_EARLIEST:
        return EARLIEST
    if raw == SPARK_LATEST:
        return LATEST
    if raw < 0:
        raise ConfigError(
            f"option {option!r}: offset {raw} for {topic}:{partition} is invalid; use a "
            f"non-negative offset, -2 for earliest or -1 for latest",
            option=option,
        )
    return AtOffset(raw)


class StartKind(str, enum.Enum):
    """Where a fresh query (no Spark checkpoint yet) starts reading."""

    EARLIEST = "earliest"
    LATEST = "latest"
    SPECIFIC = "specific"  # per-partition JSON
    TIMESTAMP = "timestamp"  # startingTimestamp: one timestamp for every partition
    BY_TIMESTAMP = "by_timestamp"  # startingOffsetsByTimestamp: per-partition timestamps
    GROUP = "group"  # the consumer group's committed offsets
