"""The only code that commits consumer-group offsets.

Flink's ``KafkaSourceFetcherManager`` role: called with the offsets of a
*completed* checkpoint (sink committed and Spark's commit log written), it writes
them to the group with ``OffsetCommit`` via the admin API -- the source never joins
the group, so no rebalance and no member id are involved.

Contract:
- best effort: a failed commit is logged (once per problem) and counted, never
  raised; :class:`~._background_commits.BackgroundCommits` retries it, or a newer
  completion whose offsets subsume it;
- coordinator moves: a retriable error drops the client, so the next attempt finds the
  group's coordinator afresh (kafka-python would keep sending to the old one);
- monotonic: a partition's committed offset never moves backwards (the group's
  current offsets are read once before the first commit, then tracked), so a
  replayed or older checkpoint is a no-op;
- ``completed_id`` is the id of what completed, as ``source`` names it: barrier-kafka's
  checkpoint id, or for ``commit_kafka_offsets`` (``spark-kafka``) Spark's batch id;
- the commit metadata carries ``completed_id`` under that name and the timestamp, never an option
  value (so no secret can leak into ``__consumer_offsets``); its format is owned by
  ``_group`` (``commit_metadata`` / ``parse_commit_metadata``), which also reads it back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kafka import KafkaAdminClient, TopicPartition as KafkaTP
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from .._metrics import SourceMetrics
from ..client._failover import ProblemLog, describe, kafka_python_retriable
from ..client._positions import TopicPartition
from ..client._secrets import install_client_log_redaction
from ._group import commit_metadata, committed_offsets, completed_id_name

__all__ = ["OffsetCommitter"]

install_client_log_redaction()

log = logging.getLogger(__name__)

_ATTEMPTS = 4  # retriable errors only, about 3 s in all
_BACKOFF_S = 0.5


class OffsetCommitter:
    """Commits completed checkpoints' offsets to ``group_id`` (driver, planner process)."""

    def __init__(self, admin_configs: Mapping[str, object], group_id: str,
                 metrics: SourceMetrics, *, query_id: str | None = None,
                 source: str = "barrier-kafka") -> None:
        self._configs = dict(admin_configs)
        self._query_id = query_id
        self._source = source
        self._group_id = group_id
        self._metrics = metrics
        self._admin: KafkaAdminClient | None = None
        self._committed: dict[TopicPartition, int] | None = None
        self._id_name = completed_id_name(source)
        self._last_committed_id: int | None = None
        self._last_error: Exception | None = None
        self._refused = False
        self._problems = ProblemLog(log, source)

    @property
    def refused(self) -> bool:
        """The last commit failed with an error retrying cannot fix (no group or topic
        rights, say), not with a coordinator in motion; False again after a success."""
        return self._refused

    @property
    def last_committed_id(self) -> int | None:
        """The newest id committed through this committer (None: none yet)."""
        return self._last_committed_id

    def _client(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(**self._configs)
        return self._admin

    def group_offsets(self) -> dict[TopicPartition, int]:
        """The group's committed offsets right now (raises KafkaError on failure)."""
        found = committed_offsets(self._client(), self._group_id)
        return {tp: c.offset for tp, c in found.items()}

    def commit(self, completed_id: int, timestamp_ms: int,
               offsets: Mapping[TopicPartition, int]) -> bool:
        """Commit ``offsets`` of ``completed_id``; True if nothing is left to do.

        Idempotent: an id at or below the last committed one is a no-op.
        """
        if self._last_committed_id is not None and completed_id <= self._last_committed_id:
            return True
        for attempt in range(_ATTEMPTS):
            try:
                return self._commit_once(completed_id, timestamp_ms, offsets)
            except (KafkaError, OSError) as exc:
                self._last_error = exc
                retriable = kafka_python_retriable(exc)
                self._refused = not retriable
                if retriable:
                    # The coordinator moved (NOT_COORDINATOR), is not elected yet, or its
                    # broker died: kafka-python caches the coordinator per client and never
                    # drops it, so every later commit would go to the old broker. A new
                    # client looks the coordinator up afresh.
                    self._reset_client()
                if not retriable or attempt == _ATTEMPTS - 1:
                    break
                self._committed = None
                time.sleep(_BACKOFF_S * (attempt + 1))
        return self._commit_failed(completed_id)

    def _reset_client(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # a half-dead client; a new one follows
                log.debug("%s: closing the admin client failed", self._source, exc_info=True)
            self._admin = None

    def _commit_once(self, completed_id: int, timestamp_ms: int,
                     offsets: Mapping[TopicPartition, int]) -> bool:
        if self._committed is None:
            self._committed = self.group_offsets()
        ahead = {tp: off for tp, off in offsets.items() if off > self._committed.get(tp, -1)}
        if ahead:
            meta = commit_metadata(completed_id, timestamp_ms, query_id=self._query_id,
                                   source=self._source)
            request = {KafkaTP(tp.topic, tp.partition): OffsetAndMetadata(off, meta, -1)
                       for tp, off in ahead.items()}
            errors = self._client().alter_group_offsets(self._group_id, request)
            rejected = {tp: err for tp, err in errors.items()
                        if err is not None and getattr(err, "errno", 0) != 0}
            if rejected:
                raise _PartialCommit(
                    {str(tp): err.__name__ for tp, err in rejected.items()},
                    retriable=all(getattr(err, "retriable", False) for err in rejected.values()),
                )
            self._committed.update(ahead)
        self._last_committed_id = completed_id
        self._refused = False
        self._metrics.add("commits_succeeded")
        if self._id_name == "checkpoint":  # the source's metric; a batch id is not one
            self._metrics.set("last_committed_checkpoint", completed_id)
        self._problems.healed(f"commit to group {self._group_id!r}")
        log.info("%s: %s %d committed to group %r: %s", self._source, self._id_name, completed_id,
                 self._group_id, {str(tp): off for tp, off in sorted(offsets.items())})
        return True

    def _commit_failed(self, completed_id: int) -> bool:
        self._metrics.add("commits_failed")
        # Force a fresh read next time: our view of the group may be stale.
        self._committed = None
        self._problems.failing(f"commit to group {self._group_id!r}",
                               describe(self._last_error) if self._last_error else "unknown",
                               f"committing {self._id_name} {completed_id} failed; it (or a newer "
                               f"one) is retried, the group stays behind, never ahead, and the "
                               f"query goes on")
        return False

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class _PartialCommit(KafkaError):
    """Some partitions were rejected by the coordinator.

    Retried at once only when every rejection is retriable (e.g. the coordinator is
    moving); UNKNOWN_MEMBER_ID and the like wait for the next completed checkpoint.
    """

    def __init__(self, failed: Mapping[str, str], *, retriable: bool) -> None:
        super().__init__(f"partitions rejected: {dict(failed)}")
        self.retriable = retriable
