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

Read-only, local paths only, no Spark needed: usable while the query runs or after.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .._exceptions import ConfigError, ProtocolError
from ._kafka_offsets import SourceOffset

__all__ = ["CheckpointLogStatus", "SparkBatch", "checkpoint_log_status", "planned_batch", "local_checkpoint_dir"]


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


def _read_log_entry(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ProtocolError(f"{path} is not a Spark checkpoint log entry")
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
    """Last completed and pending batches from a *local* Spark checkpoint directory.

    Raises ConfigError when ``location`` holds no offset log, ProtocolError when an
    entry is not Spark's log format or holds an unsupported ``barrier-kafka`` offset.
    """
    root = local_checkpoint_dir(location) or Path(location)
    offsets_dir, commits_dir = root / "offsets", root / "commits"
    if not offsets_dir.is_dir():
        raise ConfigError(f"{location} is not a Spark streaming checkpoint (no offsets/ folder); "
                          "only local paths are supported", option="checkpoint-location")

    def ids(folder: Path) -> list[int]:
        if not folder.is_dir():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    planned, done = ids(offsets_dir), set(ids(commits_dir))
    batches = {}
    for batch in planned:
        lines = _read_log_entry(offsets_dir / str(batch))
        offset = _barrier_offset(lines)
        batches[batch] = SparkBatch(batch, offset.checkpoint_id if offset else None,
                                    offset.channel_offsets() if offset else
                                    _jvm_kafka_offsets(lines))
    completed = [b for b in planned if b in done]
    last = batches[completed[-1]] if completed else None
    pending = [batches[b] for b in planned if b not in done and (last is None or b > last.batch_id)]
    return CheckpointLogStatus(str(root), last, pending)


def local_checkpoint_dir(location: str | None) -> Path | None:
    """``location`` as a local directory, or None for remote file systems (hdfs://, s3a://, ...)."""
    if not location:
        return None
    if location.startswith("file:"):
        location = "/" + location[len("file:"):].lstrip("/")
    elif "://" in location:
        return None
    return Path(location)


def planned_batch(location: str | None, batch_id: int) -> SparkBatch | None:
    """What ``barrier-kafka`` (or Spark's own Kafka source) planned for batch ``batch_id``.

    None when the checkpoint is not local, the entry is missing, or no Kafka source is
    in it; Spark's own source gives offsets without a checkpoint id. Spark writes the
    entry before it runs the batch, so a sink's commit of that batch always finds it.
    """
    root = local_checkpoint_dir(location)
    if root is None:
        return None
    entry = root / "offsets" / str(batch_id)
    if not entry.is_file():
        return None
    lines = _read_log_entry(entry)
    offset = _barrier_offset(lines)
    if offset is None:
        # Spark's own format("kafka"): the sink still records the batch's Kafka offsets.
        jvm = _jvm_kafka_offsets(lines)
        return SparkBatch(batch_id, None, jvm) if jvm else None
    return SparkBatch(batch_id, offset.checkpoint_id, offset.channel_offsets())
