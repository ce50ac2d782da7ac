"""One owner per ``barrier-kafka`` format: each written and read by one module, round-tripped here.

Formats: the offset-commit metadata (``_group``), the source offset JSON in Spark's
offset log (``_offsets``, read back by ``checkpoint_log_status``), the group's committed
offsets (``committed_offsets``), the channel string (``TopicPartition``) and Spark's
``-2``/``-1`` spelling of earliest/latest (``_positions``).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkbarrier import ProtocolError, SourceError
from sparkbarrier.connectors.kafka import (
    CommittedOffset,
    GroupStatus,
    PartitionStatus,
    TopicPartition,
    checkpoint_log_status,
    committed_offsets,
)
from sparkbarrier.connectors.kafka.commits._group import CommitMetadata, commit_metadata, parse_commit_metadata
from sparkbarrier.connectors._kafka_offsets import SourceOffset
from sparkbarrier.connectors.kafka.client._positions import (
    EARLIEST,
    LATEST,
    SPARK_EARLIEST,
    SPARK_LATEST,
    start_from_spark_json,
)

topics = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
ids = st.integers(min_value=0, max_value=2**62)


# -- commit metadata ---------------------------------------------------------------

@given(ids, ids)
def test_barrier_kafka_metadata_round_trips_as_a_checkpoint_id(checkpoint_id: int, timestamp_ms: int) -> None:
    assert parse_commit_metadata(commit_metadata(checkpoint_id, timestamp_ms)) == CommitMetadata(
        "barrier-kafka", checkpoint_id, None, timestamp_ms)


@given(ids, ids)
def test_spark_kafka_metadata_round_trips_as_a_batch_id(batch_id: int, timestamp_ms: int) -> None:
    meta = commit_metadata(batch_id, timestamp_ms, source="spark-kafka", query_id="q")
    assert parse_commit_metadata(meta) == CommitMetadata("spark-kafka", None, batch_id, timestamp_ms)


def test_barrier_kafka_writes_version_1_which_every_release_reads() -> None:
    """A rolling upgrade: the old release's readers accept only version 1 (checkpointId)."""
    assert json.loads(commit_metadata(7, 1000, query_id="q")) == {
        "v": 1, "src": "barrier-kafka", "checkpointId": 7, "timestampMs": 1000, "queryId": "q"}


def test_spark_kafka_writes_version_2_naming_the_batch_id() -> None:
    assert json.loads(commit_metadata(0, 1000, source="spark-kafka")) == {
        "v": 2, "src": "spark-kafka", "batchId": 0, "timestampMs": 1000}


@pytest.mark.parametrize(("written", "parsed"), [
    # Every release before 2026-11-27: spark-kafka stored batch id + 1 as checkpointId.
    ('{"v":1,"src":"spark-kafka","checkpointId":1,"timestampMs":2,"queryId":"q"}',
     CommitMetadata("spark-kafka", None, 0, 2)),
    ('{"v":1,"src":"spark-kafka","checkpointId":8,"timestampMs":2}', CommitMetadata("spark-kafka", None, 7, 2)),
    ('{"v":1,"src":"barrier-kafka","checkpointId":8,"timestampMs":2,"queryId":"q"}',
     CommitMetadata("barrier-kafka", 8, None, 2)),
    # Version 2 of barrier-kafka (not written yet) keeps its key.
    ('{"v":2,"src":"barrier-kafka","checkpointId":8,"timestampMs":2}', CommitMetadata("barrier-kafka", 8, None, 2)),
])
def test_every_written_version_reads_each_id_under_its_name(written: str, parsed: CommitMetadata) -> None:
    assert parse_commit_metadata(written) == parsed


@pytest.mark.parametrize("foreign", [
    None, "", "not json", "[1]", "{}", '"v"', '{"v":1,"src":"other","checkpointId":1,"timestampMs":2}',
    '{"v":3,"src":"barrier-kafka","checkpointId":1,"timestampMs":2}',
    '{"v":3,"src":"spark-kafka","batchId":1,"timestampMs":2}',
    '{"v":1,"src":"barrier-kafka","checkpointId":"1","timestampMs":2}',
    '{"v":1,"src":"barrier-kafka","checkpointId":1}',
    '{"v":1,"src":"barrier-kafka","checkpointId":true,"timestampMs":2}',
    '{"v":true,"src":"barrier-kafka","checkpointId":1,"timestampMs":2}',
    '{"v":1,"src":"barrier-kafka","checkpointId":-1,"timestampMs":2}',
    # A version-1 spark-kafka string counted completed batches: 0 is no batch.
    '{"v":1,"src":"spark-kafka","checkpointId":0,"timestampMs":2}',
    # Version 1 had no batchId; version 2 names each source's id, not the other's.
    '{"v":1,"src":"spark-kafka","batchId":3,"timestampMs":2}',
    '{"v":2,"src":"spark-kafka","checkpointId":3,"timestampMs":2}',
    '{"v":2,"src":"barrier-kafka","batchId":3,"timestampMs":2}',
    '{"v":2,"src":"spark-kafka","batchId":1.5,"timestampMs":2}',
    # Other tools' metadata (kafka-consumer-groups, Flink, plain strings).
    "flink-checkpoint-42", '{"checkpointId":3}', '{"batchId":3,"timestampMs":2}',
])
def test_foreign_or_newer_commit_metadata_reads_as_no_id(foreign: str | None) -> None:
    assert parse_commit_metadata(foreign) is None


def test_commit_metadata_carries_no_option_values() -> None:
    assert set(json.loads(commit_metadata(3, 4))) == {"v", "src", "checkpointId", "timestampMs"}
    assert set(json.loads(commit_metadata(3, 4, source="spark-kafka"))) == {"v", "src", "batchId", "timestampMs"}


def test_commit_metadata_rejects_unknown_sources_and_negative_ids() -> None:
    with pytest.raises(ValueError, match="source"):
        commit_metadata(1, 2, source="flink")
    with pytest.raises(ValueError, match="batchId"):
        commit_metadata(-1, 2, source="spark-kafka")


# -- group offsets -------------------------------------------------------------------

class _FakeAdmin:
    """``list_group_offsets`` as kafka-python returns it (TopicPartition → OffsetAndMetadata)."""

    def __init__(self, found: dict) -> None:
        self._found = found

    def list_group_offsets(self, groups: dict) -> dict:
        (group,) = groups
        return {group: self._found}


def test_committed_offsets_parse_metadata_and_skip_uncommitted() -> None:
    from kafka import TopicPartition as tp

    meta = lambda o, m: SimpleNamespace(offset=o, metadata=m)  # noqa: E731
    admin = _FakeAdmin({tp("a", 0): meta(42, commit_metadata(7, 1000)), tp("a", 1): meta(-1, ""),
                        tp("b", 0): meta(5, "by another tool"), tp("b", 1): None,
                        tp("c", 0): meta(9, commit_metadata(0, 1001, source="spark-kafka")),
                        tp("c", 1): meta(8, '{"v":1,"src":"spark-kafka","checkpointId":4,"timestampMs":1002}')})
    assert committed_offsets(admin, "g") == {
        TopicPartition("a", 0): CommittedOffset(42, 7, 1000),
        TopicPartition("b", 0): CommittedOffset(5, None, None),
        TopicPartition("c", 0): CommittedOffset(9, None, 1001, batch_id=0),
        TopicPartition("c", 1): CommittedOffset(8, None, 1002, batch_id=3),
    }


def test_group_status_names_the_newest_id_of_each_kind() -> None:
    def part(p: int, checkpoint_id: int | None, batch_id: int | None) -> PartitionStatus:
        return PartitionStatus("t", p, 5, 5, 0, checkpoint_id, 1, batch_id)

    spark = GroupStatus("g", [part(0, None, 0), part(1, None, 4), part(2, None, None)])
    assert (spark.last_batch_id, spark.last_checkpoint_id) == (4, None)
    barrier = GroupStatus("g", [part(0, 3, None), part(1, 2, None)])
    assert (barrier.last_batch_id, barrier.last_checkpoint_id) == (None, 3)
    assert (GroupStatus("g", []).last_batch_id, GroupStatus("g", []).last_checkpoint_id) == (None, None)


# -- offset JSON, also as read back from Spark's offset log ---------------------------

def _log(root: Path, batch: int, *source_lines: str, committed: bool) -> None:
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(exist_ok=True)
    (root / "offsets" / str(batch)).write_text(
        "\n".join(["v1", json.dumps({"batchWatermarkMs": 0}), *source_lines]))
    if committed:
        (root / "commits" / str(batch)).write_text("v1\n{}")


@given(st.dictionaries(st.tuples(topics, st.integers(0, 50)), st.integers(0, 2**40), max_size=5),
       ids, ids)
def test_source_offset_json_round_trips(offsets: dict, checkpoint_id: int, ts: int) -> None:
    off = SourceOffset(checkpoint_id, ts, {TopicPartition(t, p): o for (t, p), o in offsets.items()})
    assert SourceOffset.from_json(json.loads(json.dumps(off.to_json()))) == off


def test_checkpoint_log_reads_offsets_through_the_source_parser(tmp_path: Path) -> None:
    off = SourceOffset(4, 99, {TopicPartition("t", 0): 10, TopicPartition("t", 1): 3})
    _log(tmp_path, 0, '{"other":"source"}', json.dumps(off.to_json()), committed=True)
    _log(tmp_path, 1, json.dumps(SourceOffset(5, 100, off.offsets).to_json()), committed=False)
    status = checkpoint_log_status(str(tmp_path))
    assert status.last_completed is not None
    assert (status.last_completed.checkpoint_id, status.last_completed.offsets) == (
        4, off.channel_offsets())
    assert [b.checkpoint_id for b in status.pending] == [5]


def test_checkpoint_log_rejects_an_unknown_offset_version(tmp_path: Path) -> None:
    data = dict(SourceOffset(1, 1, {TopicPartition("t", 0): 1}).to_json(), version=2)
    _log(tmp_path, 0, json.dumps(data), committed=True)
    with pytest.raises(ProtocolError, match="version 2"):
        checkpoint_log_status(str(tmp_path))


# -- channel string --------------------------------------------------------------------

@given(topics, st.integers(0, 10_000))
def test_channel_round_trips(topic: str, partition: int) -> None:
    tp = TopicPartition(topic, partition)
    assert TopicPartition.from_channel(tp.channel) == tp


@pytest.mark.parametrize("channel", ["orders", ":0", "orders:", "orders:x", "orders:-1"])
def test_malformed_channel_is_a_protocol_error(channel: str) -> None:
    with pytest.raises(ProtocolError) as info:
        TopicPartition.from_channel(channel)
    assert info.value.channel == channel


# -- Spark's -2 / -1 -------------------------------------------------------------------

def test_spark_spelling_of_earliest_and_latest_has_one_owner() -> None:
    import sparkbarrier.connectors.resume as resume

    assert start_from_spark_json("o", "t", "0", SPARK_EARLIEST) == EARLIEST
    assert start_from_spark_json("o", "t", "0", SPARK_LATEST) == LATEST
    assert resume.SPARK_EARLIEST is SPARK_EARLIEST  # imported, not redefined


# -- no assert in the planner -----------------------------------------------------------

def test_reading_a_partition_the_planner_did_not_plan_is_a_source_error() -> None:
    from sparkbarrier.connectors.kafka import parse_source_options, source_schema
    from sparkbarrier.connectors.kafka.planner._planner import KafkaStreamPlanner

    options = parse_source_options({"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t",
                                    "kafka.group.id": "g"})
    planner = KafkaStreamPlanner(options, source_schema(False))
    with pytest.raises(SourceError, match="not planned by this source"):
        planner.read(object())  # type: ignore[arg-type]
