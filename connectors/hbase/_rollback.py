"""Removing what a replaced attempt wrote, so plain readers see nothing of it.

An attempt is *replaced* only when another query takes the ``sink.id`` over while the
attempt never committed (within one query Spark replays a batch under the same id,
which rewrites identical cells instead). Its cells sit in the gap ``[lo, hi)`` of
timestamps; the committed views skip that gap anyway, but a plain reader would see
those versions. Before the replacing batch commits, the driver deletes exactly those
versions with Thrift2 exact-version deletes (Thrift1 can only delete whole cells up
to a timestamp). The next attempt's timestamps start above ``hi``, so the version
delete markers never mask anything written later.

Idempotent: a replay of the commit scans again and finds nothing left to delete. Delete
markers the replaced attempt wrote cannot be taken back (HBase has no "undelete"); a
query resumed from the sink's offsets (``starting_offsets_from_sink``) applies the
same records again, so its deletes land anyway.
"""

from __future__ import annotations

import logging
from typing import Any

from ._connection import HBaseConnection

__all__ = ["roll_back_gap"]

log = logging.getLogger(__name__)

_CHUNK = 1000
_MAX_PASSES = 16  # each pass removes the newest in-gap version of every cell


def _in_gap_versions(conn: HBaseConnection, table: str, families: list[bytes], lo: int,
                     hi: int) -> list[tuple[bytes, bytes, bytes, int]]:
    found = []
    scan = conn.connection.table(table).scan(columns=families or None, timestamp=hi, include_timestamp=True,
                                             batch_size=_CHUNK)
    for row, cells in scan:
        for column, (_value, ts) in cells.items():
            if lo <= ts < hi:
                family, _, qualifier = column.partition(b":")
                found.append((row, family, qualifier, ts))
    return found


def roll_back_gap(conn: HBaseConnection, thrift2: Any, table: str, families: list[bytes],
                  gap: list[int]) -> int:
    """Delete every version in ``gap`` of ``table``; returns how many were deleted."""
    lo, hi = gap
    deleted = 0
    for _ in range(_MAX_PASSES):
        versions = _in_gap_versions(conn, table, families, lo, hi)
        if not versions:
            break
        for start in range(0, len(versions), _CHUNK):
            thrift2.delete_versions(table, versions[start:start + _CHUNK])
        deleted += len(versions)
    if deleted:
        log.info("removed %d cell version(s) of a replaced attempt (timestamps %d..%d) from %s",
                 deleted, lo, hi, table)
    return deleted
