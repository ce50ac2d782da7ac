"""Warnings a sink gives once, however many processes and restarts see the same condition.

pyspark runs a sink's query-start checks in every planning worker that plans one of its
batches, and its commits in whichever pooled commit worker is idle; a restart on the
same checkpoint (``Trigger.AvailableNow`` to drain) starts both again. A module-level
"warned" flag is therefore per process, and a condition that a user fixes once (a
table setting, the flush limits) would be reported by every process and every start.
The one place all of them share is the store, so the sink's row in the commit table
remembers which notice it gave last:

* row ``<sink.id>``, ``c:notice-<kind>`` — JSON ``{"version": 2, "key": {...}, "by":
  "<nonce>"}``: the key of the last notice of that kind (for example the table and its
  families, or the query and its flush limits) and a nonce of its writer.
  :func:`first_notice` is True for exactly one caller per new key: it replaces the cell
  with ``checkAndPut`` against the bytes it read, so of two processes racing only the
  one whose put lands gives the warning; the others (and every later start) see the
  key already there.

This module is the only one that writes or reads these cells (one owner per format).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

from ...._exceptions import ProtocolError
from ....state._json import Json, parse_json
from ..client._connection import HBaseConnection
from ..client._errors import refusals
from ._commit_table import COMMIT_FAMILY, RECORD_VERSION, check_and_put

__all__ = ["first_notice", "forget_notice", "notice_column"]

_ROUNDS = 5


def notice_column(kind: str) -> bytes:
    return f"{COMMIT_FAMILY}:notice-{kind}".encode()


def _encode(key: Mapping[str, Json]) -> bytes:
    """The cell's bytes; ``by`` is unique per writer, so :func:`check_and_put`'s "the cell
    already holds my value" (its answer to a transport retry) is never true for a rival
    that wrote the same key."""
    return json.dumps({"version": RECORD_VERSION, "key": dict(key), "by": uuid.uuid4().hex},
                      sort_keys=True, separators=(",", ":")).encode()


def _decode(raw: bytes) -> dict[str, Json]:
    try:
        obj = parse_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"notice record is not valid JSON: {exc}") from exc
    key = obj.get("key") if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or obj.get("version") != RECORD_VERSION or not isinstance(key, dict):
        raise ProtocolError(f"notice record {raw[:200]!r} is not a version {RECORD_VERSION} notice")
    return key


def _read(conn: HBaseConnection, commit_table: str, sink_id: str, column: bytes) -> bytes | None:
    with refusals(f"cannot read sink {sink_id!r} from commit table {commit_table!r}"):
        row = conn.call(lambda c: c.table(commit_table).row(sink_id.encode(), columns=[column]))
    return row.get(column)


def first_notice(conn: HBaseConnection, commit_table: str, sink_id: str, kind: str,
                 key: Mapping[str, Json]) -> bool:
    """True for the one caller that records ``key`` as the sink's last ``kind`` notice.

    Idempotent per key: once the cell holds ``key``, every caller gets False. A cell
    this build cannot read (another version) is replaced, so the notice is given again
    rather than never.
    """
    column, wanted = notice_column(kind), _encode(key)
    key = _decode(wanted)  # as JSON gives it back (lists, not tuples)
    for _ in range(_ROUNDS):
        raw = _read(conn, commit_table, sink_id, column)
        if raw is not None:
            try:
                if _decode(raw) == key:
                    return False
            except ProtocolError:
                pass  # another build's record: replace it below (a repeated warning beats a lost one)
        if check_and_put(conn, commit_table, sink_id, column, raw, wanted):
            return True
    return False  # others keep replacing it: one of them gave the notice


def forget_notice(conn: HBaseConnection, commit_table: str, sink_id: str, kind: str) -> None:
    """Drop the sink's ``kind`` notice: the condition is gone, so its return is news again."""
    column = notice_column(kind)
    if _read(conn, commit_table, sink_id, column) is not None:
        with refusals(f"cannot clear the {kind} notice of sink {sink_id!r} in {commit_table!r}"):
            conn.call(lambda c: c.table(commit_table).delete(sink_id.encode(), columns=[column]))
