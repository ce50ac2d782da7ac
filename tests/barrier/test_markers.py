"""Marker rows inside Arrow batches: encode, decode, slice in order."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkbarrier import ProtocolError
from sparkbarrier.barrier import (
    MARKER_COLUMNS,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    has_marker_columns,
    marker_batch,
    split_markers,
    with_marker_columns,
)

DATA = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.int64())])
STREAM = with_marker_columns(DATA)


def data_batch(values: list[int]) -> pa.RecordBatch:
    arrays = [pa.array([f"k{v}" for v in values]), pa.array(values, pa.int64())]
    arrays += [pa.nulls(len(values), f.type) for f in STREAM][2:]
    return pa.RecordBatch.from_arrays(arrays, schema=STREAM)


def concat(*batches: pa.RecordBatch) -> pa.RecordBatch:
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


MARKERS = [
    CheckpointBarrier(3, 1_700_000_000_000, "t:0", 42),
    CheckpointBarrier(4, 5),
    CancelCheckpointMarker(9, "t:1"),
    EndOfPartition("t:2"),
]


@pytest.mark.parametrize("marker", MARKERS, ids=lambda m: type(m).__name__)
def test_marker_round_trips_through_a_batch(marker):
    parts = list(split_markers(marker_batch([marker], STREAM)))
    assert parts == [marker]


def test_stream_schema_appends_marker_columns_after_data():
    assert STREAM.names == ["key", "value", *MARKER_COLUMNS]
    assert has_marker_columns(STREAM) and not has_marker_columns(DATA)


def test_marker_columns_clash_is_rejected():
    with pytest.raises(ProtocolError, match="already has marker column"):
        with_marker_columns(STREAM)


def test_unknown_marker_version_is_rejected():
    batch = marker_batch([CheckpointBarrier(1, 1)], STREAM)
    idx = STREAM.get_field_index("_barrier_version")
    batch = batch.set_column(idx, STREAM.field(idx), pa.array([99], pa.int32()))
    with pytest.raises(ProtocolError, match="version 99"):
        list(split_markers(batch))


def test_unknown_marker_kind_is_rejected():
    batch = marker_batch([CheckpointBarrier(1, 1)], STREAM)
    idx = STREAM.get_field_index("_barrier_kind")
    batch = batch.set_column(idx, STREAM.field(idx), pa.array(["bogus"]))
    with pytest.raises(ProtocolError, match="unknown marker kind"):
        list(split_markers(batch))


def test_split_yields_slices_and_markers_in_stream_order():
    b1, b2 = CheckpointBarrier(1, 10, "t:0", 3), CheckpointBarrier(2, 20, "t:0", 5)
    batch = concat(
        data_batch([0, 1, 2]),
        marker_batch([b1], STREAM),
        data_batch([3, 4]),
        marker_batch([b2, EndOfPartition("t:0")], STREAM),
    )
    parts = list(split_markers(batch))
    kinds = [p if not isinstance(p, pa.RecordBatch) else p.column("value").to_pylist() for p in parts]
    assert kinds == [[0, 1, 2], b1, [3, 4], b2, EndOfPartition("t:0")]
    for part in parts:
        if isinstance(part, pa.RecordBatch):
            assert part.schema == DATA


def test_split_slices_share_the_source_buffers():
    batch = concat(data_batch(list(range(100))), marker_batch([CheckpointBarrier(1, 1)], STREAM),
                   data_batch(list(range(100, 150))))
    source_buffer = batch.column(1).buffers()[1]
    first, _, last = split_markers(batch)
    assert first.column(1).buffers()[1].address == source_buffer.address
    assert last.column(1).buffers()[1].address == source_buffer.address
    assert last.column(1).offset == 101


def test_split_without_markers_yields_one_slice():
    batch = data_batch([1, 2])
    parts = list(split_markers(batch))
    assert len(parts) == 1 and parts[0].num_rows == 2


def test_split_of_plain_data_batch_passes_it_through():
    plain = pa.RecordBatch.from_pydict({"x": [1, 2]})
    assert [p.num_rows for p in split_markers(plain)] == [2]
    assert list(split_markers(plain.slice(0, 0))) == []


def with_field(batch: pa.RecordBatch, name: str, value: object) -> pa.RecordBatch:
    """``batch`` (one marker row) with column ``name`` set to ``value``."""
    idx = batch.schema.get_field_index(name)
    field = batch.schema.field(idx)
    return batch.set_column(idx, field, pa.array([value], field.type))


@pytest.mark.parametrize(
    ("marker", "name"),
    [
        (CheckpointBarrier(1, 1, "t:0", 3), "_barrier_checkpoint_id"),
        (CheckpointBarrier(1, 1, "t:0", 3), "_barrier_timestamp_ms"),
        (CancelCheckpointMarker(1, "t:0"), "_barrier_checkpoint_id"),
        (EndOfPartition("t:0"), "_barrier_channel"),
        (CheckpointBarrier(1, 1, "t:0", 3), "_barrier_version"),
    ],
    ids=lambda x: x if isinstance(x, str) else type(x).__name__,
)
def test_marker_row_with_null_required_field_is_protocol_error_naming_it(marker, name):
    batch = with_field(marker_batch([marker], STREAM), name, None)
    with pytest.raises(ProtocolError, match=name):
        list(split_markers(batch))


def test_null_checkpoint_id_inside_a_data_batch_is_protocol_error_not_type_error():
    batch = concat(
        data_batch([1, 2]),
        with_field(marker_batch([CheckpointBarrier(5, 1)], STREAM), "_barrier_checkpoint_id", None),
    )
    with pytest.raises(ProtocolError, match="_barrier_checkpoint_id") as info:
        list(split_markers(batch))
    assert not isinstance(info.value, TypeError)


def test_marker_row_with_wrongly_typed_field_is_protocol_error_naming_it():
    # e.g. a producer that declared the id column as a string
    batch = marker_batch([CheckpointBarrier(1, 1)], STREAM)
    idx = STREAM.get_field_index("_barrier_checkpoint_id")
    batch = batch.set_column(idx, pa.field("_barrier_checkpoint_id", pa.string()), pa.array(["seven"]))
    with pytest.raises(ProtocolError, match="_barrier_checkpoint_id"):
        list(split_markers(batch))


def test_marker_rows_without_all_marker_columns_are_protocol_error_naming_them():
    batch = marker_batch([CheckpointBarrier(1, 1)], STREAM)
    batch = batch.drop_columns(["_barrier_timestamp_ms"])
    with pytest.raises(ProtocolError, match="_barrier_timestamp_ms"):
        list(split_markers(batch))


def test_optional_marker_fields_may_be_null():
    assert list(split_markers(marker_batch([CheckpointBarrier(4, 5)], STREAM))) == [CheckpointBarrier(4, 5)]
    assert list(split_markers(marker_batch([CancelCheckpointMarker(9)], STREAM))) == [CancelCheckpointMarker(9)]


def test_marker_ddl_matches_marker_fields():
    """The Spark DDL and the Arrow fields describe the same columns, in the same order."""
    from sparkbarrier.barrier.markers import MARKER_DDL, MARKER_FIELDS

    spark_names = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64()}
    parsed = [column.split() for column in MARKER_DDL.split(",")]
    assert [(name, spark_names[kind]) for name, kind in parsed] == [
        (f.name, f.type) for f in MARKER_FIELDS]
    assert tuple(name for name, _ in parsed) == MARKER_COLUMNS
