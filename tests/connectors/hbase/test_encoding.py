"""Cell codec round trips, and the HBase ``Bytes.toBytes`` byte forms."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkbarrier.connectors.hbase._codec import decode_column, encode_column

CASES = [
    pa.array([1, None, -3], pa.int64()),
    pa.array([1, None, -128], pa.int8()),
    pa.array([7, None], pa.int16()),
    pa.array([2**31 - 1, None], pa.int32()),
    pa.array([1.5, None, float("inf")], pa.float32()),
    pa.array([0.1, None], pa.float64()),
    pa.array([True, None, False]),
    pa.array(["a", None, "é"]),
    pa.array([b"\x00\xff", None], pa.binary()),
    pa.array([decimal.Decimal("-1.25"), None, decimal.Decimal("128.00")], pa.decimal128(10, 2)),
    pa.array([datetime.date(2020, 1, 1), None], pa.date32()),
    pa.array([datetime.datetime(2020, 1, 1, 1, 2, 3, 4), None], pa.timestamp("us", tz="UTC")),
    pa.array([datetime.datetime(1969, 12, 31, 23, 59), None], pa.timestamp("us")),
]


@pytest.mark.parametrize("arr", CASES, ids=lambda a: str(a.type))
def test_round_trip_keeps_type_and_nulls(arr: pa.Array) -> None:
    assert decode_column(encode_column(arr), arr.type).equals(arr)


def test_byte_forms_match_hbase_bytes_to_bytes() -> None:
    assert encode_column(pa.array([1], pa.int32())) == [b"\x00\x00\x00\x01"]
    assert encode_column(pa.array([-1], pa.int64())) == [b"\xff" * 8]
    assert encode_column(pa.array([True, False])) == [b"\xff", b"\x00"]
    assert encode_column(pa.array([decimal.Decimal("-1.25")], pa.decimal128(5, 2))) == [b"\x00\x00\x00\x02\x83"]


@given(st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=50))
def test_int64_round_trip_any_values(values: list) -> None:
    arr = pa.array(values, pa.int64())
    assert decode_column(encode_column(arr), pa.int64()).equals(arr)


def test_sliced_arrays_encode_their_own_nulls() -> None:
    arr = pa.array([None, 1, None, 2], pa.int64()).slice(1, 3)
    assert encode_column(arr) == [b"\x00" * 7 + b"\x01", None, b"\x00" * 7 + b"\x02"]


@pytest.mark.parametrize("cells,typ", [
    ([b"\x00\x01", b"\x00\x00\x00\x00\x00\x00\x00\x01"], pa.int64()),  # a short cell
    ([b"\x00\x00\x00", b"\x00\x00\x00\x00\x00"], pa.int32()),  # widths that add up
    ([b"\xff\xfe"], pa.string()),  # not UTF-8
    ([b"\x00\x00\x00\x00" + b"\x7f" * 20], pa.decimal128(5, 0)),  # beyond the precision
])
def test_undecodable_cell_is_a_sink_error_naming_the_column(cells, typ) -> None:
    from sparkbarrier import SinkError

    with pytest.raises(SinkError, match="column 'amount'"):
        decode_column(cells, typ, "amount")
