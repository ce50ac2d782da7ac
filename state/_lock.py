"""The checkpoint lock: emitting a record and advancing its offset is one step.

Flink's legacy sources hold ``checkpointLock`` while they emit a record and move
their offset, so a snapshot taken under the same lock never sees a record that
was emitted but whose offset was not advanced yet (or the reverse). Readers and
the snapshotting code share one :class:`CheckpointLock`.

Why it lives although no Spark path takes it: the ``barrier-kafka`` planner needs no
lock (Spark makes its calls one at a time, see ``connectors.kafka.planner._planner``), but a
source whose reader emits on one thread while another snapshots -- the Flink legacy
contract this protocol follows -- does, and docs/protocol.md documents it as part of
the protocol core.
"""

from __future__ import annotations

import threading
from types import TracebackType

__all__ = ["CheckpointLock"]


class CheckpointLock:
    """A reentrant lock used as ``with lock: emit(record); offsets[ch] = next``.

    Reentrant because a snapshot taken from inside an emit callback (the same
    thread) must not deadlock. Cheap enough to take per batch, not per row.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> CheckpointLock:
        self._lock.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()
