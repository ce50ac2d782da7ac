"""The consumer group as ``barrier-kafka`` leaves it: committed offsets, commit metadata, lag.

One owner for two formats that used to be written in one file and parsed in another:

* the **commit metadata** stored with every committed offset
  (``{"v":1,"src":"barrier-kafka","checkpointId":7,"timestampMs":...}``): written by
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

from ..._exceptions import SourceError
from ._positions import TopicPartition

__all__ = [
    "CommittedOffset",
    "GroupStatus",
    "PartitionStatus",
    "commit_metadata",
    "committed_offsets",
    "group_status",
    "parse_commit_metadata",
]

_METADATA_VERSION = 1
_METADATA_SOURCE = "barrier-kafka"
_METADATA_SOURCES = (_METADATA_SOURCE, "spark-kafka")
_TIMEOUT_MS = 15_000


def commit_metadata(completed: int, timestamp_ms: int, *,
                    query_id: str | None = None, source: str = _METADATA_SOURCE) -> str:
    """The metadata string stored with each committed offset (versioned JSON).

    ``completed``: barrier-kafka's checkpoint id, or for ``spark-kafka`` the number of
    Spark's completed batches (batch id + 1). Both are stored under the JSON key
    ``checkpointId`` (version 1, unchanged so every release's readers read both). Carries
    it, the time and (when known) the streaming query's id, never an option value, so no
    secret can leak into ``__consumer_offsets``.
    ``source`` names the writer: ``barrier-kafka`` or ``spark-kafka`` (Spark's own
    ``format("kafka")`` with :func:`commit_kafka_offsets`); both parse alike.
    """
    if source not in _METADATA_SOURCES:
        raise ValueError(f"unknown commit metadata source {source!r}")
    meta: dict[str, object] = {"v": _METADATA_VERSION, "src": source,
                               "checkpointId": completed, "timestampMs": timestamp_ms}
    if query_id is not None:
        meta["queryId"] = query_id
    return json.dumps(meta, separators=(",", ":"))


def parse_commit_metadata(metadata: str | None) -> tuple[int | None, int | None]:
    """``(checkpoint_id, timestamp_ms)`` from :func:`commit_metadata`'s string.

    Metadata written by anything else (another tool, another version) gives
    ``(None, None)`` rather than an error: a group may legitimately hold offsets
    committed by other consumers, and they are still shown, only without a checkpoint.
    """
    if not metadata:
        return None, None
    try:
        obj = json.loads(metadata)
    except ValueError:
        return None, None
    if (not isinstance(obj, dict) or obj.get("src") not in _METADATA_SOURCES
            or obj.get("v") != _METADATA_VERSION):
        return None, None
    ckpt, ts = obj.get("checkpointId"), obj.get("timestampMs")
    if not isinstance(ckpt, int) or not isinstance(ts, int):
        return None, None
    return ckpt, ts


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's committed *next* offset and the checkpoint that committed it."""

    offset: int
    checkpoint_id: int | None = None
    timestamp_ms: int | None = None


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
        ckpt, ts = parse_commit_metadata(meta.metadata)
        out[TopicPartition(tp.topic, tp.partition)] = CommittedOffset(int(meta.offset), ckpt, ts)
    return out


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

    from ._topics import preflight

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
            got.timestamp_ms if got else None))
    if topics and all(r.committed is None for r in rows) and not allow_empty:
        raise SourceError(f"consumer group {group!r} has no committed offsets for {topics}")
    return GroupStatus(group, rows)
