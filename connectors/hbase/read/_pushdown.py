"""Spark filters on the row key → row-key ranges for the scans (driver, planning).

Pushed: ``=``, ``IN``, ``<``, ``<=``, ``>``, ``>=`` and ``startswith`` on a string or
binary row-key column (see ``_key_ranges`` for why only those types). A pushed filter
is answered exactly by the ranges, so Spark does not evaluate it again; every other
filter is returned to Spark unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._key_ranges import FULL, KeyRange, after, intersect, point, prefix

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter
    from pyspark.sql.types import DataType


__all__ = ["rowkey_ranges"]


def _key_bytes(value: object, key_type: DataType | None) -> bytes | None:
    from pyspark.sql.types import BinaryType, StringType

    if isinstance(key_type, StringType) and isinstance(value, str):
        return value.encode()
    if isinstance(key_type, BinaryType) and isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return None


def _ranges_of(f: Filter, key_type: DataType | None) -> list[KeyRange] | None:
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
        StringStartsWith,
    )

    if not hasattr(f, "value"):
        return None
    if isinstance(f, In):
        keys = [_key_bytes(v, key_type) for v in f.value]
        return None if any(k is None for k in keys) else sorted({point(k) for k in keys if k is not None})
    key = _key_bytes(f.value, key_type)
    if key is None:
        return None
    if isinstance(f, EqualTo):
        return [point(key)]
    if isinstance(f, StringStartsWith):
        return [prefix(key)]
    if isinstance(f, GreaterThan):
        return [(after(key), b"")]
    if isinstance(f, GreaterThanOrEqual):
        return [(key, b"")]
    if isinstance(f, LessThan):
        return [(b"", key)] if key else []
    if isinstance(f, LessThanOrEqual):
        return [(b"", after(key))]
    return None


def rowkey_ranges(filters: Sequence[Filter], rowkey: str,
                  key_type: DataType | None) -> tuple[list[KeyRange], list[Filter]]:
    """The key ranges the filters on ``rowkey`` allow, and the filters Spark must still apply."""
    ranges: list[KeyRange] = [FULL]
    rest: list[Filter] = []
    for f in filters:
        allowed = _ranges_of(f, key_type) if getattr(f, "attribute", None) == (rowkey,) else None
        if allowed is None:
            rest.append(f)
        else:
            ranges = intersect(ranges, allowed)
    return ranges, rest
