"""Group commits off the batch's critical path: one thread, newest completed checkpoint wins.

Why: a commit is a round trip to the group coordinator, and when the coordinator's
broker has just died it is several: find the new coordinator, retry with backoff.
Run inline in ``latestOffset`` (barrier-kafka) that stretched batches from 0.9 s to
6.5 s while the coordinator moved; run on Spark's listener bus (``commit_kafka_offsets``)
it would hold up every other listener. Both hand completed checkpoints to this queue
instead and return at once.

Contract:

* :meth:`submit` never blocks and never raises; only checkpoints newer than the last
  one submitted are kept, and a newer one replaces one not yet started (its offsets
  subsume the older ones: the group only ever needs the newest completed checkpoint);
* a failed commit is retried by the thread itself, with backoff (1 s doubling to 5 s),
  until it succeeds or a newer checkpoint replaces it -- so the group catches up after
  a coordinator move even when no new batch completes;
* :meth:`close` gives the last submitted checkpoint a bounded time to land (an
  AvailableNow query's last batch is submitted just before Spark stops the source),
  then closes the client; it stops waiting at once when the broker refused that
  commit with an error retrying cannot fix (no rights on the group: every stop of such
  a query used to wait the whole bound). Idempotent.

The :class:`~._offset_committer.OffsetCommitter` it drives stays the only code that writes
group offsets, and is created on the thread on first use (a listener must stay
picklable until then).

``completed_id`` is the id of what completed, as its writer names it: barrier-kafka's
checkpoint id; for ``commit_kafka_offsets``, Spark's batch id (0 is a batch like any
other). One queue carries one writer's ids, which only grow; this queue only orders and
compares them, and the committer's ``source`` says which id it stores.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping

from .._metrics import SourceMetrics
from ..client._positions import TopicPartition
from ._offset_committer import OffsetCommitter

__all__ = ["BackgroundCommits"]

log = logging.getLogger(__name__)

_RETRY_FIRST_S = 1.0
_RETRY_MAX_S = 5.0


class BackgroundCommits:
    """Commits submitted checkpoints on one daemon thread (driver process)."""

    def __init__(self, make_committer: Callable[[], OffsetCommitter], *, name: str,
                 metrics: SourceMetrics, id_name: str = "checkpoint",
                 before_commit: Callable[[], None] | None = None) -> None:
        """``id_name`` names the ids in log lines: ``checkpoint`` or ``batch``."""
        self._make = make_committer
        self._id_name = id_name
        self._metrics = metrics
        self._name = name
        self._before_commit = before_commit
        self._cond = threading.Condition()
        self._pending: tuple[int, int, dict[TopicPartition, int]] | None = None
        self._submitted: int | None = None
        self._committed: int | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._committer: OffsetCommitter | None = None
        self._refused: int | None = None  # the newest id the broker refused for good
        self._unexpected = ""

    @property
    def committed(self) -> int | None:
        """The newest ``completed_id`` known to be in the group (None: none yet)."""
        with self._cond:
            return self._committed

    def submit(self, completed_id: int, timestamp_ms: int,
               offsets: Mapping[TopicPartition, int]) -> None:
        """Queue ``completed_id``'s offsets for commit; returns at once."""
        with self._cond:
            if self._closed or (self._submitted is not None and completed_id <= self._submitted):
                return
            self._submitted = completed_id
            self._pending = (completed_id, timestamp_ms, dict(offsets))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_for(self, completed_id: int, timeout_s: float) -> bool:
        """True once ``completed_id`` (or a later one) is in the group; False after
        ``timeout_s``, or as soon as the broker refused it (or a later one) for good."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._committed is None or self._committed < completed_id:
                left = deadline - time.monotonic()
                if left <= 0 or (self._refused is not None and self._refused >= completed_id):
                    return False
                self._cond.wait(left)
            return True

    def close(self, timeout_s: float = 30.0) -> bool:
        """Let the last submitted id land (``timeout_s`` at most), then stop.

        True when nothing submitted is left uncommitted. Idempotent.
        """
        with self._cond:
            target = self._submitted
        landed = target is None or self._thread is None or self.wait_for(target, timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
        if not landed:
            log.warning("%s: %s %d was not committed to the group %s; the next run commits "
                        "it (the group stays behind, never ahead)", self._name, self._id_name, target,
                        "(refused, see above)" if self._refused == target else
                        f"within {timeout_s:g} s of stopping")
        return landed

    def _run(self) -> None:
        delay = _RETRY_FIRST_S
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    break
                job = self._pending
            if self._commit(*job):
                delay = _RETRY_FIRST_S
                with self._cond:
                    if self._pending is job:
                        self._pending = None
                    self._committed = job[0] if self._committed is None else max(self._committed, job[0])
                    self._refused = None
                    self._cond.notify_all()
                continue
            with self._cond:  # failed: retry after a pause, unless replaced or closed
                if self._committer is not None and self._committer.refused:
                    self._refused = job[0]
                    self._cond.notify_all()
                if self._closed:
                    break
                if self._pending is job:
                    self._cond.wait(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
        if self._committer is not None:
            self._committer.close()
            self._committer = None

    def _commit(self, completed_id: int, timestamp_ms: int,
                offsets: Mapping[TopicPartition, int]) -> bool:
        if self._before_commit is not None:
            self._before_commit()
        try:
            if self._committer is None:
                self._committer = self._make()
            return self._committer.commit(completed_id, timestamp_ms, offsets)
        except Exception:  # logged and retried, see below
            # The committer handles Kafka's errors itself; anything else (a client
            # setting kafka-python rejects, a bug) would end this thread, and with it
            # every later commit, without a trace. Log it, count it, retry later.
            self._metrics.add("commits_failed")
            if self._unexpected != (failure := traceback.format_exc(limit=1)):
                self._unexpected = failure  # one stack trace per problem, not per retry
                log.exception("%s: committing %s %d failed", self._name, self._id_name,
                              completed_id)
            else:
                log.debug("%s: committing %s %d failed again", self._name, self._id_name,
                          completed_id)
            return False
