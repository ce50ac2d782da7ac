"""Checkpoint markers and how they ride in an Arrow record stream.

A marker travels as one extra *row* among data rows. Every batch that can carry
markers ends with the marker columns below; on a data row all of them are null,
on a marker row ``_barrier_kind`` is set and the data columns are null. So a
consumer finds markers with one vectorised ``is_valid`` over ``_barrier_kind``
and slices the batch at those positions -- never a Python loop over rows.

Column layout (version 1), appended after the data columns:

==========================  ========  =============================================
column                      type      meaning on a marker row
==========================  ========  =============================================
``_barrier_kind``           string    ``barrier`` | ``cancel`` | ``end_of_partition``
``_barrier_version``        int32     layout version; unknown versions are rejected
``_barrier_checkpoint_id``  int64     checkpoint id (null for end_of_partition)
``_barrier_timestamp_ms``   int64     checkpoint timestamp fixed at planning
``_barrier_channel``        string    channel the marker closes, e.g. ``topic:3``
``_barrier_next_offset``    int64     next offset to read on that channel
==========================  ========  =============================================

Required on a marker row: ``_barrier_kind``, ``_barrier_version``, and per kind
``_barrier_checkpoint_id`` + ``_barrier_timestamp_ms`` (barrier),
``_barrier_checkpoint_id`` (cancel), ``_barrier_channel`` (end_of_partition).
A row missing one, or with a value of the wrong type, is a
:class:`~sparkbarrier.ProtocolError` naming the field: a corrupt marker must stop
the stream with a protocol error, never a bare ``TypeError`` from a connector.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal, TypeVar, overload

from .._exceptions import ProtocolError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MARKER_COLUMNS",
    "MARKER_DDL",
    "MARKER_FIELDS",
    "MARKER_KIND_COLUMN",
    "MARKER_VERSION",
    "CancelCheckpointMarker",
    "CheckpointBarrier",
    "EndOfPartition",
    "Marker",
    "MarkerKind",
    "has_marker_columns",
    "marker_batch",
    "split_markers",
    "with_marker_columns",
]

MARKER_VERSION = 1

# (name, Spark SQL DDL type) of every marker column, in order. Plain data, so that the
# column names and the DDL (what the sources' schemas need) load without pyarrow: Spark's
# planning workers import the sources to look them up and create them, and pyarrow with
# numpy is most of their import time (~0.35 s of each new worker, measured 2026-11-28).
# The Arrow fields (``MARKER_FIELDS``) are built from this table on first use.
_MARKER_COLUMN_TYPES: tuple[tuple[str, str], ...] = (
    ("_barrier_kind", "string"),
    ("_barrier_version", "int"),
    ("_barrier_checkpoint_id", "bigint"),
    ("_barrier_timestamp_ms", "bigint"),
    ("_barrier_channel", "string"),
    ("_barrier_next_offset", "bigint"),
)
MARKER_COLUMNS: tuple[str, ...] = tuple(name for name, _ in _MARKER_COLUMN_TYPES)
MARKER_KIND_COLUMN = MARKER_COLUMNS[0]  # not null exactly on marker rows
MARKER_DDL = ", ".join(f"{name} {ddl}" for name, ddl in _MARKER_COLUMN_TYPES)


@cache
def _marker_fields() -> tuple[pa.Field, ...]:
    """The marker columns as Arrow fields (a DDL type missing here fails at once)."""
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64()}
    return tuple(pa.field(name, types[ddl]) for name, ddl in _MARKER_COLUMN_TYPES)


def __getattr__(name: str) -> object:  # PEP 562: MARKER_FIELDS, built on first use
    if name == "MARKER_FIELDS":
        return _marker_fields()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    MARKER_FIELDS: tuple[pa.Field, ...]


class MarkerKind(str, enum.Enum):
    BARRIER = "barrier"
    CANCEL = "cancel"
    END_OF_PARTITION = "end_of_partition"


@dataclass(frozen=True)
class CheckpointBarrier:
    """Everything before it on ``channel`` belongs to checkpoint ``checkpoint_id``."""

    checkpoint_id: int
    timestamp_ms: int
    channel: str | None = None
    next_offset: int | None = None

    kind = MarkerKind.BARRIER


@dataclass(frozen=True)
class CancelCheckpointMarker:
    """The checkpoint was abandoned upstream; do not wait for its barriers."""

    checkpoint_id: int
    channel: str | None = None

    kind = MarkerKind.CANCEL


@dataclass(frozen=True)
class EndOfPartition:
    """The channel will deliver nothing more."""

    channel: str

    kind = MarkerKind.END_OF_PARTITION


Marker = CheckpointBarrier | CancelCheckpointMarker | EndOfPartition


def has_marker_columns(schema: pa.Schema) -> bool:
    return all(name in schema.names for name in MARKER_COLUMNS)


def with_marker_columns(data_schema: pa.Schema) -> pa.Schema:
    """The stream schema: the data columns followed by the marker columns."""
    import pyarrow as pa

    clash = [name for name in MARKER_COLUMNS if name in data_schema.names]
    if clash:
        raise ProtocolError(f"data schema already has marker column(s) {clash}")
    return pa.schema(list(data_schema) + list(_marker_fields()))


def marker_batch(markers: Sequence[Marker], schema: pa.Schema) -> pa.RecordBatch:
    """Rows that carry ``markers`` under the stream ``schema`` (data columns null)."""
    import pyarrow as pa

    n = len(markers)
    columns: dict[str, list[object]] = {
        "_barrier_kind": [m.kind.value for m in markers],
        "_barrier_version": [MARKER_VERSION] * n,
        "_barrier_checkpoint_id": [getattr(m, "checkpoint_id", None) for m in markers],
        "_barrier_timestamp_ms": [getattr(m, "timestamp_ms", None) for m in markers],
        "_barrier_channel": [m.channel for m in markers],
        "_barrier_next_offset": [getattr(m, "next_offset", None) for m in markers],
    }
    arrays = [
        pa.array(columns[f.name], type=f.type) if f.name in columns else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_T = TypeVar("_T")


@overload
def _field(row: dict[str, object], name: str, kind: object, want: type[_T], *, required: Literal[True]) -> _T: ...


@overload
def _field(row: dict[str, object], name: str, kind: object, want: type[_T], *,
           required: Literal[False]) -> _T | None: ...


def _field(row: dict[str, object], name: str, kind: object, want: type[_T], *, required: bool) -> _T | None:
    """``row[name]`` checked against ``want``; a ProtocolError naming the field otherwise.

    Arrow's column types already guarantee most of this for streams built with
    :func:`with_marker_columns`, but a marker row can come from any producer (a
    Spark plan, another build, a hand-made batch). A null or mistyped field would
    otherwise surface as a bare ``TypeError``/``ValueError`` deep in a connector,
    far from the row that caused it.
    """
    value = row[name]
    if value is None:
        if required:
            raise ProtocolError(f"{kind} marker row has a null {name}; the field is required for this kind")
        return None
    if not isinstance(value, want) or isinstance(value, bool):
        raise ProtocolError(
            f"{kind} marker row has {name}={value!r} ({type(value).__name__}); expected {want.__name__}"
        )
    return value


def _decode(row: dict[str, object]) -> Marker:
    """One marker row -> its marker; every malformed row is a :class:`ProtocolError`."""
    version = row["_barrier_version"]
    if version != MARKER_VERSION:
        raise ProtocolError(
            f"marker layout version {version!r} (field _barrier_version) is not supported (this "
            f"build reads version {MARKER_VERSION}); upgrade sparkbarrier on the reading side"
        )
    kind = row["_barrier_kind"]
    if kind == MarkerKind.BARRIER.value:
        return CheckpointBarrier(
            _field(row, "_barrier_checkpoint_id", kind, int, required=True),
            _field(row, "_barrier_timestamp_ms", kind, int, required=True),
            _field(row, "_barrier_channel", kind, str, required=False),
            _field(row, "_barrier_next_offset", kind, int, required=False),
        )
    if kind == MarkerKind.CANCEL.value:
        return CancelCheckpointMarker(
            _field(row, "_barrier_checkpoint_id", kind, int, required=True),
            _field(row, "_barrier_channel", kind, str, required=False),
        )
    if kind == MarkerKind.END_OF_PARTITION.value:
        # The channel is the only content of an EndOfPartition; without it the row says nothing.
        return EndOfPartition(_field(row, "_barrier_channel", kind, str, required=True))
    raise ProtocolError(f"unknown marker kind {kind!r} in field _barrier_kind")


def split_markers(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch | Marker]:
    """Yield data slices (marker columns dropped) and decoded markers, in stream order.

    Slicing is zero-copy; only marker rows are converted to Python objects, all
    of a batch's marker rows in one ``take`` + ``to_pydict``.
    """
    import pyarrow.compute as pc

    kind_idx = batch.schema.get_field_index("_barrier_kind")
    data_cols = [i for i, name in enumerate(batch.schema.names) if name not in MARKER_COLUMNS]
    data = batch.select(data_cols)
    if kind_idx < 0:
        if batch.num_rows:
            yield data
        return
    kinds = batch.column(kind_idx)
    if kinds.null_count == len(kinds):  # no marker rows: the common case
        if batch.num_rows:
            yield data
        return
    missing = [name for name in MARKER_COLUMNS if name not in batch.schema.names]
    if missing:
        # Marker rows are present but cannot be decoded; name what is absent.
        raise ProtocolError(f"batch has marker rows but lacks marker column(s) {missing}")
    positions_arr = pc.indices_nonzero(pc.is_valid(kinds))
    positions = positions_arr.to_pylist()
    columns = batch.select(list(MARKER_COLUMNS)).take(positions_arr).to_pydict()
    start = 0
    for i, pos in enumerate(positions):
        if pos > start:
            yield data.slice(start, pos - start)
        yield _decode({name: columns[name][i] for name in MARKER_COLUMNS})
        start = pos + 1
    if start < batch.num_rows:
        yield data.slice(start)
