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
from .._codec import SUPPORTED_TYPES_TEXT, is_supported

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
        """The families the sink writes (every mapped column's)."""
        return tuple(dict.fromkeys(t.family for t in self.targets))

    @property
    def delete_columns(self) -> tuple[bytes, ...]:
        """What a row delete clears: this sink's own columns, never another writer's in the same family.

        :meth:`build` refuses a stream with no column of its own, so this is never empty:
        a delete that cleared a family would remove other writers' cells of that row.
        """
        return tuple(t.column for t in self.targets)

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
        if not targets:
            # A key-only stream owns no cell: a row delete could only clear a whole family
            # (other writers' cells too) and an upsert would write nothing at all.
            raise ConfigError(
                f"the stream has only the row key {rowkey!r}"
                + (f" and the op column {op_column!r}" if op_column else "")
                + "; barrier-hbase writes and deletes only cells of its own columns, and a key-only row has "
                "none (its delete would clear other writers' cells of the row, its upsert would write "
                "nothing). Add a value column, for example .withColumn(\"present\", F.lit(True)), so that "
                "an upsert writes that cell and a delete removes it", option="rowkey")
        columns = [t.column for t in targets]
        if len(columns) != len(set(columns)):
            raise ConfigError("two data columns map to the same family:qualifier", option="columns")
        return cls(rowkey, op_column, tuple(targets), default_family.encode())
