"""Checkpoint state: the pending-checkpoints ledger, with durable save/restore.

The ledger itself lives in memory: the ``barrier-kafka`` planner keeps it only in the
driver's memory (Spark's offset log is the durable record that source restarts from).
What is durable is :meth:`PendingCheckpoints.save` / :meth:`PendingCheckpoints.restore`
(atomic, checksummed, versioned, refusing another source's or sink's state), used by
the checkpointed-sink driver (``connectors.checkpointed``) to keep its ledger across
driver restarts.

Pure Python (no pyspark, kafka or happybase import) so it runs and is tested anywhere.
"""

from __future__ import annotations

from ._lock import CheckpointLock
from ._pending import PendingCheckpoint, PendingCheckpoints

__all__ = [
    "CheckpointLock",
    "PendingCheckpoint",
    "PendingCheckpoints",
]
