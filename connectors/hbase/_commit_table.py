"""The commit table: one row per ``sink.id`` holding its last commit and in-flight attempt.

Layout (table ``commit.table``, default ``sparkbarrier_commits``, family ``c``):

* row key: the ``sink.id`` (UTF-8)
* ``c:commit`` — JSON :class:`CommitRecord` of the last committed checkpoint. Replaced
  only with ``checkAndPut`` against the exact bytes the writer based its work on, so a
  second writer under the same ``sink.id`` is fenced.
* ``c:attempt`` — JSON :class:`AttemptRecord`: the sequence the running micro-batch
  writes under. Executors of one batch agree on it through ``checkAndPut``; a replay
  of the same (query, batch) reuses it so replayed cells are identical.

Both records carry ``"version": 1``; unknown versions are rejected. ``offsets`` maps
a source channel (``"topic:partition"``) to the next offset to read -- enough to
resume a fresh query from what the sink holds.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from thriftpy2.thrift import TException

from ..._exceptions import ProtocolError, SinkError
from ._connection import HBaseConnection

__all__ = [
    "RECORD_VERSION",
    "COMMIT_FAMILY",
    "COMMIT_COLUMN",
    "ATTEMPT_COLUMN",
    "CommitRecord",
    "AttemptRecord",
    "SinkState",
    "ensure_commit_table",
    "read_state",
    "check_and_put",
    "put_cell",
    "list_sinks",
]

RECORD_VERSION = 1
COMMIT_FAMILY = "c"
COMMIT_COLUMN = b"c:commit"
ATTEMPT_COLUMN = b"c:attempt"


def _check_version(obj: dict[str, Any], what: str) -> None:
    if obj.get("version") != RECORD_VERSION:
        raise ProtocolError(
            f"{what} has version {obj.get('version')!r}; this build reads version {RECORD_VERSION}"
        )


@dataclass(frozen=True)
class CommitRecord:
    """The last committed checkpoint of one sink (``c:commit``)."""

    sink_id: str
    table: str
    seq: int
    query_id: str
    batch_id: int
    read_bound: int
    offsets: dict[str, int] = field(default_factory=dict)
    checkpoint_ids: list[int] = field(default_factory=list)
    gaps: list[list[int]] = field(default_factory=list)
    schema_json: str = ""
    rowkey: str = ""
    columns: list[list[str]] = field(default_factory=list)
    committed_at_ms: int = 0
    version: int = RECORD_VERSION

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> CommitRecord:
        obj = json.loads(raw)
        _check_version(obj, "commit record")
        return cls(**obj)


@dataclass(frozen=True)
class AttemptRecord:
    """The sequence a (query, batch) writes under (``c:attempt``)."""

    query_id: str
    batch_id: int
    seq: int
    prev_seq: int | None
    gap_from: int | None
    version: int = RECORD_VERSION

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> AttemptRecord:
        obj = json.loads(raw)
        _check_version(obj, "attempt record")
        return cls(**obj)


@dataclass(frozen=True)
class SinkState:
    commit_raw: bytes | None
    attempt_raw: bytes | None

    @property
    def commit(self) -> CommitRecord | None:
        return CommitRecord.from_bytes(self.commit_raw) if self.commit_raw else None

    @property
    def attempt(self) -> AttemptRecord | None:
        return AttemptRecord.from_bytes(self.attempt_raw) if self.attempt_raw else None


def ensure_commit_table(conn: HBaseConnection, name: str) -> None:
    """Create the commit table if missing (driver, query start; idempotent)."""

    def create(c: Any) -> None:
        if name.encode() in c.tables():
            return
        try:
            c.create_table(name, {COMMIT_FAMILY: {"max_versions": 10}})
        except TException as exc:
            if name.encode() not in c.tables():
                raise SinkError(f"cannot create commit table {name!r}: {exc}") from exc

    conn.call(create)


def read_state(conn: HBaseConnection, commit_table: str, sink_id: str) -> SinkState:
    try:
        row = conn.call(
            lambda c: c.table(commit_table).row(sink_id.encode(), columns=[COMMIT_COLUMN, ATTEMPT_COLUMN])
        )
    except TException as exc:
        raise SinkError(f"cannot read sink {sink_id!r} from commit table {commit_table!r}: "
                        f"{_short(exc)}") from exc
    return SinkState(row.get(COMMIT_COLUMN), row.get(ATTEMPT_COLUMN))


def _short(exc: BaseException) -> str:
    """First line of a Thrift IOError (the server sends a whole Java stack trace)."""
    message = getattr(exc, "message", None)
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def check_and_put(conn: HBaseConnection, commit_table: str, sink_id: str, column: bytes,
                  expected: bytes | None, value: bytes) -> bool:
    """Atomically set ``column`` to ``value`` iff it currently holds ``expected``.

    ``expected=None`` means "the cell must not exist". After a transport retry the
    first call may have landed, so a False answer is re-checked: the cell already
    holding ``value`` counts as success (the write is idempotent by content).
    """

    def cap(c: Any) -> bool:
        mutation = _mutation(column, value)
        return bool(c.client.checkAndPut(commit_table.encode(), sink_id.encode(), column,
                                         expected, mutation, {}))

    try:
        if conn.call(cap):
            return True
    except TException as exc:
        raise SinkError(f"checkAndPut on {commit_table!r} row {sink_id!r} failed: {_short(exc)}") from exc
    current = conn.call(lambda c: c.table(commit_table).row(sink_id.encode(), columns=[column]))
    return current.get(column) == value


def put_cell(conn: HBaseConnection, commit_table: str, sink_id: str, column: bytes, value: bytes) -> None:
    conn.call(lambda c: c.table(commit_table).put(sink_id.encode(), {column: value}))


def list_sinks(conn: HBaseConnection, commit_table: str) -> list[CommitRecord]:
    """Every commit record in the commit table (the committed-view reader picks one)."""
    rows = conn.call(lambda c: list(c.table(commit_table).scan(columns=[COMMIT_COLUMN])))
    return [CommitRecord.from_bytes(data[COMMIT_COLUMN]) for _key, data in rows if COMMIT_COLUMN in data]


def _mutation(column: bytes, value: bytes) -> Any:
    from happybase.batch import Mutation

    return Mutation(isDelete=False, column=column, value=value, writeToWAL=True)
