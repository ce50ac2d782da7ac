"""Where each data column goes in HBase, and the reserved tombstone qualifiers.

Built once from the Spark schema (driver, query start: every problem is a
:class:`ConfigError` there) and again on executors from the Arrow schema.

Deletes are written as *tombstone cells* rather than HBase delete markers, because a
time-range read still applies delete markers newer than its range (HBase's user scan
matcher keeps markers "within or after" the range), so an uncommitted real delete
would hide committed data and could not be undone by abort. Tombstones are ordinary
puts, invisible to a read bounded at the last committed timestamp:

* ``<family>:_sb_deleted`` -- the row was deleted at this cell's timestamp: every cell
  of that family with a smaller timestamp is gone.
* ``<family>:_sb_deleted:<qualifier>`` -- the cell was deleted (a null written with
  ``sink.ignore-null-value=false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..._exceptions import ConfigError
from ._encoding import SUPPORTED_TYPES_TEXT, is_supported

__all__ = ["ROW_TOMBSTONE", "CELL_TOMBSTONE_PREFIX", "ColumnTarget", "SinkLayout", "data_field_names"]

ROW_TOMBSTONE = b"_sb_deleted"
CELL_TOMBSTONE_PREFIX = b"_sb_deleted:"

_MARKER_PREFIX = "_barrier_"


def data_field_names(names: Sequence[str]) -> list[str]:
    return [n for n in names if not n.startswith(_MARKER_PREFIX)]


@dataclass(frozen=True)
class ColumnTarget:
    name: str
    family: bytes
    qualifier: bytes

    @property
    def column(self) -> bytes:
        return self.family + b":" + self.qualifier

    @property
    def tombstone(self) -> bytes:
        return self.family + b":" + CELL_TOMBSTONE_PREFIX + self.qualifier


@dataclass(frozen=True)
class SinkLayout:
    rowkey: str
    op_column: str | None
    targets: tuple[ColumnTarget, ...]
    default_family: bytes

    @property
    def families(self) -> tuple[bytes, ...]:
        """Families a delete clears: the mapped ones (the default one for a key-only stream)."""
        return tuple(dict.fromkeys(t.family for t in self.targets)) or (self.default_family,)

    @property
    def row_tombstones(self) -> tuple[bytes, ...]:
        return tuple(f + b":" + ROW_TOMBSTONE for f in self.families)

    @classmethod
    def build(cls, schema: pa.Schema, *, rowkey: str, op_column: str | None, default_family: str,
              mapping: dict[str, tuple[str, str]]) -> SinkLayout:
        """Validate ``schema`` (marker columns ignored) against the options."""
        names = data_field_names(schema.names)
        if rowkey not in names:
            raise ConfigError(
                f"option 'rowkey' names column {rowkey!r}, which the stream does not have; "
                f"columns: {', '.join(names)}", option="rowkey")
        if op_column is not None:
            if op_column not in names:
                raise ConfigError(f"option 'op.column' names column {op_column!r}, which the "
                                  f"stream does not have; columns: {', '.join(names)}", option="op.column")
            if not pa.types.is_string(schema.field(op_column).type):
                raise ConfigError("option 'op.column' must name a string column", option="op.column")
        unknown = sorted(set(mapping) - set(names))
        if unknown:
            raise ConfigError(f"option 'columns' maps unknown column(s) {unknown}", option="columns")
        targets: list[ColumnTarget] = []
        for name in names:
            typ = schema.field(name).type
            if not is_supported(typ):
                raise ConfigError(
                    f"column {name!r} has type {typ}, which cannot be written to HBase; "
                    f"supported: {SUPPORTED_TYPES_TEXT}", option="columns")
            if name in (rowkey, op_column):
                continue
            family, qualifier = mapping.get(name, (default_family, name))
            if qualifier.encode().startswith(ROW_TOMBSTONE):
                raise ConfigError(f"qualifier {qualifier!r} starts with the reserved prefix "
                                  f"{ROW_TOMBSTONE.decode()!r}", option="columns")
            targets.append(ColumnTarget(name, family.encode(), qualifier.encode()))
        columns = [t.column for t in targets]
        if len(columns) != len(set(columns)):
            raise ConfigError("two data columns map to the same family:qualifier", option="columns")
        return cls(rowkey, op_column, tuple(targets), default_family.encode())
