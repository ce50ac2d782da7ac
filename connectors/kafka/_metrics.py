"""Counters of the driver-side source (planner + committer), logged per checkpoint.

They live in the planner's Python process on the driver. Spark has no channel
for custom metrics from a Python source, so they surface in the log line written
for every checkpoint and via :meth:`SourceMetrics.snapshot` for tests.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

__all__ = ["SourceMetrics"]


@dataclass
class SourceMetrics:
    """Monotonic counters; thread-safe increments."""

    checkpoints_planned: int = 0
    records_planned: int = 0
    commits_succeeded: int = 0
    commits_failed: int = 0
    partitions_discovered: int = 0
    data_loss_skipped: int = 0
    last_committed_checkpoint: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)

    def set(self, name: str, value: int) -> None:
        with self._lock:
            setattr(self, name, value)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}
