"""Mutable driver-side state of one query's planner (lives in the planner process).

Kept apart from :class:`KafkaStreamPlanner` so the reader object that Spark
pickles to executors carries only options and schema.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from ....state import PendingCheckpoints
from ..._kafka_offsets import SourceOffset
from .._metrics import SourceMetrics
from .._options import KafkaSourceOptions
from ..client._positions import TopicPartition
from ..commits._background_commits import BackgroundCommits
from ..commits._offset_committer import OffsetCommitter
from ._cluster import ClusterView

__all__ = ["DriverState"]

log = logging.getLogger("sparkbarrier.connectors.kafka")


class DriverState:
    """Clients, pending ledger, counters and the AvailableNow target.

    Unlocked on purpose: Spark calls the planner one call at a time (see ``_planner``).
    """

    def __init__(self, options: KafkaSourceOptions, ledger: PendingCheckpoints) -> None:
        self.options = options
        self.ledger = ledger
        self.metrics = SourceMetrics()
        self.cluster = ClusterView(options)
        self.committer: BackgroundCommits | None = None
        if options.commit_offsets and options.group_id:
            group = options.group_id
            self.committer = BackgroundCommits(
                lambda: OffsetCommitter(options.admin_configs(), group, self.metrics),
                name="barrier-kafka-commits", metrics=self.metrics)
        self.initial: dict | None = None
        self.target: dict[TopicPartition, int] | None = None
        self.latest_seen: dict[TopicPartition, int] | None = None
        self.last_planned_at = time.monotonic()

    def record_planned(self, planned: SourceOffset, begin: SourceOffset,
                       latest: Mapping[TopicPartition, int]) -> None:
        """snapshotState: remember checkpoint ``planned`` as pending; log one line."""
        records = sum(off - begin.offsets.get(tp, off) for tp, off in planned.offsets.items())
        lag = sum(max(0, latest.get(tp, off) - off) for tp, off in planned.offsets.items())
        newest = self.ledger.latest
        if newest is None or newest.checkpoint_id < planned.checkpoint_id:
            self.ledger.add(planned.checkpoint_id, planned.channel_offsets(),
                            planned.timestamp_ms)
        self.metrics.add("checkpoints_planned")
        self.metrics.add("records_planned", records)
        self.last_planned_at = time.monotonic()
        ranges = {str(tp): f"{begin.offsets.get(tp, '-')}..{off}"
                  for tp, off in planned.offsets.items()
                  if begin.offsets.get(tp) != off}
        log.info("barrier-kafka: checkpoint %d planned: %d records, ranges %s, lag %d, "
                 "pending %d, commits ok/failed %d/%d", planned.checkpoint_id, records,
                 ranges, lag, len(self.ledger), self.metrics.commits_succeeded,
                 self.metrics.commits_failed)

    def close(self) -> None:
        self.cluster.close()
        if self.committer is not None:
            self.committer.close()
