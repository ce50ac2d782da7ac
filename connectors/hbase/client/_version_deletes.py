"""Exact-version deletes sent by several threads at once (driver, the commit's removals).

Why. A replay's commit removes every version its abandoned attempts noted, and every
commit removes the puts of the tries Spark did not commit. Those versions were written by
all of the batch's tasks at once; removed one chunk after another over one connection,
the commit took longer than the batch's own write (5M versions: 113.6 s, 2026-11-28).
The deletes are independent of each other (exact versions, idempotent), so chunks go
out over :data:`WORKERS` Thrift2 connections at once; the region servers apply them in
parallel as they applied the batch's writes. At most ``2 * WORKERS`` chunks are held, so
memory stays bounded whatever the count. The first failure is raised once every sent
chunk has finished; the notes stay (the caller deletes them only after this returns), so
the commit's retry sends them all again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from ._thrift2 import Thrift2Admin

__all__ = ["CHUNK", "WORKERS", "delete_versions"]

WORKERS = 8
CHUNK = 1000  # versions per call: one mutateRows-sized request


def delete_versions(connect: Callable[[], Thrift2Admin], table: str,
                    cells: Iterable[tuple[bytes, bytes, bytes, int]]) -> int:
    """Delete every ``(row, family, qualifier, timestamp)`` of ``cells``; returns how many."""
    local = threading.local()
    admins: list[Thrift2Admin] = []
    lock = threading.Lock()
    room = threading.BoundedSemaphore(2 * WORKERS)
    futures: list[Future[None]] = []

    def send(chunk: list[tuple[bytes, bytes, bytes, int]]) -> None:
        try:
            admin = getattr(local, "admin", None)
            if admin is None:
                admin = local.admin = connect()
                with lock:
                    admins.append(admin)
            admin.delete_versions(table, chunk)
        finally:
            room.release()

    count = 0
    try:
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="barrier-hbase-deletes") as pool:
            chunk: list[tuple[bytes, bytes, bytes, int]] = []
            for cell in cells:
                chunk.append(cell)
                if len(chunk) >= CHUNK:
                    room.acquire()
                    futures.append(pool.submit(send, chunk))
                    count += len(chunk)
                    chunk = []
                    if futures[0].done():  # fail fast, and keep the list short
                        futures = [f for f in futures if not f.done() or f.exception()]
                        _raise_first(futures)
            if chunk:
                room.acquire()
                futures.append(pool.submit(send, chunk))
                count += len(chunk)
        _raise_first(futures)
    finally:
        for admin in admins:
            admin.close()
    return count


def _raise_first(futures: list[Future[None]]) -> None:
    for f in futures:
        if f.done() and f.exception() is not None:
            raise f.exception()  # type: ignore[misc]
