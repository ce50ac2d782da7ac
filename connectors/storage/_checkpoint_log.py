"""Spark's checkpoint directory, read for the Kafka offsets it holds (for sources and sinks).

Neither connector owns Spark's checkpoint directory: the ``barrier-kafka`` status tools
read it for what the source planned and completed, and the checkpointed-sink adapter
(every sink, ``barrier-hbase`` included) reads it for the offsets a batch covers. So it
is read here, below both.

The source keeps its pending ledger in the driver's memory only; the one durable,
readable record of what was planned is Spark's own offset log (``offsets/<batch>``),
and of what completed, its commit log (``commits/<batch>``). Each offset-log entry
holds one line per source, and the ``barrier-kafka`` line is a :class:`SourceOffset`,
parsed with the source's own (version-checked) parser: that wire format has one owner,
``connectors/_kafka_offsets.py``, on the floor below both this reader and the source.

Read-only, on whatever file system the checkpoint is on (``_files``: local, HDFS,
object stores), no Spark needed: usable while the query runs or after, from any node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..._exceptions import ConfigError, ProtocolError
from .._kafka_offsets import SourceOffset
from ._files import Folder, folder

__all__ = ["CheckpointLogStatus", "SparkBatch", "checkpoint_log_status", "planned_batch"]


@dataclass(frozen=True)
class SparkBatch:
    """One batch of Spark's offset log with the ``barrier-kafka`` offset it planned."""

    batch_id: int
    checkpoint_id: int | None
    offsets: dict[str, int]


@dataclass(frozen=True)
class CheckpointLogStatus:
    """Spark's checkpoint directory: last completed batch and planned-but-open ones."""

    location: str
    last_completed: SparkBatch | None
    pending: list[SparkBatch] = field(default_factory=list)


def _read_log_entry(log: Folder, name: str) -> list[str] | None:
    raw = log.read(name)
    if raw is None:
        return None
    lines = raw.decode("utf-8", "replace").splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ProtocolError(f"{log.location}/{name} is not a Spark checkpoint log entry")
    return lines[1:]


def _barrier_offset(lines: list[str]) -> SourceOffset | None:
    """The first ``barrier-kafka`` offset among a batch's per-source lines.

    A line is ours when it is a JSON object with a ``checkpointId``; other sources'
    lines are skipped. Ours go through :meth:`SourceOffset.from_json`, so an unknown
    version raises ProtocolError instead of being read as if it were version 1.
    """
    for line in lines[1:]:  # lines[0] is the batch metadata
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "checkpointId" in obj:
            return SourceOffset.from_json(obj)
    return None


def _jvm_kafka_offsets(lines: list[str]) -> dict[str, int]:
    """Offsets of Spark's own ``format("kafka")`` sources in a batch's lines.

    Spark's KafkaSourceOffset is ``{"topic": {"partition": next_offset}}``; a line of
    that shape is taken as one (a partition in two sources: the smaller offset), so
    ``status --checkpoint-location`` works with either source.
    """
    out: dict[str, int] = {}
    for line in lines[1:]:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict) or not obj or "checkpointId" in obj:
            continue
        if not all(isinstance(parts, dict) and all(
                p.isdigit() and isinstance(o, int) for p, o in parts.items())
                for parts in obj.values()):
            continue
        for topic, parts in obj.items():
            for p, off in parts.items():
                key = f"{topic}:{p}"
                out[key] = min(off, out.get(key, off))
    return out


def checkpoint_log_status(location: str) -> CheckpointLogStatus:
    """Last completed and pending batches from a Spark checkpoint directory (any file system).

    Raises ConfigError when ``location`` holds no offset log, ProtocolError when an
    entry is not Spark's log format or holds an unsupported ``barrier-kafka`` offset.
    """
    root = folder(location)
    offsets, commits = root.child("offsets"), root.child("commits")
    if not offsets.exists():
        raise ConfigError(f"{location} is not a Spark streaming checkpoint (no offsets/ folder)",
                          option="checkpoint-location")

    def ids(log: Folder) -> list[int]:
        return sorted(int(n) for n in log.names() if n.isdigit())

    planned, done = ids(offsets), set(ids(commits))
    batches = {}
    for batch in planned:
        lines = _read_log_entry(offsets, str(batch))
        if lines is None:  # removed by Spark's retention between the listing and the read
            continue
        offset = _barrier_offset(lines)
        batches[batch] = SparkBatch(batch, offset.checkpoint_id if offset else None,
                                    offset.channel_offsets() if offset else
                                    _jvm_kafka_offsets(lines))
    completed = [b for b in planned if b in done and b in batches]
    last = batches[completed[-1]] if completed else None
    pending = [batches[b] for b in planned
               if b in batches and b not in done and (last is None or b > last.batch_id)]
    return CheckpointLogStatus(root.location, last, pending)


def planned_batch(location: str | None, batch_id: int) -> SparkBatch | None:
    """What ``barrier-kafka`` (or Spark's own Kafka source) planned for batch ``batch_id``.

    None without a location, when the entry is missing, or when no Kafka source is in
    it; Spark's own source gives offsets without a checkpoint id. Spark writes the entry
    before it runs the batch, so a sink's commit of that batch always finds it, on HDFS
    as on a local disk.
    """
    if not location:
        return None
    lines = _read_log_entry(folder(location).child("offsets"), str(batch_id))
    if lines is None:
        return None
    offset = _barrier_offset(lines)
    if offset is None:
        # Spark's own format("kafka"): the sink still records the batch's Kafka offsets.
        jvm = _jvm_kafka_offsets(lines)
        return SparkBatch(batch_id, None, jvm) if jvm else None
    return SparkBatch(batch_id, offset.checkpoint_id, offset.channel_offsets())
