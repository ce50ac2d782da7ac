"""Row-key ranges: what a scan must cover, from pushed-down filters and region boundaries.

Pure functions over ``bytes`` (no client import) so planning is unit-tested without
servers. A range is ``(start, stop)`` with ``start`` inclusive and ``stop`` exclusive;
``b""`` as ``stop`` means "to the end of the table", as in HBase's scan API.

Only filters on a string or binary row key are pushed: their Spark order equals the
unsigned byte order HBase sorts row keys in (UTF-8 preserves code point order). Numeric
keys are stored big-endian two's complement, where negative numbers sort after
positive ones, so a range on them is left to Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["FULL", "KeyRange", "after", "intersect", "point", "prefix", "split_by_regions"]

KeyRange = tuple[bytes, bytes]
FULL: KeyRange = (b"", b"")


def after(key: bytes) -> bytes:
    """The smallest key greater than ``key``."""
    return key + b"\x00"


def point(key: bytes) -> KeyRange:
    return (key, after(key))


def prefix(p: bytes) -> KeyRange:
    """All keys starting with ``p``."""
    stripped = p.rstrip(b"\xff")
    if not stripped:
        return (p, b"")
    return (p, stripped[:-1] + bytes([stripped[-1] + 1]))


def _stop_le(a: bytes, b: bytes) -> bool:
    """``a <= b`` for stops, where ``b""`` is +infinity."""
    if not b:
        return True
    return bool(a) and a <= b


def _one(a: KeyRange, b: KeyRange) -> KeyRange | None:
    start = max(a[0], b[0])
    stop = a[1] if _stop_le(a[1], b[1]) else b[1]
    if stop and start >= stop:
        return None
    return (start, stop)


def intersect(a: Sequence[KeyRange], b: Sequence[KeyRange]) -> list[KeyRange]:
    """Ranges in both sets (each set a union of ranges)."""
    out = [r for x in a for y in b if (r := _one(x, y)) is not None]
    return sorted(set(out))


def split_by_regions(ranges: Iterable[KeyRange], regions: Sequence[KeyRange]) -> list[KeyRange]:
    """Cut ``ranges`` at region boundaries: one scan per (range, region) overlap."""
    return intersect(list(ranges), list(regions) or [FULL])
