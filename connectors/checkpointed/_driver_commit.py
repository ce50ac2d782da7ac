"""Driver side of a checkpointed sink: Spark's commit/abort → the function's notifications, once.

Spark calls ``commit(messages, batchId)`` after every task of the batch reported, and
may call it again for the same batch after a driver crash between the sink's commit
and its own commit log. Which batches were applied is therefore kept durably in a
ledger of Spark batch ids (:class:`_BatchLedger`, on ``state/``'s
:class:`PendingCheckpoints`: atomic, checksummed, refused when it was written for
another sink unless overridden):

1. restore the ledger; a batch at or below the newest id that is no longer pending was
   applied already → its replay's pre-committed work is discarded
   (``notify_checkpoint_aborted``) instead of applied again;
2. record the batch as *pending* and save (the intent);
3. ``notify_checkpoint_complete(batch_id, completed)``;
4. complete the batch in the ledger and save.

A crash between 2 and 4 leaves the batch pending, and its replay notifies again: that
window is the function's to make idempotent (``COMMIT PREPARED`` of an already
committed transaction, a conditional put, ...). The ledger lives beside Spark's
checkpoint, on its file system (default ``<checkpointLocation>/sparkbarrier/<sink>``, or
``checkpoint.state.location``): a driver rescheduled on another node with an empty disk
finds it there. On a local disk it is one file replaced atomically; on HDFS or an
object store a new generation per save (``state/_durable.py``, ``connectors/storage/_files.py``).
Functions whose store is its own record of what was applied (``barrier-hbase``'s
commit table) set ``uses_ledger = False``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._exceptions import ConfigError, ProtocolError
from ..._faults import fault_point
from ...barrier._sink import CheckpointedSink, CompletedCheckpoint, merge_offsets
from ...state import PendingCheckpoints
from ...state._durable import SnapshotStore
from ._task import TaskCommitMessage

__all__ = ["Completion", "check_state_directory", "checkpoint_location", "completed_checkpoint",
           "state_directory"]

log = logging.getLogger(__name__)


def checkpoint_location(options: Mapping[str, str]) -> str | None:
    """Spark's ``checkpointLocation`` from the sink's (case-insensitive) option map."""
    return next((v for k, v in options.items() if k.lower() == "checkpointlocation"), None)


def state_directory(options: Mapping[str, str], sink_name: str) -> Path | SnapshotStore | None:
    """Where the ledger lives: the option, else beside Spark's checkpoint, on its file system.

    A local path for a local location (the single-file ledger); a folder on HDFS or an
    object store otherwise. No I/O here (Spark builds a writer per batch):
    :func:`check_state_directory` runs at query start.
    """
    from ..storage._files import folder, is_local

    explicit = options.get("checkpoint.state.location")
    location = explicit or checkpoint_location(options)
    if not location:
        return None
    if is_local(location):
        root = Path("/" + location[len("file:"):].lstrip("/")) if location.startswith("file:") else Path(location)
        return root if explicit else root / "sparkbarrier" / sink_name
    return folder(location) if explicit else folder(location).child("sparkbarrier", sink_name)


def check_state_directory(options: Mapping[str, str], sink_name: str,
                          directory: Path | SnapshotStore | None) -> None:
    """Query start: a ledger folder the driver cannot reach is a :class:`ConfigError` naming the
    option, not a ledger lost at the first commit."""
    if directory is None or isinstance(directory, Path):
        return
    option = "checkpoint.state.location" if options.get("checkpoint.state.location") else "checkpointLocation"
    try:
        directory.names()
    except OSError as exc:
        raise ConfigError(f"sink {sink_name!r} keeps its applied-checkpoint ledger at {directory.location!r}, "
                          f"which the driver cannot reach ({exc}); for hdfs:// set HADOOP_CONF_DIR (or "
                          "SPARKBARRIER_WEBHDFS) so WebHDFS is found, or point checkpoint.state.location "
                          "elsewhere", option=option) from exc


def completed_checkpoint(messages: Sequence[Any], batch_id: int,
                         checkpoint_location: str | None = None) -> CompletedCheckpoint:
    """Merge the tasks' reports into what the function is told.

    The source offsets come from the barriers the tasks saw and, where Spark's
    checkpoint is local, from the batch's entry in Spark's offset log (what
    ``barrier-kafka`` planned for it): so a sink records the Kafka offsets of every
    batch whatever the transformations in between dropped, with or without markers.
    """
    from ..storage._checkpoint_log import planned_batch

    msgs = sorted((m for m in messages if isinstance(m, TaskCommitMessage)), key=lambda m: m.partition_id)
    planned = planned_batch(checkpoint_location, batch_id)
    offsets = merge_offsets(planned.offsets if planned is not None else {}, *(m.source_offsets for m in msgs))
    source_checkpoint_ids = {c for m in msgs for c in m.source_checkpoints}
    if planned is not None and planned.checkpoint_id is not None:  # barrier-kafka's plan for the batch
        source_checkpoint_ids.add(planned.checkpoint_id)
    return CompletedCheckpoint(
        batch_id=batch_id, query_id=msgs[0].query_id if msgs else "",
        handles=tuple(h for m in msgs for h in m.handles), source_offsets=offsets,
        source_checkpoints=tuple(sorted(source_checkpoint_ids)))


class _BatchLedger:
    """Which Spark batches the sink applied: ``state``'s :class:`PendingCheckpoints`, keyed by batch id.

    :class:`PendingCheckpoints` is the source's ledger (Flink's ``pendingOffsetsToCommit``)
    and says ``checkpoint_id``; for a checkpointed sink the checkpoint is Spark's batch. So
    this class is the one place a batch id goes where that ledger says checkpoint id
    (also the ``checkpoint_id`` field of its file, format version 1, kept as it is so that
    ledgers written before restore); everything around it says ``batch_id``.
    """

    def __init__(self, entries: PendingCheckpoints) -> None:
        self._entries = entries

    @property
    def pending_batch_ids(self) -> set[int]:
        """Batches recorded as being applied (the intent saved, the completion not yet)."""
        return {entry.checkpoint_id for entry in self._entries.pending}

    def applied_before(self, batch_id: int) -> bool:
        """True when ``batch_id`` is at or below the newest batch ever recorded and no longer pending."""
        newest = self._entries.newest_id
        return newest is not None and batch_id <= newest and batch_id not in self.pending_batch_ids

    def add_batch(self, batch_id: int, source_offsets: Mapping[str, int], timestamp_ms: int) -> None:
        self._entries.add(batch_id, source_offsets, timestamp_ms)

    def complete_batch(self, batch_id: int) -> None:
        self._entries.complete(batch_id)

    def save(self, directory: Path | SnapshotStore) -> None:
        self._entries.save(directory)


class Completion:
    """Applies each completed batch to the function exactly once (per durable ledger)."""

    def __init__(self, fn: CheckpointedSink, identity: Mapping[str, str], directory: Path | SnapshotStore | None, *,
                 allow_mismatch: bool, checkpoint_location: str | None = None) -> None:
        self._fn, self._identity, self._dir, self._allow = fn, dict(identity), directory, allow_mismatch
        self._location = checkpoint_location

    def _ledger(self) -> _BatchLedger | None:
        if self._dir is None:
            return None
        return _BatchLedger(PendingCheckpoints.restore(self._dir, identity=self._identity,
                                                       allow_mismatch=self._allow))

    def _save(self, ledger: _BatchLedger) -> None:
        if self._dir is None:  # explicit: _ledger() gives a ledger only with a directory
            raise ProtocolError("checkpointed sink: a ledger to save but no ledger directory")
        ledger.save(self._dir)

    def commit(self, messages: Sequence[Any], batch_id: int) -> bool:
        """Notify the function unless the batch was applied before; True when notified."""
        completed = completed_checkpoint(messages, batch_id, self._location)
        ledger = self._ledger()
        if ledger is not None:
            if ledger.applied_before(batch_id):
                log.info("batch %d was applied before (ledger in %s); discarding the replay's "
                         "pre-committed work instead of applying it again", batch_id, self._dir)
                self._fn.notify_checkpoint_aborted(batch_id, completed)
                return False
            if batch_id not in ledger.pending_batch_ids:
                ledger.add_batch(batch_id, completed.source_offsets, int(time.time() * 1000))
                self._save(ledger)
        fault_point("sink.after_flush_before_commit")
        self._fn.notify_checkpoint_complete(batch_id, completed)
        fault_point("checkpointed.after_store_commit_before_ledger")
        if ledger is not None:
            ledger.complete_batch(batch_id)
            self._save(ledger)
        fault_point("sink.after_commit_before_commitlog")
        return True

    def abort(self, messages: Sequence[Any], batch_id: int) -> None:
        self._fn.notify_checkpoint_aborted(batch_id, completed_checkpoint(messages, batch_id, self._location))
