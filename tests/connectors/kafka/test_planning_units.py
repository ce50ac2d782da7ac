"""Pure planning helpers: offset JSON, row caps, range splitting (no broker)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkbarrier import ProtocolError
from sparkbarrier.connectors._kafka_offsets import SourceOffset
from sparkbarrier.connectors.kafka.planner._planner import _cap_rows, _split
from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP


def test_offset_json_round_trip_is_spark_shaped() -> None:
    off = SourceOffset(3, 1000, {TP("b", 1): 7, TP("a", 0): 5})
    data = off.to_json()
    assert data == {"version": 1, "checkpointId": 3, "timestampMs": 1000,
                    "offsets": {"a": {"0": 5}, "b": {"1": 7}}}
    assert SourceOffset.from_json(data) == off
    assert off.channel_offsets() == {"a:0": 5, "b:1": 7}


def test_offset_unknown_version_rejected() -> None:
    with pytest.raises(ProtocolError, match="version 2"):
        SourceOffset.from_json({"version": 2, "checkpointId": 1, "timestampMs": 1, "offsets": {}})
    with pytest.raises(ProtocolError, match="malformed"):
        SourceOffset.from_json({"version": 1, "offsets": {}})


@given(st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
                       min_size=1), st.integers(1, 3000))
def test_cap_rows_never_exceeds_limit_and_never_goes_back(
    parts: dict[int, tuple[int, int]], limit: int
) -> None:
    start = {TP("t", p): s for p, (s, _) in parts.items()}
    latest = {TP("t", p): s + n for p, (s, n) in parts.items()}
    end = _cap_rows(start, latest, limit)
    taken = sum(end[tp] - start[tp] for tp in start)
    assert taken == min(limit, sum(latest[tp] - start[tp] for tp in start))
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)


def test_split_honours_min_partitions_and_one_barrier_per_channel() -> None:
    stop = SourceOffset(4, 99, {TP("t", 0): 1000, TP("t", 1): 10})
    parts = _split([(TP("t", 0), 0, 1000), (TP("t", 1), 0, 10)], stop, 4)
    assert len(parts) >= 4
    for channel in ("t:0", "t:1"):
        mine = [p for p in parts if p.channel == channel]
        assert sum(p.emit_barrier for p in mine) == 1 and mine[-1].emit_barrier
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
    assert {p.checkpoint_id for p in parts} == {4}


def _planner(**extra: str):
    from types import SimpleNamespace

    from pyspark.sql.types import StructType

    from sparkbarrier.connectors.kafka import parse_source_options
    from sparkbarrier.connectors.kafka.planner._planner import KafkaStreamPlanner

    options = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                    "commitOffsets": "false", **extra})
    import time

    state = SimpleNamespace(target=None, last_planned_at=time.monotonic())
    return KafkaStreamPlanner(options, StructType([])), state


def test_min_offsets_waits_until_enough_or_max_trigger_delay() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    planner, state = _planner(minOffsetsPerTrigger="10", maxOffsetsPerTrigger="100",
                              maxTriggerDelay="1h")
    start, few, many = {TP("t", 0): 0}, {TP("t", 0): 5}, {TP("t", 0): 10}
    assert isinstance(planner.getDefaultReadLimit(), ReadMaxRows)
    assert planner._below_minimum(state, start, few, ReadMaxRows(100))
    assert not planner._below_minimum(state, start, many, ReadMaxRows(100))
    assert not planner._below_minimum(state, start, few, ReadAllAvailable())  # trigger wins
    state.last_planned_at -= 3601
    assert not planner._below_minimum(state, start, few, ReadMaxRows(100))  # waited long enough
    planner, state = _planner(minOffsetsPerTrigger="10")
    assert planner.getDefaultReadLimit() == ReadMinRows(10)
    assert planner._below_minimum(state, start, few, ReadMinRows(10))
    state.target = {}
    assert not planner._below_minimum(state, start, few, ReadMinRows(10))  # AvailableNow


def test_planner_pickles_without_driver_state() -> None:
    import pickle

    planner, _ = _planner()
    planner._driver = object()  # type: ignore[assignment]
    clone = pickle.loads(pickle.dumps(planner))
    assert clone._driver is None and clone._options == planner._options


def test_offset_json_carries_planned_starts_of_new_partitions() -> None:
    off = SourceOffset(4, 2000, {TP("a", 0): 9, TP("a", 1): 30}, {TP("a", 1): 12})
    data = off.to_json()
    assert data["starts"] == {"a": {"1": 12}}
    assert SourceOffset.from_json(data) == off
    # Offsets written before the field existed read as "no planned starts".
    assert SourceOffset.from_json({k: v for k, v in data.items() if k != "starts"}).starts == {}
    assert "starts" not in SourceOffset(1, 1, {TP("a", 0): 1}).to_json()


def test_new_partition_is_read_from_its_planned_start_not_looked_up_again() -> None:
    from types import SimpleNamespace

    planner, _ = _planner()

    class NoLookup:
        def earliest(self, tps):  # a replay must not ask Kafka where the partition starts
            raise AssertionError(f"looked up earliest of {tps}")

    planner._driver = SimpleNamespace(cluster=NoLookup(), metrics=None)  # type: ignore[assignment]
    begin = SourceOffset(1, 10, {TP("t", 0): 5})
    end = SourceOffset(2, 11, {TP("t", 0): 8, TP("t", 1): 20}, {TP("t", 1): 12})
    parts = planner.partitions(begin.to_json(), end.to_json())
    assert sorted((p.channel, p.start, p.end) for p in parts) == [("t:0", 5, 8), ("t:1", 12, 20)]
