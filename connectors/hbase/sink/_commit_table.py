"""The commit table: per ``sink.id`` its last commit, its in-flight attempt and its history.

Layout (table ``commit.table``, default ``sparkbarrier_commits``, family ``c``):

* row ``<sink.id>``:

  * ``c:commit`` — JSON :class:`CommitRecord` of the last committed checkpoint. Replaced
    only with ``checkAndPut`` against the exact bytes the writer based its work on, so a
    second writer under the same ``sink.id`` is fenced.
  * ``c:attempt`` — JSON :class:`AttemptRecord`: the timestamp base the running
    micro-batch writes at. The tasks of one plan agree on it through ``checkAndPut``,
    and their retries and copies reuse it; a later plan of the same batch (a replay
    after a driver restart) abandons it and records a new attempt above it (``_attempts``).
  * ``c:task-<base>-<partition>-<try>`` — the note of one try of write task ``partition``
    in the attempt at ``base`` (:class:`TaskNote`), written twice by ``_writer._note``:
    the claim of slot ``<try>`` = ``s<slot>`` (a ``checkAndPut`` expecting the cell
    absent), then, after the key chunks, the chunk and key counts and the block, by a
    ``checkAndPut`` conditional on ``c:attempt`` still holding that attempt; only then
    does the try send anything (docs/hbase-guarantees.md, step 4). The sink row takes
    O(tasks) writes per batch, whatever the batch's size.
  * ``c:notice-<kind>`` — the last warning of a kind the sink gave, so it is given once
    across processes and restarts; written and read only by ``_notices``.

* row ``\\x01<crc32, 8 hex digits>\\x00<sink.id>\\x00<base>-<partition>-<try>-<chunk>``, ``c:keys`` --
  chunk ``chunk`` of a try's note: the row keys it puts, each as a 4-byte length and the
  key's bytes, at most ``NOTE_CHUNK_BYTES`` per row. The hash spreads the chunks over the
  commit table's regions once it splits; no row of the table grows with a batch.

* row ``<sink.id>\\x00<sequence, 20 digits>``, ``c:history`` — every commit record
  but the newest, kept for as-of reads and lineage. The newest is ``c:commit`` itself,
  so :func:`read_history` scans the sink row with its history rows. A record's copy is
  written before ``c:commit`` moves past it (``_committer``): when ``c:commit`` holds
  sequence ``s``, the history rows hold every sequence below ``s``.

Records carry ``"version": 2``; other versions are rejected. ``offsets`` maps a source
channel (``"topic:partition"``) to the next offset to read -- enough to resume a fresh
query from what the sink holds.
"""

from __future__ import annotations

import array
import itertools
import json
import struct
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import ClassVar, TypeVar

from ...._exceptions import ProtocolError
from ....state._json import Json, parse_json
from ..client._connection import HBaseConnection
from ..client._errors import SERVER_ERRORS, refusals, refused
from ..client._thrift_types import Thrift1Connection
from ._keyed import residue_runs, residues_of_runs
from ._timestamps import BATCH_SPAN_MS

__all__ = [
    "ATTEMPT_COLUMN",
    "COMMIT_COLUMN",
    "COMMIT_FAMILY",
    "RECORD_VERSION",
    "AttemptRecord",
    "CommitRecord",
    "SinkRow",
    "SinkState",
    "TaskNote",
    "check_and_put",
    "delete_task_notes",
    "ensure_commit_table",
    "list_sinks",
    "prune_history",
    "put_cell",
    "put_history",
    "raise_plan_epoch",
    "read_cell",
    "read_history",
    "read_note_keys",
    "read_sink_row",
    "read_state",
    "write_note_chunks",
]

RECORD_VERSION = 2
NOTE_VERSION = 3  # a try's note that records its timestamp block (``TaskNote.block``)
COMMIT_FAMILY = "c"
COMMIT_COLUMN = b"c:commit"
ATTEMPT_COLUMN = b"c:attempt"
HISTORY_COLUMN = b"c:history"
TASK_NOTE_PREFIX = b"c:task-"
NOTE_KEYS_COLUMN = b"c:keys"
# A note's keys go into rows of their own of at most this many bytes each (HBase refuses a
# cell over 10 MiB by default, and a row never splits).
NOTE_CHUNK_BYTES = 1 << 20
_NOTE_ROW_PREFIX = b"\x01"  # after the plan counter (\x00...), before every printable sink.id
# One counter for the whole commit table (the default sink.id needs the query id, which
# planning does not see); it sorts before every sink row and holds no c:commit.
PLAN_COUNTER_ROW = b"\x00plans"
PLAN_COUNTER_COLUMN = b"c:epoch"
_HISTORY_SEP = b"\x00"
_LENGTH = struct.Struct(">I")
_NOTE_SLICE = 4096  # keys taken from the stream at a time


_R = TypeVar("_R", bound="_JsonRecord")


def _check_version(obj: Mapping[str, Json], what: str) -> None:
    if obj.get("version") != RECORD_VERSION:
        raise ProtocolError(
            f"{what} has version {obj.get('version')!r}; this build reads version {RECORD_VERSION}"
        )


@dataclass(frozen=True)
class _JsonRecord:
    """One JSON wire format per record class, written and read here only (compact, sorted keys).

    A frozen dataclass without fields, so that every record (a frozen dataclass) is one
    to the type checker too.
    """

    _what: ClassVar[str]
    # Fields written only when true: a record without them stays byte-identical to what the
    # build before them wrote, and that build rejects fields it does not know.
    _only_when_set: ClassVar[tuple[str, ...]] = ()
    # Field -> the key the wire has always used for it, where the code's name changed.
    _wire_names: ClassVar[dict[str, str]] = {}

    def to_bytes(self) -> bytes:
        data = {self._wire_names.get(k, k): v for k, v in asdict(self).items()
                if v or k not in self._only_when_set}
        step = self._residue_step()
        residues = data.get("key_residues")
        if step and residues:  # runs where shorter: a wide batch's list is read by every task
            runs = residue_runs(residues, step)
            if len(runs) < len(residues):
                del data["key_residues"]
                data["key_runs"] = runs
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    def _residue_step(self) -> int:
        """The modulus ``key_residues`` steps by along one split partition (0: the record has none)."""
        return 0

    @classmethod
    def from_bytes(cls: type[_R], raw: bytes) -> _R:
        record = _build(cls, raw, cls._what, {wire: k for k, wire in cls._wire_names.items()})
        runs = getattr(record, "key_runs_raw", None)
        if runs:
            object.__setattr__(record, "key_residues", residues_of_runs(runs, record._residue_step()))
            object.__setattr__(record, "key_runs_raw", [])
        return record


@dataclass(frozen=True)
class CommitRecord(_JsonRecord):
    """One committed checkpoint of a sink (``c:commit``, and its ``c:history`` copy).

    ``seq`` counts the sink's commits (1, 2, ...). The batch wrote its cells at
    timestamps in ``[ts_lo, ts_hi)``; the committed view is every cell below
    ``read_bound`` (the largest ``ts_hi`` so far) outside ``gaps``: timestamp ranges of
    replaced attempts whose puts stay (at-least-once ones, any without Thrift2), touching
    ranges joined into one (``_committer._merge_gaps``).
    """

    _what: ClassVar[str] = "commit record"
    _only_when_set: ClassVar[tuple[str, ...]] = ("tasks", "key_hash", "key_residues", "key_modulus", "key_runs_raw")
    _wire_names: ClassVar[dict[str, str]] = {"key_runs_raw": "key_runs"}

    sink_id: str
    table: str
    seq: int
    query_id: str
    batch_id: int
    ts_lo: int
    ts_hi: int
    read_bound: int
    offsets: dict[str, int] = field(default_factory=dict)
    source_checkpoints: list[int] = field(default_factory=list)
    gaps: list[list[int]] = field(default_factory=list)
    schema_json: str = ""
    rowkey: str = ""
    columns: list[list[str]] = field(default_factory=list)
    committed_at_ms: int = 0
    flush_rows: int = 1000
    flush_bytes: int = 2 << 20
    # The batch's write tasks (Spark partitions reaching the sink): the modulus under which
    # the next batch's tasks test whether they are keyed (``_keyed``); 0 in older records.
    tasks: int = 0
    # The partitioner they test under (``_keyed.choose_keying``, from this batch's tasks); "":
    # Spark's, as in records before it. ``key_residues``: task p held residue
    # ``key_residues[p] % modulus``, ``key_residues[p] // modulus`` tasks after the first that
    # held it (-1: none; ``_keyed.keyed_block`` places the next batch's tasks by them); empty:
    # task p is keyed on residue p, in block 0. ``key_modulus``: the modulus, 0: ``tasks``.
    key_hash: str = ""
    key_residues: list[int] = field(default_factory=list)
    key_modulus: int = 0
    version: int = RECORD_VERSION
    # ``key_residues`` as the wire holds it where shorter (``residue_runs``); read into it.
    key_runs_raw: list[int] = field(default_factory=list, repr=False, compare=False)

    def _residue_step(self) -> int:
        return self.key_modulus or self.tasks



@dataclass(frozen=True)
class AttemptRecord(_JsonRecord):
    """The timestamp base a (query, batch) writes at (``c:attempt``).

    ``prev_seq`` is the commit the attempt builds on; ``gap`` is set only by releases before
    2026-11-29, which ``_attempts.check_formats`` refuses in flight; ``flush_rows``/``flush_bytes``
    the buffer limits it flushes at (a retry reuses them); ``plan`` the planned batch that
    started it (``_attempts``: a retry of its tasks joins it, a later plan abandons it).
    ``abandoned``: the bases of the attempts this one replaced on top of the same commit,
    each with its tries' notes (``c:task-*``). ``noted`` (``logged`` on the wire): each try
    notes its keys before sending anything. ``closing``: the driver is committing the
    attempt (``_committer``): no try may note, and so send, anything more in it.
    ``at_least_once``: the attempt's tries note nothing (``delivery.guarantee``), so
    once abandoned its puts cannot be removed; ``unnoted``: those of ``abandoned`` that
    are such attempts (their ranges become gaps of the commit record). ``writes``: the
    options that decide which cells it writes, which a replay must share (``_attempts``).
    """

    _what: ClassVar[str] = "attempt record"
    _only_when_set: ClassVar[tuple[str, ...]] = ("plan", "abandoned", "noted", "closing", "at_least_once", "unnoted",
                                                 "writes", "span_ms", "keyed_tasks", "key_hash",
                                                 "key_residues", "key_runs_raw")
    _wire_names: ClassVar[dict[str, str]] = {"noted": "logged", "key_runs_raw": "key_runs"}

    query_id: str
    batch_id: int
    base_ms: int
    prev_seq: int | None
    gap: list[int] | None = None
    flush_rows: int = 1000
    flush_bytes: int = 2 << 20
    plan: str = ""
    abandoned: list[int] = field(default_factory=list)
    noted: bool = False
    closing: bool = False
    at_least_once: bool = False
    unnoted: list[int] = field(default_factory=list)
    # The options that decide which cells the attempt writes (``HBaseSinkOptions.write_shape``).
    writes: dict[str, str] = field(default_factory=dict)
    # The timestamps above ``base_ms`` this attempt, and every attempt it abandoned, may have
    # written (``sink.max-write-tasks`` * 8 ms, the largest of them); 0: the default 4,096 ms.
    span_ms: int = 0
    # The modulus every task of the attempt tests its keys under (``_keyed``): that of the
    # commit it builds on (1 when there is none), fixed here so that all its tasks and
    # tries share it; 0 in records of releases before 2026-11-29. ``key_hash``: the partitioner
    # (``_keyed``), copied from that commit likewise; "": Spark's; and its ``key_residues``.
    keyed_tasks: int = 0
    key_hash: str = ""
    key_residues: list[int] = field(default_factory=list)
    version: int = RECORD_VERSION
    key_runs_raw: list[int] = field(default_factory=list, repr=False, compare=False)  # as CommitRecord's

    def _residue_step(self) -> int:
        return self.keyed_tasks

    @property
    def reach_ms(self) -> int:
        """How far above an abandoned base a replay must start (``_attempts``)."""
        return self.span_ms or BATCH_SPAN_MS


@dataclass(frozen=True)
class TaskNote:
    """One try's note (``c:task-<base>-<partition>-<try>``); ``chunks`` None while it is written.

    ``<try>`` is ``s<slot>``, the put slot of its task's block the try claimed (:meth:`slot`,
    ``_writer``); the release before this one, without Thrift2, noted under a random token
    and put at slot 0. ``owner`` is the try's random token, stored in the value only: two
    tries that race for one slot write different bytes, so a retried ``checkAndPut`` can
    tell whose claim landed. ``block``: the timestamp block the try wrote in
    (``_timestamps.task_block``), recorded when the note is done (the task knows whether it
    is keyed once its input ended); a claim (version 2) has none yet.
    """

    base_ms: int
    partition: int
    token: str
    chunks: int | None = None
    keys: int = 0
    owner: str = ""
    block: int | None = None

    @property
    def slot(self) -> int:
        """The put slot this try wrote at: the claimed one, or 0 for an unclaimed token."""
        return int(self.token[1:]) if self.token[:1] == "s" and self.token[1:].isdigit() else 0

    @property
    def put_block(self) -> int:
        """The block of a done note's puts (``_attempts.check_formats`` refuses a done note without one)."""
        if self.block is None:
            raise ProtocolError(f"task note {self.column()!r} records no timestamp block")
        return self.block

    def column(self) -> bytes:
        return TASK_NOTE_PREFIX + b"%d-%d-%s" % (self.base_ms, self.partition, self.token.encode())

    def to_bytes(self) -> bytes:
        # Version 3 with a block: a build that reads only version 2 refuses the note rather
        # than remove versions at the timestamps of the older layout.
        data: dict[str, object] = {"chunks": self.chunks, "keys": self.keys,
                                   "version": RECORD_VERSION if self.block is None else NOTE_VERSION}
        if self.owner:
            data["owner"] = self.owner
        if self.block is not None:
            data["block"] = self.block
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    def chunk_row(self, sink_id: str, chunk: int) -> bytes:
        name = b"%s\x00%d-%d-%s-%d" % (sink_id.encode(), self.base_ms, self.partition, self.token.encode(), chunk)
        return _NOTE_ROW_PREFIX + b"%08x\x00" % zlib.crc32(name) + name

    @classmethod
    def from_cell(cls, column: bytes, raw: bytes) -> TaskNote:
        try:
            base, partition, token = column[len(TASK_NOTE_PREFIX):].decode().split("-")
            obj = parse_json(raw)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            block = obj.get("block")
            if obj.get("version") == NOTE_VERSION and isinstance(block, int) and block >= 0:
                pass
            elif "block" in obj:
                raise ValueError(f"block {block!r} in a note of version {obj.get('version')!r}")
            else:
                _check_version(obj, "task note")
            chunks, keys, owner = obj.get("chunks"), obj.get("keys", 0), obj.get("owner", "")
            if not (chunks is None or isinstance(chunks, int)) or not isinstance(keys, int):
                raise ValueError("chunks and keys must be integers")
            return cls(int(base), int(partition), token, chunks, keys, str(owner), block)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"task note {column!r} is malformed: {exc}") from exc


def write_note_chunks(conn: HBaseConnection, commit_table: str, sink_id: str, note: TaskNote,
                      keys: Iterable[bytes]) -> TaskNote:
    """Write ``keys`` into the note's chunk rows; the note with its chunk and key counts.

    Streams: one chunk in memory at a time, so a task of millions of keys notes them in
    ``NOTE_CHUNK_BYTES`` pieces. A chunk is the key count, every key's length (big-endian
    uint32) and the keys back to back: built a slice of keys at a time with C loops
    (``map``, ``array``, ``join``), the per-key cost a task pays once.
    """
    chunks = count = size = 0
    pending: list[bytes] = []
    lengths: list[int] = []

    def put() -> None:
        nonlocal chunks, count, size
        row = note.chunk_row(sink_id, chunks)
        value = _encode_keys(pending, lengths)
        with refusals(f"cannot write the note of sink {sink_id!r} into {commit_table!r}"):
            conn.call(lambda c: c.table(commit_table).put(row, {NOTE_KEYS_COLUMN: value}))
        chunks, count, size = chunks + 1, count + len(pending), 0
        pending.clear()
        lengths.clear()

    it = iter(keys)
    while part := list(itertools.islice(it, _NOTE_SLICE)):
        sizes = list(map(len, part))
        total = 4 * len(part) + sum(sizes)
        if size + total < NOTE_CHUNK_BYTES:
            pending.extend(part)
            lengths.extend(sizes)
            size += total
            continue
        for key, n in zip(part, sizes, strict=True):  # this slice crosses a chunk's end: key by key
            pending.append(key)
            lengths.append(n)
            size += 4 + n
            if size >= NOTE_CHUNK_BYTES:
                put()
    if pending:
        put()
    return replace(note, chunks=chunks, keys=count)


def _encode_keys(keys: list[bytes], lengths: list[int]) -> bytes:
    sizes = array.array("I", lengths)
    if sys.byteorder == "little":
        sizes.byteswap()
    return _LENGTH.pack(len(keys)) + sizes.tobytes() + b"".join(keys)


def _decode_keys(data: bytes) -> list[bytes]:
    (n,) = _LENGTH.unpack_from(data, 0)
    sizes = array.array("I")
    sizes.frombytes(data[4:4 + 4 * n])
    if sys.byteorder == "little":
        sizes.byteswap()
    keys, at = [], 4 + 4 * n
    for size in sizes:
        keys.append(data[at:at + size])
        at += size
    if at != len(data):
        raise ValueError(f"{len(data) - at} byte(s) past the last key")
    return keys


def read_note_keys(conn: HBaseConnection, commit_table: str, sink_id: str, note: TaskNote) -> Iterator[bytes]:
    """The keys a done note lists, chunk by chunk (one get each)."""
    for chunk in range(note.chunks or 0):
        row = note.chunk_row(sink_id, chunk)
        data = _note_chunk(conn, commit_table, sink_id, row)
        if data is None:
            raise ProtocolError(f"sink {sink_id!r}: chunk {chunk} of note {note.column()!r} is missing")
        try:
            yield from _decode_keys(data)
        except (ValueError, struct.error) as exc:
            raise ProtocolError(f"sink {sink_id!r}: chunk {chunk} of note {note.column()!r} is malformed: "
                                f"{exc}") from exc


def _note_chunk(conn: HBaseConnection, commit_table: str, sink_id: str, row: bytes) -> bytes | None:
    def get(c: Thrift1Connection) -> bytes | None:
        return c.table(commit_table).row(row, columns=[NOTE_KEYS_COLUMN]).get(NOTE_KEYS_COLUMN)

    with refusals(f"cannot read the note of sink {sink_id!r} from {commit_table!r}"):
        return conn.call(get)


@dataclass(frozen=True)
class SinkRow:
    """The whole sink row, read in one get: its state and every note in it."""

    state: SinkState
    notes: list[TaskNote]


def read_sink_row(conn: HBaseConnection, commit_table: str, sink_id: str) -> SinkRow:
    """The sink row's commit, attempt and notes (one get of the family; notes are a few
    dozen bytes each, O(tries) of the running batch and the last committed one)."""
    with refusals(f"cannot read sink {sink_id!r} from commit table {commit_table!r}"):
        row = conn.call(lambda c: c.table(commit_table).row(sink_id.encode(), columns=[COMMIT_FAMILY.encode()]))
    notes = [TaskNote.from_cell(k, v) for k, v in sorted(row.items()) if k.startswith(TASK_NOTE_PREFIX)]
    return SinkRow(SinkState(row.get(COMMIT_COLUMN), row.get(ATTEMPT_COLUMN)), notes)


def delete_task_notes(conn: HBaseConnection, commit_table: str, sink_id: str, notes: Iterable[TaskNote], *,
                      history: tuple[CommitRecord, bytes] | None = None) -> int:
    """Delete notes and their chunk rows (a note still being written: its chunks until one is missing).

    In the same ``mutateRows`` call (one round trip; rows apart, each row's mutations
    atomic): ``history``, a commit record and its bytes to keep in the history (the
    task that records an attempt does that, ``_committer._tidy``). A failure raises: the
    history copy may then be missing, which the driver's commit makes good.
    """
    notes = list(notes)
    rows: list[bytes] = []
    for note in notes:
        if note.chunks is not None:
            rows.extend(note.chunk_row(sink_id, i) for i in range(note.chunks))
            continue
        chunk = 0
        while True:
            row = note.chunk_row(sink_id, chunk)
            if _note_chunk(conn, commit_table, sink_id, row) is None:
                break
            rows.append(row)
            chunk += 1
    if not notes and history is None:
        return 0

    def drop(c: Thrift1Connection) -> None:
        from happybase.batch import BatchMutation, Mutation

        mutations = [BatchMutation(row=r, mutations=[Mutation(isDelete=True, column=NOTE_KEYS_COLUMN)]) for r in rows]
        dead = [n.column() for n in notes]
        if dead:
            mutations.append(BatchMutation(row=sink_id.encode(), mutations=[
                Mutation(isDelete=True, column=column) for column in dead]))
        if history is not None:
            record, raw = history
            mutations.append(BatchMutation(row=_history_key(record.sink_id, record.seq), mutations=[
                Mutation(isDelete=False, column=HISTORY_COLUMN, value=raw)]))
        c.client.mutateRows(commit_table.encode(), mutations, {})

    with refusals(f"cannot delete the notes of sink {sink_id!r} in {commit_table!r}"):
        conn.call(drop)
    return len(rows)


def _build(cls: type[_R], raw: bytes, what: str, fields: Mapping[str, str] | None = None) -> _R:
    """Parse and version-check one record; every malformed record is a ProtocolError.

    ``fields`` maps a wire key to the field it fills, where the two names differ."""
    try:
        obj = parse_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} is not a JSON object")
    _check_version(obj, what)
    try:
        return cls(**{(fields or {}).get(k, k): v for k, v in obj.items()})
    except TypeError as exc:
        raise ProtocolError(f"{what} has unexpected fields: {exc}") from exc


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

    def create(c: Thrift1Connection) -> None:
        if name.encode() in c.tables():
            return
        try:
            c.create_table(name, {COMMIT_FAMILY: {"max_versions": 10}})
        except SERVER_ERRORS as exc:
            if name.encode() not in c.tables():  # else another planner created it first
                raise refused(f"cannot create commit table {name!r}", exc) from exc

    conn.call(create)


def read_state(conn: HBaseConnection, commit_table: str, sink_id: str) -> SinkState:
    """The sink's commit and attempt in one get."""
    with refusals(f"cannot read sink {sink_id!r} from commit table {commit_table!r}"):
        row = conn.call(lambda c: c.table(commit_table).row(sink_id.encode(), columns=[COMMIT_COLUMN, ATTEMPT_COLUMN]))
    return SinkState(row.get(COMMIT_COLUMN), row.get(ATTEMPT_COLUMN))


def read_cell(conn: HBaseConnection, commit_table: str, sink_id: str, column: bytes) -> bytes | None:
    with refusals(f"cannot read {column.decode()} of sink {sink_id!r} from {commit_table!r}"):
        row = conn.call(lambda c: c.table(commit_table).row(sink_id.encode(), columns=[column]))
    return row.get(column)


def check_and_put(conn: HBaseConnection, commit_table: str, sink_id: str, column: bytes,
                  expected: bytes | None, value: bytes, *, check: bytes | None = None) -> bool:
    """Atomically set ``column`` to ``value`` iff ``check`` (default: ``column``) holds ``expected``.

    ``expected=None`` means "the cell must not exist". One row, one server-side lock:
    ``check`` may name another cell of the sink row (a try's note or the commit,
    conditional on ``c:attempt``). After a transport retry the
    first try may have landed, so a False answer of a retry is re-checked: the cell
    already holding ``value`` counts as success (the write is idempotent by content). A
    False answer to the only try is the server's and final: no read (a task that loses
    the race to record a batch's attempt reads the row once, in its next round).
    """
    tries = 0

    def cap(c: Thrift1Connection) -> bool:
        nonlocal tries
        tries += 1
        mutation = _mutation(column, value)
        return bool(c.client.checkAndPut(commit_table.encode(), sink_id.encode(), check or column,
                                         expected, mutation, {}))

    with refusals(f"checkAndPut on {commit_table!r} row {sink_id!r} failed"):
        if conn.call(cap):
            return True
    return tries > 1 and read_cell(conn, commit_table, sink_id, column) == value


def raise_plan_epoch(conn: HBaseConnection, commit_table: str) -> int:
    """Raise and return the commit table's plan counter (driver, once per planned batch).

    HBase's atomic increment: every call returns a number above every number returned
    before it, whatever the clocks say. A transport retry may skip a number; nothing
    needs them consecutive.
    """
    with refusals(f"cannot raise the plan counter in {commit_table!r}"):
        return int(conn.call(lambda c: c.table(commit_table).counter_inc(PLAN_COUNTER_ROW, PLAN_COUNTER_COLUMN)))


def put_cell(conn: HBaseConnection, commit_table: str, sink_id: str, column: bytes, value: bytes) -> None:
    conn.call(lambda c: c.table(commit_table).put(sink_id.encode(), {column: value}))


def list_sinks(conn: HBaseConnection, commit_table: str) -> list[CommitRecord]:
    """Every sink's last commit record (the committed-view reader picks one)."""
    rows = conn.call(lambda c: list(c.table(commit_table).scan(columns=[COMMIT_COLUMN])))
    return [CommitRecord.from_bytes(data[COMMIT_COLUMN]) for _key, data in rows if COMMIT_COLUMN in data]


def _history_key(sink_id: str, seq: int) -> bytes:
    return sink_id.encode() + _HISTORY_SEP + b"%020d" % seq


def put_history(conn: HBaseConnection, commit_table: str, record: CommitRecord, raw: bytes | None = None) -> None:
    """Keep ``record`` in the sink's history (idempotent: same key, same bytes).

    ``raw``: the record's bytes as read from ``c:commit``, copied as they are (a record an
    earlier build wrote may not serialize back byte for byte).
    """
    key = _history_key(record.sink_id, record.seq)
    value = raw if raw is not None else record.to_bytes()
    with refusals(f"cannot keep commit {record.seq} of sink {record.sink_id!r} in the history in {commit_table!r}"):
        conn.call(lambda c: c.table(commit_table).put(key, {HISTORY_COLUMN: value}))


def prune_history(conn: HBaseConnection, commit_table: str, sink_id: str, *, keep_above: int) -> int:
    """Delete the history rows of sequences up to ``keep_above`` (``commit.history.retain``).

    One scan of row keys from the sink's first history row to the first one kept (in
    steady state one row: the one that just fell out), one delete each.
    """
    start = sink_id.encode() + _HISTORY_SEP
    stop = _history_key(sink_id, keep_above + 1)

    def drop(c: Thrift1Connection) -> int:
        table = c.table(commit_table)
        keys = [k for k, _ in table.scan(row_start=start, row_stop=stop, columns=[HISTORY_COLUMN])]
        for key in keys:
            table.delete(key, columns=[HISTORY_COLUMN])
        return len(keys)

    with refusals(f"cannot prune the history of sink {sink_id!r} in {commit_table!r}"):
        return conn.call(drop)


def read_history(conn: HBaseConnection, commit_table: str, sink_id: str) -> list[CommitRecord]:
    """The sink's commit records, oldest first: its history rows and its newest, ``c:commit``.

    One scan from the sink row to the end of its history rows (``<sink.id>`` sorts just
    before ``<sink.id>\\x00...``, and ``<sink.id>\\x01`` just after them).
    """
    start = sink_id.encode()
    stop = start + bytes([_HISTORY_SEP[0] + 1])
    with refusals(f"cannot read the history of sink {sink_id!r} from {commit_table!r}"):
        rows = conn.call(lambda c: list(c.table(commit_table).scan(row_start=start, row_stop=stop,
                                                                   columns=[COMMIT_COLUMN, HISTORY_COLUMN])))
    by_seq: dict[int, CommitRecord] = {}
    for key, data in rows:  # the sink row first: its c:commit wins over a copy with its sequence
        raw = data.get(COMMIT_COLUMN) if key == start else data.get(HISTORY_COLUMN)
        if raw is not None:
            record = CommitRecord.from_bytes(raw)
            by_seq.setdefault(record.seq, record)
    return [by_seq[seq] for seq in sorted(by_seq)]


def _mutation(column: bytes, value: bytes) -> object:  # happybase's generated Mutation
    from happybase.batch import Mutation

    return Mutation(isDelete=False, column=column, value=value, writeToWAL=True)
