"""The consumer group as ``barrier-kafka`` leaves it: committed offsets, commit metadata, lag.

One owner for two formats that used to be written in one file and parsed in another:

* the **commit metadata** stored with every committed offset
  (``{"v":1,"src":"barrier-kafka","checkpointId":7,"timestampMs":...}``, or for Spark's
  own source ``{"v":2,"src":"spark-kafka","batchId":6,...}``): written by
  :class:`~._offset_committer.OffsetCommitter`, read back by :func:`group_status`;
* **reading the group's offsets** (``OffsetFetch`` through the admin API):
  :func:`committed_offsets` serves the committer, :func:`group_status` and the tests.

Read-only; nothing here joins the group or talks to a running query.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...._exceptions import SourceError
from ..client._positions import TopicPartition

__all__ = [
    "CommitMetadata",
    "CommittedOffset",
    "GroupStatus",
    "PartitionStatus",
    "commit_metadata",
    "committed_offsets",
    "completed_id_name",
    "group_status",
    "parse_commit_metadata",
]

_BARRIER_KAFKA = "barrier-kafka"
_SPARK_KAFKA = "spark-kafka"
_SOURCES = (_BARRIER_KAFKA, _SPARK_KAFKA)
_WRITTEN_VERSION = {_BARRIER_KAFKA: 1, _SPARK_KAFKA: 2}
_ID_KEY = {_BARRIER_KAFKA: "checkpointId", _SPARK_KAFKA: "batchId"}
_ID_NAME = {_BARRIER_KAFKA: "checkpoint", _SPARK_KAFKA: "batch"}
_TIMEOUT_MS = 15_000


def commit_metadata(completed_id: int, timestamp_ms: int, *,
                    query_id: str | None = None, source: str = _BARRIER_KAFKA) -> str:
    """The metadata string stored with each committed offset (versioned JSON).

    ``completed_id`` is the id of what completed, stored under its own name, which
    ``source`` (the writer) fixes:

    * ``barrier-kafka``: its checkpoint id, as version 1
      ``{"v":1,"src":"barrier-kafka","checkpointId":7,...}`` -- the format of every
      earlier release, kept so that during a rolling upgrade the old release's status
      CLI and ``group_status`` still read the new release's commits. Version 2 of a
      barrier-kafka string has the same keys; once no version-1-only reader is left,
      barrier-kafka can write it.
    * ``spark-kafka`` (Spark's own ``format("kafka")`` with :func:`commit_kafka_offsets`):
      Spark's batch id of the batch whose offsets are committed, as version 2
      ``{"v":2,"src":"spark-kafka","batchId":4,...}``. Version 1 stored the number of
      completed batches (batch id + 1) as ``checkpointId``, an id under another's name.
      A reader of an earlier release takes version 2 for another tool's metadata: it
      still shows the group's offsets and lag, without an id. Nothing reads the id back
      to decide anything (the committer reads only offsets), so that costs a display.

    Besides the id: the time and (when known) the streaming query's id, never an option
    value, so no secret can leak into ``__consumer_offsets``.
    """
    if source not in _SOURCES:
        raise ValueError(f"unknown commit metadata source {source!r}")
    if completed_id < 0:
        raise ValueError(f"{_ID_KEY[source]} must not be negative, got {completed_id}")
    meta: dict[str, object] = {"v": _WRITTEN_VERSION[source], "src": source,
                               _ID_KEY[source]: completed_id, "timestampMs": timestamp_ms}
    if query_id is not None:
        meta["queryId"] = query_id
    return json.dumps(meta, separators=(",", ":"))


def completed_id_name(source: str) -> str:
    """What ``source``'s ids are, in words for log lines: ``checkpoint`` or ``batch``."""
    if source not in _SOURCES:
        raise ValueError(f"unknown commit metadata source {source!r}")
    return _ID_NAME[source]


@dataclass(frozen=True)
class CommitMetadata:
    """:func:`commit_metadata`'s string read back: who wrote it and the id, under its name.

    Exactly one of ``checkpoint_id`` (``barrier-kafka``) and ``batch_id`` (``spark-kafka``:
    Spark's batch id) is set.
    """

    source: str
    checkpoint_id: int | None
    batch_id: int | None
    timestamp_ms: int


def _id(value: object) -> int | None:
    """A JSON id: a non-negative integer (``bool`` is an ``int`` in Python, not here)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_commit_metadata(metadata: str | None) -> CommitMetadata | None:
    """The writer and id in :func:`commit_metadata`'s string, of any version it wrote.

    Reads version 1 (every release before 2026-11-27: ``checkpointId``; for
    ``spark-kafka`` that was batch id + 1, so it reads as batch id ``checkpointId - 1``)
    and version 2 (the id under its own name: ``checkpointId`` for barrier-kafka,
    ``batchId`` for spark-kafka). Metadata written by anything else (another tool, a
    newer version, a version-2 string with the other source's key) gives None rather
    than an error: a group may legitimately hold offsets committed by other consumers,
    and they are still shown, only without an id.
    """
    if not metadata:
        return None
    try:
        obj = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("src") not in _SOURCES:
        return None
    source, version, ts = obj["src"], obj.get("v"), obj.get("timestampMs")
    if not isinstance(ts, int) or isinstance(ts, bool) or isinstance(version, bool):
        return None
    if source == _BARRIER_KAFKA and version in (1, 2):
        ckpt = _id(obj.get("checkpointId"))
        return None if ckpt is None else CommitMetadata(source, ckpt, None, ts)
    if source == _SPARK_KAFKA and version == 1:
        completed = _id(obj.get("checkpointId"))  # batches completed: batch id + 1
        return None if not completed else CommitMetadata(source, None, completed - 1, ts)
    if source == _SPARK_KAFKA and version == 2:
        batch = _id(obj.get("batchId"))
        return None if batch is None else CommitMetadata(source, None, batch, ts)
    return None


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's committed *next* offset and what committed it.

    ``checkpoint_id``: barrier-kafka's checkpoint; ``batch_id``: Spark's batch, for a
    ``spark-kafka`` commit. At most one is set; neither for another tool's commit.
    """

    offset: int
    checkpoint_id: int | None = None
    timestamp_ms: int | None = None
    batch_id: int | None = None


def committed_offsets(admin: Any, group: str) -> dict[TopicPartition, CommittedOffset]:
    """The group's committed offsets now, read with ``admin`` (a kafka-python ``KafkaAdminClient``).

    Partitions without a commit (offset -1) are left out. Raises kafka-python's
    ``KafkaError`` unchanged: the committer counts it as a failed attempt, the status
    reader turns it into a :class:`SourceError`.
    """
    found = admin.list_group_offsets({group: None}).get(group, {})
    out = {}
    for tp, meta in found.items():
        if meta is None or meta.offset is None or meta.offset < 0:
            continue
        parsed = parse_commit_metadata(meta.metadata)
        out[TopicPartition(tp.topic, tp.partition)] = CommittedOffset(
            int(meta.offset), parsed.checkpoint_id if parsed else None,
            parsed.timestamp_ms if parsed else None, parsed.batch_id if parsed else None)
    return out


@dataclass(frozen=True)
class PartitionStatus:
    """One partition of the group: committed next offset, end offset, lag, and what committed.

    ``checkpoint_id`` is set for a barrier-kafka commit, ``batch_id`` (Spark's batch id)
    for a spark-kafka one; ``checkpoint_timestamp_ms`` is the time in that commit's
    metadata (barrier-kafka: the checkpoint's planning; spark-kafka: the progress event).
    """

    topic: str
    partition: int
    committed: int | None
    end: int
    lag: int | None
    checkpoint_id: int | None
    checkpoint_timestamp_ms: int | None
    batch_id: int | None = None


@dataclass(frozen=True)
class GroupStatus:
    """The group's view.

    ``last_checkpoint_id``: the newest barrier-kafka checkpoint id any partition carries;
    ``last_batch_id``: the newest Spark batch id (spark-kafka). A group one query commits
    has one of them; both None when no partition's metadata is ours.
    """

    group: str
    partitions: list[PartitionStatus]

    @property
    def last_checkpoint_id(self) -> int | None:
        ids = [p.checkpoint_id for p in self.partitions if p.checkpoint_id is not None]
        return max(ids) if ids else None

    @property
    def last_batch_id(self) -> int | None:
        ids = [p.batch_id for p in self.partitions if p.batch_id is not None]
        return max(ids) if ids else None

    @property
    def total_lag(self) -> int | None:
        lags = [p.lag for p in self.partitions if p.lag is not None]
        return sum(lags) if lags else None

    def offsets(self) -> dict[str, int]:
        """``{"topic:partition": committed}`` (the channel form the sink records)."""
        return {TopicPartition(p.topic, p.partition).channel: p.committed
                for p in self.partitions if p.committed is not None}


def group_status(bootstrap: str, group: str, topics: list[str] | None = None,
                 settings: Mapping[str, Any] | None = None, *,
                 allow_empty: bool = False) -> GroupStatus:
    """Committed offsets, checkpoint metadata and lag of ``group`` (optionally only ``topics``).

    ``settings``: kafka-python keyword arguments for a secured cluster (see
    ``client_settings``); the admin and the consumer client both get them.
    ``allow_empty``: a group without commits is shown empty instead of an error (the
    status CLI compares it with Spark's checkpoint: commits may be failing).

    Raises SourceError when Kafka is unreachable, the group has no committed offsets
    (unknown group, or no checkpoint completed yet) or a requested topic does not exist;
    ConfigError naming the option when a Kerberos (GSSAPI) login is refused (checked
    with the KDC first: kafka-python would only time out bootstrapping).
    """
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition as KafkaTP
    from kafka.errors import KafkaError

    from ..client._topics import preflight

    extra = dict(settings or {})
    preflight(bootstrap, extra)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=_TIMEOUT_MS,
                                 **{k: v for k, v in extra.items()
                                    if k in KafkaAdminClient.DEFAULT_CONFIG})
    except KafkaError as exc:
        raise SourceError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    try:
        committed = committed_offsets(admin, group)
    except KafkaError as exc:
        raise SourceError(f"cannot read offsets of group {group!r}: {exc}") from exc
    finally:
        admin.close()
    if not committed and allow_empty and not topics:
        return GroupStatus(group, [])
    if not committed and not allow_empty:
        raise SourceError(f"consumer group {group!r} has no committed offsets on {bootstrap} "
                          "(unknown group, or no checkpoint has completed yet)")
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 **{"request_timeout_ms": _TIMEOUT_MS + 1000, **extra})
    except KafkaError as exc:
        raise SourceError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    try:
        wanted = topics or sorted({tp.topic for tp in committed})
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
    for ktp in tps:
        got = committed.get(TopicPartition(ktp.topic, ktp.partition))
        end = int(ends[ktp])
        rows.append(PartitionStatus(
            ktp.topic, ktp.partition, got.offset if got else None, end,
            end - got.offset if got else None, got.checkpoint_id if got else None,
            got.timestamp_ms if got else None, got.batch_id if got else None))
    if topics and all(r.committed is None for r in rows) and not allow_empty:
        raise SourceError(f"consumer group {group!r} has no committed offsets for {topics}")
    return GroupStatus(group, rows)
