"""Cell value codec: one Spark/Arrow type ↔ HBase bytes, whole columns at a time (sink and readers).

The byte forms follow HBase's ``Bytes.toBytes`` so Java readers (and Flink's HBase
connector) decode the same cells:

=====================  ===========================================================
Spark type             cell bytes
=====================  ===========================================================
binary                 as is
string                 UTF-8
boolean                1 byte: ``0xFF`` true, ``0x00`` false
tinyint/smallint/int/  big-endian two's complement, 1/2/4/8 bytes
bigint
float / double         IEEE 754 big-endian, 4 / 8 bytes
decimal(p, s)          4-byte big-endian scale + unscaled value as minimal big-endian
                       two's complement (``Bytes.toBytes(BigDecimal)``)
date                   int32 days since 1970-01-01, 4 bytes big-endian
timestamp / ntz        int64 microseconds since the epoch (UTC), 8 bytes big-endian
=====================  ===========================================================

Encoding is vectorised (numpy byte-swap over the whole column); only decimals go
through Python per value. Decoding returns an Arrow array of the original type; a cell
that is not in this codec's form (written by another client, or under another schema)
raises :class:`~sparkbarrier.SinkError` naming the column, never a bare ``ValueError``,
because it reaches ``read_committed`` users.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..._exceptions import ConfigError, SinkError

__all__ = ["SUPPORTED_TYPES_TEXT", "decode_column", "encode_column", "is_supported"]

SUPPORTED_TYPES_TEXT = (
    "binary, string, boolean, tinyint, smallint, int, bigint, float, double, decimal, "
    "date, timestamp, timestamp_ntz"
)

_INT_DTYPES: dict[pa.DataType, str] = {
    pa.int8(): ">i1",
    pa.int16(): ">i2",
    pa.int32(): ">i4",
    pa.int64(): ">i8",
    pa.float32(): ">f4",
    pa.float64(): ">f8",
}


def _fixed(arr: pa.Array, as_type: pa.DataType, dtype: str) -> list[bytes | None]:
    """Big-endian cells of a fixed-width column, read from its data buffer.

    Not ``to_numpy``/``fill_null(0)``: those go through pyarrow's pandas shim, which
    imports pandas into the Python worker on its first batch (0.2 s quiet, 1.5-2 s while
    a first micro-batch starts its workers at once). A null slot's bytes are whatever
    the buffer holds; the validity bitmap makes it None.
    """
    width = np.dtype(dtype).itemsize
    values = arr.cast(as_type) if arr.type != as_type else arr
    native = np.frombuffer(values.buffers()[1], dtype=dtype[1:], count=values.offset + len(values))
    data = native[values.offset:].astype(dtype, copy=False).tobytes()
    validity = pc.is_valid(arr).buffers()[1] if arr.null_count else None
    fsb = pa.Array.from_buffers(pa.binary(width), len(arr), [validity, pa.py_buffer(data)])
    return cast("list[bytes | None]", fsb.to_pylist())  # pyarrow: untyped


def _decimal_bytes(value: decimal.Decimal | None, scale: int) -> bytes | None:
    if value is None:
        return None
    unscaled = int(value.scaleb(scale))
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return scale.to_bytes(4, "big", signed=True) + unscaled.to_bytes(length, "big", signed=True)


def is_supported(typ: pa.DataType) -> bool:
    return (
        typ in _INT_DTYPES
        or pa.types.is_string(typ) or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
        or pa.types.is_boolean(typ) or pa.types.is_decimal(typ)
        or pa.types.is_date32(typ) or pa.types.is_timestamp(typ)
    )


def encode_column(arr: pa.Array) -> list[bytes | None]:
    """Cell bytes for every value of ``arr`` (None where the value is null)."""
    typ = arr.type
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return cast("list[bytes | None]", arr.to_pylist())  # pyarrow: untyped
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        target = pa.large_binary() if pa.types.is_large_string(typ) else pa.binary()
        return cast("list[bytes | None]", arr.cast(target).to_pylist())
    if typ in _INT_DTYPES:
        return _fixed(arr, typ, _INT_DTYPES[typ])
    if pa.types.is_boolean(typ):
        as_u8 = pc.if_else(arr, pa.scalar(255, pa.uint8()), pa.scalar(0, pa.uint8()))
        return _fixed(as_u8, pa.uint8(), ">u1")
    if pa.types.is_date32(typ):
        return _fixed(arr, pa.int32(), ">i4")
    if pa.types.is_timestamp(typ):
        micros = arr.cast(pa.timestamp("us", typ.tz)) if typ.unit != "us" else arr
        return _fixed(micros, pa.int64(), ">i8")
    if pa.types.is_decimal(typ):
        return [_decimal_bytes(v, typ.scale) for v in arr.to_pylist()]
    raise ConfigError(f"column type {typ} cannot be written to HBase; supported: {SUPPORTED_TYPES_TEXT}")


class _BadCell(ValueError):
    """A cell not in this codec's form; :func:`decode_column` turns it into SinkError."""


def _decode_fixed(cells: Sequence[bytes | None], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    width = np.dtype(dtype).itemsize
    mask = np.array([c is None for c in cells], dtype=bool)
    pad = b"\x00" * width
    bad = next((c for c in cells if c is not None and len(c) != width), None)
    if bad is not None:
        raise _BadCell(f"a cell is {len(bad)} bytes wide, not {width}")
    joined = b"".join(pad if c is None else c for c in cells)
    values = np.frombuffer(joined, dtype=dtype).astype(dtype[1:] if dtype[0] == ">" else dtype)
    return values, mask


def decode_column(cells: Sequence[bytes | None], typ: pa.DataType,
                  column: str | None = None) -> pa.Array:
    """Inverse of :func:`encode_column`: an Arrow array of type ``typ``.

    Raises SinkError (``column`` named in the message) for a cell that is not in the
    form :func:`encode_column` writes; ConfigError for a type the codec does not know.
    """
    try:
        return _decode(cells, typ)
    except (ValueError, pa.ArrowException) as exc:  # _BadCell, bad UTF-8, decimal overflow
        if isinstance(exc, ConfigError):
            raise
        where = f"column {column!r}" if column else "a column"
        raise SinkError(f"cannot decode {where} as {typ}: {exc}; were its cells written by "
                        "this sink with the schema in the commit record?") from exc


def _decode(cells: Sequence[bytes | None], typ: pa.DataType) -> pa.Array:
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return pa.array(list(cells), type=typ)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return pa.array([None if c is None else c.decode("utf-8") for c in cells], type=typ)
    if typ in _INT_DTYPES:
        values, mask = _decode_fixed(cells, _INT_DTYPES[typ])
        return pa.array(values, type=typ, mask=mask)
    if pa.types.is_boolean(typ):
        values, mask = _decode_fixed(cells, ">u1")
        return pa.array(values != 0, type=typ, mask=mask)
    if pa.types.is_date32(typ):
        values, mask = _decode_fixed(cells, ">i4")
        return pa.array(values, type=pa.int32(), mask=mask).cast(typ)
    if pa.types.is_timestamp(typ):
        values, mask = _decode_fixed(cells, ">i8")
        return pa.array(values, type=pa.int64(), mask=mask).cast(pa.timestamp("us", typ.tz)).cast(typ)
    if pa.types.is_decimal(typ):
        out: list[decimal.Decimal | None] = []
        for c in cells:
            if c is None:
                out.append(None)
                continue
            scale = int.from_bytes(c[:4], "big", signed=True)
            unscaled = int.from_bytes(c[4:], "big", signed=True)
            out.append(decimal.Decimal(unscaled).scaleb(-scale))
        return pa.array(out, type=typ)
    raise ConfigError(f"column type {typ} cannot be read from HBase; supported: {SUPPORTED_TYPES_TEXT}")
