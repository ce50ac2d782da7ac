"""Resolve ``startingOffsets`` & co. into concrete next offsets (once per query).

Called from ``initialOffset`` only, i.e. for a query without a Spark checkpoint;
a restarted query resumes from its offset log and never comes here.
"""

from __future__ import annotations

import logging

from ...._exceptions import ConfigError
from .._metrics import SourceMetrics
from .._options import GroupFallback, KafkaSourceOptions, StartingOffsetsByTimestampStrategy
from ..client._positions import AtOffset, Earliest, Latest, PartitionStart, StartKind, TopicPartition
from ..commits._offset_committer import OffsetCommitter
from ._cluster import ClusterView

__all__ = ["resolve_initial"]

log = logging.getLogger(__name__)


def resolve_initial(options: KafkaSourceOptions, cluster: ClusterView) -> dict[TopicPartition, int]:
    """Next offset per currently selected partition, per the starting options."""
    tps = cluster.discover()
    if not tps and options.assign:
        raise ConfigError(f"none of the assigned partitions exist: "
                          f"{[str(tp) for tp in options.assign]}", option="assign")
    kind = options.start_kind
    earliest, latest = cluster.earliest(tps), cluster.latest(tps)
    if kind is StartKind.EARLIEST:
        return earliest
    if kind is StartKind.LATEST:
        return latest
    if kind is StartKind.SPECIFIC:
        return _specific(options, tps, earliest, latest)
    if kind is StartKind.GROUP:
        return _from_group(options, tps, earliest, latest)
    if kind is StartKind.TIMESTAMP:
        if options.start_timestamp is None:  # explicit: the options parser sets both together
            raise ConfigError("startingTimestamp is not set", option="startingTimestamp")
        stamps = dict.fromkeys(tps, options.start_timestamp)
    else:
        stamps = dict(options.start_timestamps)
    option = "startingTimestamp" if kind is StartKind.TIMESTAMP else "startingOffsetsByTimestamp"
    missing = sorted(set(stamps) - tps)
    if missing:
        raise ConfigError(f"option {option!r} names partitions that are not read: "
                          f"{[str(tp) for tp in missing]}", option=option)
    if kind is StartKind.BY_TIMESTAMP and set(stamps) != tps:
        raise ConfigError(f"option {option!r} must give a timestamp for every partition read; "
                          f"missing {[str(tp) for tp in sorted(tps - set(stamps))]}",
                          option=option)
    found = cluster.for_times(stamps)
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        offset = found.get(tp)
        if offset is None:
            if options.timestamp_strategy is StartingOffsetsByTimestampStrategy.ERROR:
                raise ConfigError(
                    f"no record at or after timestamp {stamps[tp]} in {tp}; set "
                    f"startingOffsetsByTimestampStrategy=latest to start at the end instead",
                    option=option)
            offset = latest[tp]
        out[tp] = offset
    return out


def _pick(start: PartitionStart, tp: TopicPartition, earliest: dict[TopicPartition, int],
          latest: dict[TopicPartition, int]) -> int:
    if isinstance(start, Earliest):
        return earliest[tp]
    if isinstance(start, Latest):
        return latest[tp]
    if not isinstance(start, AtOffset):  # explicit: assert vanishes under python -O
        raise ConfigError(f"unsupported start position {start!r} for {tp}",
                          option="startingOffsets")
    return start.offset


def _specific(options: KafkaSourceOptions, tps: set[TopicPartition],
              earliest: dict[TopicPartition, int], latest: dict[TopicPartition, int]
              ) -> dict[TopicPartition, int]:
    given = set(options.specific_starts)
    if given != tps:
        raise ConfigError(
            "option 'startingOffsets' must list exactly the partitions read; missing "
            f"{[str(tp) for tp in sorted(tps - given)]}, unknown "
            f"{[str(tp) for tp in sorted(given - tps)]}", option="startingOffsets")
    return {tp: _pick(options.specific_starts[tp], tp, earliest, latest) for tp in tps}


def _from_group(options: KafkaSourceOptions, tps: set[TopicPartition],
                earliest: dict[TopicPartition, int],
                latest: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    # Read once at query start, with a client of its own: the committer's lives on its
    # background thread (._background_commits).
    reader = OffsetCommitter(options.admin_configs(), options.group_id or "", SourceMetrics())
    try:
        committed = reader.group_offsets()
    finally:
        reader.close()
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        if tp in committed:
            out[tp] = committed[tp]
        elif options.group_fallback is GroupFallback.ERROR:
            raise ConfigError(
                f"group {options.group_id!r} has no committed offset for {tp}; set "
                "startingOffsets.groupFallback=earliest or latest",
                option="startingOffsets.groupFallback")
        else:
            out[tp] = (earliest if options.group_fallback is GroupFallback.EARLIEST else latest)[tp]
    log.info("barrier-kafka: starting from group %r offsets %s", options.group_id,
             {str(tp): o for tp, o in sorted(out.items())})
    return out
