"""Removing what an abandoned attempt of a release before 2026-11-27 wrote (upgrade only).

This release removes an abandoned attempt's puts exactly, from the notes its tries wrote
(one per try: ``c:task-*``, ``_committer``); an attempt recorded by a release before
2026-11-27 has no notes at all, so the first commit after the upgrade removes it the way
that release did, once: by its time range. What follows is that release's description.

An attempt is *abandoned* when a later plan of the same batch replaces it (the driver
died mid-batch and the query restarted) or another query takes the ``sink.id`` over
(``_attempts``). Its cells sit in the gap ``[lo, hi)`` of timestamps, strictly below
the new attempt; committed and as-of views skip the gap anyway, and plain reads show
the new attempt's values above it, but a read of all versions would list them. Before
the replacing batch commits, the driver deletes exactly those versions: one Thrift2
time-range scan finds them (only in-range versions cross the wire) and exact-version
deletes remove them (Thrift1 can only delete whole cells up to a timestamp). The next
attempt's timestamps start above ``hi``, so the version delete markers never mask
anything written later.

Both go through the shared gateway loop (``_connection``, with the sink's failover
options): a dead socket is retried on the next Thrift2 gateways, and the scan resumes just
after the last row whose versions were deleted.

Idempotent: a replay of the commit scans again and finds nothing left to delete. Delete
markers an abandoned attempt wrote cannot be taken back (HBase has no "undelete"); they
mask only versions older than themselves, which the replacing attempt's own deletes
of the same rows mask too, since the batch's input is the same.
"""

from __future__ import annotations

import logging

from ..client._thrift2 import Thrift2Admin

__all__ = ["roll_back_gap"]

log = logging.getLogger(__name__)

_CHUNK = 1000


def roll_back_gap(thrift2: Thrift2Admin, table: str, families: list[bytes], gap: list[int]) -> int:
    """Delete every version in ``gap`` of ``table``; returns how many were deleted."""
    lo, hi = gap
    deleted = 0
    for chunk in thrift2.versions_in_range(table, families, lo, hi, chunk=_CHUNK):
        thrift2.delete_versions(table, chunk)
        deleted += len(chunk)
    if deleted:
        log.info("removed %d cell version(s) of an abandoned attempt (timestamps %d..%d) from %s",
                 deleted, lo, hi, table)
    return deleted
