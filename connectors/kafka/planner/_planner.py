"""Driver side of ``barrier-kafka``: plans micro-batches and detects completion.

Spark runs this reader in one long-lived Python process on the driver (calls to
``initialOffset``, ``latestOffset``, ``partitions``, ``commit``); ``read`` runs on
other, freshly constructed instances on executors, so ``__init__`` is cheap and
every client is created lazily.

Checkpoint protocol (Flink's ``snapshotState`` / ``notifyCheckpointComplete``):

* **snapshot** -- ``latestOffset`` plans batch N: its end offsets get checkpoint
  id N (previous id + 1, only when the range advances) and a planning timestamp,
  both stored *in the offset dict*, which Spark persists in its offset log. The
  plan is also recorded in the pending ledger. No lock guards the ledger: Spark's
  micro-batch thread makes these calls one at a time, and the Python worker serving
  this reader handles one request at a time, so there is no second thread to exclude.
* **complete** -- Spark's ``MicroBatchExecution`` runs batch N, writes it to the
  commit log, and only then asks ``latestOffset(start=end_N)`` at the next
  trigger. So a ``start`` stamped with id N proves checkpoint N completed (the
  sink committed); its offsets are handed to the group committer then, which
  commits them on its own thread, off the batch's path (``_background_commits``:
  a coordinator move never delays a batch; ``stop`` gives the last one a bounded
  time to land). This
  also works after a driver restart (the ledger is empty, ``start`` carries
  everything) and on an idle stream (Spark still calls ``latestOffset`` every
  trigger), so a completed batch is committed within one trigger interval.
  ``commit(end)`` is treated as the same signal. Offsets of a batch that has not
  completed are never committed. With ``Trigger.AvailableNow`` Spark calls
  ``latestOffset`` once more after the final batch to find there is no more data;
  that call commits the final batch, and waits (bounded) for it to land: Spark ends
  the query and this process right after, without calling ``stop``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ...._exceptions import DataLossError, SourceError
from ...._faults import fault_point
from ....state import PendingCheckpoints
from ..._kafka_offsets import SourceOffset, nest_offsets
from .._options import KafkaSourceOptions
from ..client._positions import TopicPartition
from ..reader._partition_reader import KafkaRangePartition, read_range

if TYPE_CHECKING:  # the driver's modules (kafka-python): imported where the driver calls need them
    from ._driver_state import DriverState

__all__ = ["KafkaStreamPlanner"]

# How long AvailableNow's last planning call waits for the last batch's group commit.
_FINAL_COMMIT_WAIT_S = 30.0

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _cap_rows(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
              max_rows: int) -> dict[TopicPartition, int]:
    """End offsets reading at most ``max_rows`` records, shared by lag (largest first)."""
    lag = {tp: max(0, latest[tp] - start[tp]) for tp in start}
    total = sum(lag.values())
    if total <= max_rows:
        return dict(latest)
    share = {tp: (n * max_rows) // total for tp, n in lag.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(lag, key=lambda t: (-(lag[t] - share[t]), t)):
        if left <= 0:
            break
        if share[tp] < lag[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start[tp] + share[tp] for tp in start}


class KafkaStreamPlanner(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges per micro-batch; commits completed ones to the group."""

    def __init__(self, options: KafkaSourceOptions, schema: StructType) -> None:
        self._options = options
        self._schema = schema
        self._driver: DriverState | None = None  # created on first driver call

    def __getstate__(self) -> dict[str, object]:
        return {"_options": self._options, "_schema": self._schema, "_driver": None}

    # -- driver -------------------------------------------------------------

    def _state(self) -> DriverState:
        """The driver's clients and ledger, created on the first driver call (the executors,
        which only ``read``, never import them or kafka-python)."""
        if self._driver is None:
            from ._driver_state import DriverState

            identity = {"source": "barrier-kafka", "group": self._options.group_id or ""}
            self._driver = DriverState(self._options, PendingCheckpoints(100, identity))
        return self._driver

    def initialOffset(self) -> dict:
        """Resolve the starting position once; later calls return the same dict."""
        state = self._state()
        if state.initial is None:
            from ._starting import resolve_initial

            offsets = resolve_initial(self._options, state.cluster)
            state.initial = SourceOffset(0, _now_ms(), offsets).to_json()
            log.info("barrier-kafka: initial offsets %s", state.initial["offsets"])
        return state.initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        if self._options.min_offsets_per_trigger is not None:
            return ReadMinRows(self._options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        state = self._state()
        tps = state.cluster.discover()
        state.target = state.cluster.latest(tps)
        log.info("barrier-kafka: Trigger.AvailableNow reads up to %s",
                 {str(tp): o for tp, o in sorted(state.target.items())})

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from kafka.errors import KafkaError

        state = self._state()
        begin = SourceOffset.from_json(start)
        self._notify_complete(begin)
        current = self._current_partitions(begin)
        try:
            latest = state.cluster.latest(current)
        except KafkaError as exc:
            # e.g. a topic deleted between discovery and lookup: discover once more so
            # a vanished partition is reported as data loss, not as a timeout
            log.warning("barrier-kafka: end offset lookup failed (%s); rediscovering", exc)
            current = self._current_partitions(begin)
            latest = state.cluster.latest(current)
        state.latest_seen = latest
        self._check_truncation(current, latest)
        end = {tp: max(current[tp], latest.get(tp, current[tp])) for tp in current}
        if state.target is not None:
            end = {tp: max(current[tp], min(end[tp], state.target.get(tp, current[tp])))
                   for tp in end}
        if isinstance(limit, ReadMaxRows):
            end = _cap_rows(current, end, limit.max_rows)
        # failOnDataLoss=false: a truncated partition jumps back to its new end
        end.update({tp: off for tp, off in latest.items()
                    if tp in current and off < current[tp]})
        if self._below_minimum(state, current, end, limit):
            return start
        if end == dict(begin.offsets):
            if state.target is not None and state.committer is not None:
                # AvailableNow ends here: Spark stops the query and ends this process
                # without calling stop(), which would cut the background commit of the
                # last batch off. Give it a bounded time to land first.
                state.committer.wait_for(begin.checkpoint_id, _FINAL_COMMIT_WAIT_S)
            return start
        planned = SourceOffset(begin.checkpoint_id + 1,
                               max(_now_ms(), begin.timestamp_ms + 1), end,
                               {tp: current[tp] for tp in end if tp not in begin.offsets})
        state.record_planned(planned, begin, latest)
        return planned.to_json()

    def _check_truncation(self, current: Mapping[TopicPartition, int],
                          latest: Mapping[TopicPartition, int]) -> None:
        """The log ends before our next offset: the topic was recreated or truncated."""
        behind = {tp: (current[tp], latest[tp]) for tp in current
                  if tp in latest and latest[tp] < current[tp]}
        if not behind:
            return
        message = ", ".join(f"{tp} next offset {nxt} but log ends at {end}"
                            for tp, (nxt, end) in sorted(behind.items()))
        if self._options.fail_on_data_loss:
            raise DataLossError(f"offsets vanished ({message}); topic recreated or truncated? "
                                f"Set failOnDataLoss=false to continue from the new end",
                                topic_partition=str(min(behind)))
        log.warning("barrier-kafka: data loss skipped: %s", message)
        self._state().metrics.add("data_loss_skipped", len(behind))

    def _below_minimum(self, state: DriverState, current: Mapping[TopicPartition, int],
                       end: Mapping[TopicPartition, int], limit: ReadLimit) -> bool:
        if state.target is not None or isinstance(limit, ReadAllAvailable):
            return False  # AvailableNow must reach its target; the trigger asked for all
        minimum = self._options.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows):
            minimum = limit.min_rows
        if minimum is None:
            return False
        new = sum(max(0, end[tp] - current[tp]) for tp in end)
        waited = time.monotonic() - state.last_planned_at
        return new < minimum and waited * 1000 < self._options.max_trigger_delay_ms

    def _current_partitions(self, begin: SourceOffset) -> dict[TopicPartition, int]:
        """``begin``'s offsets plus newly discovered partitions (from earliest)."""
        state = self._state()
        known = dict(begin.offsets)
        found = state.cluster.discover()
        gone = sorted(set(known) - found)
        if gone:
            message = (f"partitions {[str(tp) for tp in gone]} disappeared (deleted topic?) "
                       f"with next offsets {[known[tp] for tp in gone]}")
            if self._options.fail_on_data_loss:
                raise DataLossError(message + "; set failOnDataLoss=false to skip them",
                                    topic_partition=str(gone[0]))
            log.warning("barrier-kafka: data loss skipped: %s", message)
            state.metrics.add("data_loss_skipped", len(gone))
            for tp in gone:
                del known[tp]
        new = sorted(found - set(known))
        if new:
            earliest = state.cluster.earliest(new)
            log.info("barrier-kafka: new partitions %s start at earliest %s",
                     [str(tp) for tp in new], [earliest.get(tp, 0) for tp in new])
            state.metrics.add("partitions_discovered", len(new))
            known.update({tp: earliest.get(tp, 0) for tp in new})
        return known

    def _notify_complete(self, completed: SourceOffset) -> None:
        """``completed`` is the end of a batch in Spark's commit log: commit it."""
        state = self._state()
        if completed.checkpoint_id == 0:
            return
        # Flink's pendingOffsetsToCommit: take the snapshot's offsets out of the
        # ledger (dropping older entries). After a driver restart the ledger is
        # empty and ``completed`` itself, read back from Spark's offset log, is
        # the same snapshot.
        pending = None
        if any(p.checkpoint_id == completed.checkpoint_id for p in state.ledger.pending):
            pending = state.ledger.complete(completed.checkpoint_id)
        offsets: Mapping[TopicPartition, int] = completed.offsets
        if pending is not None:
            offsets = {TopicPartition.from_channel(ch): off for ch, off in pending.offsets.items()}
        if state.committer is not None:
            fault_point("source.after_commitlog_before_kafka_commit")
            state.committer.submit(completed.checkpoint_id, completed.timestamp_ms, offsets)

    def commit(self, end: dict) -> None:
        """Spark: everything up to ``end`` is processed (batch in the commit log)."""
        self._notify_complete(SourceOffset.from_json(end))

    def reportLatestOffset(self) -> dict | None:
        latest = self._state().latest_seen
        if not latest:
            return None
        return nest_offsets(dict(sorted(latest.items())))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        state = self._state()
        begin, stop = SourceOffset.from_json(start), SourceOffset.from_json(end)
        # Planned starts of new partitions; only a checkpoint written before they were
        # recorded needs the earliest offset looked up again.
        unplanned = [tp for tp in stop.offsets if tp not in begin.offsets and tp not in stop.starts]
        firsts = {**(state.cluster.earliest(unplanned) if unplanned else {}), **stop.starts}
        ranges: list[tuple[TopicPartition, int, int]] = []
        for tp, until in stop.offsets.items():
            since = begin.offsets.get(tp, firsts.get(tp, 0))
            if until < since:
                message = (f"{tp}: planned end {until} is below start {since} (topic "
                           f"recreated or truncated?)")
                if self._options.fail_on_data_loss:
                    raise DataLossError(message, topic_partition=str(tp))
                log.warning("barrier-kafka: data loss skipped: %s", message)
                state.metrics.add("data_loss_skipped")
                continue
            if until > since:
                ranges.append((tp, since, until))
        return _split(ranges, stop, self._options.min_partitions)

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()

    # -- executor -----------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaRangePartition):
            # Spark hands back what ``partitions`` planned; anything else is a bug, and an
            # explicit error (unlike ``assert``) survives ``python -O``.
            raise SourceError(f"barrier-kafka cannot read input partition {partition!r}: "
                              "it was not planned by this source")
        schema = to_arrow_schema(self._schema, timezone="UTC")
        return read_range(self._options, partition, schema)


def _split(ranges: list[tuple[TopicPartition, int, int]], stop: SourceOffset,
           min_partitions: int | None) -> list[KafkaRangePartition]:
    """One task per range, large ranges split so there are >= ``min_partitions``."""
    total = sum(until - since for _, since, until in ranges)
    out: list[KafkaRangePartition] = []
    for tp, since, until in ranges:
        size = until - since
        pieces = 1
        if min_partitions and len(ranges) < min_partitions and total:
            pieces = max(1, min(size, (size * min_partitions) // total))
        bounds = [since + (size * i) // pieces for i in range(pieces)] + [until]
        out.extend(KafkaRangePartition(tp.topic, tp.partition, bounds[i], bounds[i + 1], stop.checkpoint_id,
                                       stop.timestamp_ms, emit_barrier=(i == pieces - 1))
                   for i in range(pieces))
    return out
