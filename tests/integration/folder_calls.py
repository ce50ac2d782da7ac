"""A loop of checkpoint-folder calls that runs while a test breaks the NameNodes.

Shared by the HDFS tests that kill, restart or fail over NameNodes under calls
(test_hdfs_namenode_restarts.py, test_hdfs_ha.py, test_hdfs_ha_kerberos.py): each
asks the same question -- does every call ride through, and is none lost -- so each
runs the same loop. A worker thread creates file ``n`` (``00000``, ``00001``, ...),
reads it back and lists the folder, then goes on to ``n + 1``; the first failure ends
the loop and is kept for the test's verdict, never raised in the thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sparkbarrier.connectors.storage._files import Folder

__all__ = ["FolderCalls", "folder_calls"]


@dataclass
class FolderCalls:
    """What the loop did so far; read it while the loop runs, as its thread appends."""

    done: list[tuple[int, float, float]] = field(default_factory=list)
    """(sequence number, ``time.monotonic()`` at its start, seconds the create + read + list took)."""
    failures: list[BaseException] = field(default_factory=list)
    """The failure that ended the loop, if any (at most one)."""


@contextmanager
def folder_calls(f: Folder, *, join_timeout: float) -> Iterator[FolderCalls]:
    """Run the loop on ``f`` for the ``with`` block; on leaving it, stop the loop and
    wait up to ``join_timeout`` s for the call in flight (a call may be waiting out a
    NameNode's restart, so give it that long)."""
    calls = FolderCalls()
    stop = threading.Event()

    def work() -> None:
        n = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                f.create(f"{n:05d}", str(n).encode())
                if f.read(f"{n:05d}") != str(n).encode() or f"{n:05d}" not in f.names():
                    raise AssertionError(f"file {n} did not read back")
            except BaseException as exc:  # noqa: BLE001 -- the verdict: every failure is reported by the test
                calls.failures.append(exc)
                return
            calls.done.append((n, started, time.monotonic() - started))
            n += 1

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        yield calls
    finally:
        stop.set()
        worker.join(timeout=join_timeout)
