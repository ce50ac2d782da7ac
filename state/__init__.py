"""Durable checkpoint state: the pending-checkpoints ledger and the checkpoint lock.

Pure Python (no pyspark, kafka or happybase import) so it runs and is tested anywhere.
"""

from __future__ import annotations

from ._durable import ENVELOPE_VERSION, read_checked, remove_stale_temps, write_atomic
from ._lock import CheckpointLock
from ._pending import LEDGER_FILE, LEDGER_VERSION, PendingCheckpoint, PendingCheckpoints

__all__ = [
    "CheckpointLock",
    "ENVELOPE_VERSION",
    "LEDGER_FILE",
    "LEDGER_VERSION",
    "PendingCheckpoint",
    "PendingCheckpoints",
    "read_checked",
    "remove_stale_temps",
    "write_atomic",
]
