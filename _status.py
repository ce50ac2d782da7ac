"""Read-only status of a barrier pipeline: group offsets, sink commit, Spark's checkpoint log.

Three independent views, each read from where the protocol stores it -- nothing here
talks to a running query:

* :func:`group_status` -- the consumer group's committed offsets per partition, the
  checkpoint id / time ``barrier-kafka`` wrote into the commit metadata, the end offset
  and the lag (end - committed).
* :func:`sink_status` -- the ``barrier-hbase`` commit record of a ``sink.id`` (sequence,
  Spark batch, time, the source offsets it covers) and an in-flight attempt if one is
  above the last commit.
* :func:`checkpoint_log_status` -- Spark's own checkpoint directory (local path): the last
  batch in the commit log with its source offsets, and the *pending* checkpoints (planned
  in the offset log, not yet committed). The source keeps its pending ledger in the
  driver's memory only, so Spark's offset log is the one durable, readable record of it.

Every function raises :class:`~sparkbarrier.SourceError` / :class:`~sparkbarrier.SinkError`
/ :class:`~sparkbarrier.ConfigError` with a message that names what was not found.
Used by ``python -m sparkbarrier status`` and by the demo's verification.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._exceptions import ConfigError, ProtocolError, SinkError, SourceError

__all__ = [
    "PartitionStatus",
    "GroupStatus",
    "SinkStatus",
    "SparkBatch",
    "CheckpointLogStatus",
    "group_status",
    "sink_status",
    "checkpoint_log_status",
    "parse_commit_metadata",
    "as_json",
]

log = logging.getLogger(__name__)

_TIMEOUT_MS = 15_000


@dataclass(frozen=True)
class PartitionStatus:
    """One partition of the group: committed next offset, end offset, lag, checkpoint."""

    topic: str
    partition: int
    committed: int | None
    end: int
    lag: int | None
    checkpoint_id: int | None
    checkpoint_timestamp_ms: int | None


@dataclass(frozen=True)
class GroupStatus:
    """The group's view; ``last_checkpoint_id`` is the newest id any partition carries."""

    group: str
    partitions: list[PartitionStatus]

    @property
    def last_checkpoint_id(self) -> int | None:
        ids = [p.checkpoint_id for p in self.partitions if p.checkpoint_id is not None]
        return max(ids) if ids else None

    @property
    def total_lag(self) -> int | None:
        lags = [p.lag for p in self.partitions if p.lag is not None]
        return sum(lags) if lags else None

    def offsets(self) -> dict[str, int]:
        """``{"topic:partition": committed}`` (the channel form the sink records)."""
        return {f"{p.topic}:{p.partition}": p.committed for p in self.partitions
                if p.committed is not None}


@dataclass(frozen=True)
class SinkStatus:
    """The last commit of one ``sink.id`` and the attempt in flight above it, if any."""

    sink_id: str
    commit_table: str
    table: str
    seq: int
    query_id: str
    batch_id: int
    committed_at_ms: int
    checkpoint_ids: list[int]
    offsets: dict[str, int]
    gaps: int
    attempt_batch_id: int | None = None
    attempt_seq: int | None = None


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


def parse_commit_metadata(metadata: str | None) -> tuple[int | None, int | None]:
    """``(checkpointId, timestampMs)`` from ``barrier-kafka``'s offset-commit metadata.

    Metadata written by anything else (another tool, an older commit) gives
    ``(None, None)``: the offsets are still shown, only without a checkpoint.
    """
    if not metadata:
        return None, None
    try:
        obj = json.loads(metadata)
    except ValueError:
        return None, None
    if not isinstance(obj, dict) or obj.get("src") != "barrier-kafka" or obj.get("v") != 1:
        return None, None
    return obj.get("checkpointId"), obj.get("timestampMs")


def group_status(bootstrap: str, group: str, topics: list[str] | None = None) -> GroupStatus:
    """Committed offsets, checkpoint metadata and lag of ``group`` (optionally only ``topics``).

    Raises SourceError when the group has no committed offsets (unknown group) or a
    requested topic does not exist.
    """
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka import TopicPartition as KafkaTP
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=_TIMEOUT_MS)
    except KafkaError as exc:
        raise SourceError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    try:
        found = admin.list_group_offsets({group: None}).get(group, {})
    except KafkaError as exc:
        raise SourceError(f"cannot read offsets of group {group!r}: {exc}") from exc
    finally:
        admin.close()
    committed = {(tp.topic, tp.partition): meta for tp, meta in found.items()
                 if meta is not None and meta.offset is not None and meta.offset >= 0}
    if not committed:
        raise SourceError(f"consumer group {group!r} has no committed offsets on {bootstrap} "
                          "(unknown group, or no checkpoint has completed yet)")
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 request_timeout_ms=_TIMEOUT_MS + 1000)
    except KafkaError as exc:
        raise SourceError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    try:
        wanted = topics or sorted({t for t, _ in committed})
        existing = consumer.topics()
        missing = [t for t in wanted if t not in existing]
        if missing:
            raise SourceError(f"topic(s) {missing} do not exist on {bootstrap}")
        tps = [KafkaTP(t, p) for t in wanted for p in sorted(consumer.partitions_for_topic(t) or ())]
        ends = consumer.end_offsets(tps)
    except KafkaError as exc:
        raise SourceError(f"cannot read end offsets from {bootstrap}: {exc}") from exc
    finally:
        consumer.close()
    rows = []
    for tp in tps:
        meta = committed.get((tp.topic, tp.partition))
        ckpt, ts = parse_commit_metadata(meta.metadata) if meta is not None else (None, None)
        offset = meta.offset if meta is not None else None
        end = int(ends[tp])
        rows.append(PartitionStatus(tp.topic, tp.partition, offset, end,
                                    end - offset if offset is not None else None, ckpt, ts))
    if topics and all(r.committed is None for r in rows):
        raise SourceError(f"consumer group {group!r} has no committed offsets for {topics}")
    return GroupStatus(group, rows)


def sink_status(host: str, port: int, sink_id: str, commit_table: str) -> SinkStatus:
    """The commit record of ``sink_id`` in ``commit_table``; SinkError if there is none."""
    from .connectors.hbase._commit_table import read_state
    from .connectors.hbase._connection import HBaseConnection

    conn = HBaseConnection(host, port, timeout_ms=_TIMEOUT_MS)
    try:
        tables = conn.call(lambda c: c.tables())
        if commit_table.encode() not in tables:
            raise SinkError(f"commit table {commit_table!r} does not exist on HBase {host}:{port}")
        state = read_state(conn, commit_table, sink_id)
    finally:
        conn.close()
    commit = state.commit
    if commit is None:
        raise SinkError(f"sink {sink_id!r} has no commit in {commit_table!r} on {host}:{port} "
                        "(unknown sink.id, or nothing committed yet)")
    attempt = state.attempt
    in_flight = (attempt is not None and attempt.prev_seq == commit.seq
                 and (attempt.query_id, attempt.batch_id) != (commit.query_id, commit.batch_id))
    return SinkStatus(
        sink_id=commit.sink_id, commit_table=commit_table, table=commit.table, seq=commit.seq,
        query_id=commit.query_id, batch_id=commit.batch_id, committed_at_ms=commit.committed_at_ms,
        checkpoint_ids=list(commit.source_checkpoints), offsets=dict(commit.offsets),
        gaps=len(commit.gaps),
        attempt_batch_id=attempt.batch_id if in_flight and attempt else None,
        attempt_seq=commit.seq + 1 if in_flight else None,
    )


def _read_log_entry(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ProtocolError(f"{path} is not a Spark checkpoint log entry")
    return lines[1:]


def _barrier_offset(lines: list[str]) -> tuple[int | None, dict[str, int]]:
    """The first ``barrier-kafka`` offset among a batch's per-source lines."""
    for line in lines[1:]:  # lines[0] is the batch metadata
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "checkpointId" in obj and "offsets" in obj:
            offsets = {f"{t}:{p}": int(o) for t, parts in obj["offsets"].items()
                       for p, o in parts.items()}
            return int(obj["checkpointId"]), offsets
    return None, {}


def checkpoint_log_status(location: str) -> CheckpointLogStatus:
    """Last completed and pending batches from a *local* Spark checkpoint directory."""
    root = Path(location.removeprefix("file://"))
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
        ckpt, offsets = _barrier_offset(_read_log_entry(offsets_dir / str(batch)))
        batches[batch] = SparkBatch(batch, ckpt, offsets)
    completed = [b for b in planned if b in done]
    last = batches[completed[-1]] if completed else None
    pending = [batches[b] for b in planned if b not in done and (last is None or b > last.batch_id)]
    return CheckpointLogStatus(str(root), last, pending)


def as_json(obj: Any) -> Any:
    """Plain JSON form of the status dataclasses (for ``--json``)."""
    if obj is None:
        return None
    data = asdict(obj)
    if isinstance(obj, GroupStatus):
        data["last_checkpoint_id"] = obj.last_checkpoint_id
        data["total_lag"] = obj.total_lag
    return data
