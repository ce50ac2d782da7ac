"""Where each data column goes in HBase.

Built once from the Spark schema (driver, query start: every problem is a
:class:`ConfigError` there) and again on executors from the Arrow schema. The table
holds only the mapped data columns: deletes are real HBase delete markers (see
``_buffer``), so no bookkeeping qualifier ever lands in a data table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ...._exceptions import ConfigError
from ._encoding import SUPPORTED_TYPES_TEXT, is_supported

__all__ = ["ColumnTarget", "SinkLayout", "data_field_names"]

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


@dataclass(frozen=True)
class SinkLayout:
    rowkey: str
    op_column: str | None
    targets: tuple[ColumnTarget, ...]
    default_family: bytes

    @property
    def families(self) -> tuple[bytes, ...]:
        """The families the sink writes: the mapped ones (the default one for a key-only stream)."""
        return tuple(dict.fromkeys(t.family for t in self.targets)) or (self.default_family,)

    @property
    def delete_columns(self) -> tuple[bytes, ...]:
        """What a row delete clears: this sink's own columns, never another writer's in the same family.

        A key-only stream has no columns of its own: its deletes clear the default family.
        """
        return tuple(t.column for t in self.targets) or (self.default_family,)

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
            targets.append(ColumnTarget(name, family.encode(), qualifier.encode()))
        columns = [t.column for t in targets]
        if len(columns) != len(set(columns)):
            raise ConfigError("two data columns map to the same family:qualifier", option="columns")
        return cls(rowkey, op_column, tuple(targets), default_family.encode())
