"""barrier-kafka against a real broker: exactly-once reading, markers, limits, starts."""

from __future__ import annotations

import json
import time

import pytest

from kafka_testkit import KafkaTool, start, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def base(kafka: KafkaTool, topic: str, group: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
            "kafka.group.id": group, "startingOffsets": "earliest", **extra}


@pytest.mark.parametrize("client", ["native", "confluent", "kafka-python"])
def test_every_record_read_once_in_order_and_restart_resumes(
    spark, kafka: KafkaTool, unique_name, tmp_path, client: str
) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    first = kafka.produce(topic, 200)
    ckpt = str(tmp_path / "ckpt")
    options = base(kafka, topic, group, **{"kafkaConsumer.client": client})
    query, got = start(spark, options, ckpt, available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert sorted(got.values()) == sorted(first)
    assert kafka.group_offsets(group) == {(topic, 0): 100, (topic, 1): 100}
    meta = json.loads(kafka.group_metadata(group)[(topic, 0)])
    assert meta["src"] == "barrier-kafka" and meta["checkpointId"] >= 1

    second = kafka.produce(topic, 60, start=200)
    query, got2 = start(spark, options, ckpt, available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert sorted(got2.values()) == sorted(second)  # nothing re-read, nothing missed
    for part in (0, 1):
        offsets = [r[4] for r in got.all_data() + got2.all_data() if r[3] == part]
        assert offsets == list(range(130))
    assert kafka.group_offsets(group) == {(topic, 0): 130, (topic, 1): 130}


def test_marker_row_closes_each_partition_range(spark, kafka: KafkaTool, unique_name,
                                                tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    kafka.produce(topic, 20)
    query, got = start(spark, base(kafka, topic, group), str(tmp_path / "c"),
                       available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    markers = [m for b in sorted(got.markers) for m in got.markers[b]]
    # _barrier_kind, version, checkpoint id, timestamp, channel, next offset
    assert sorted((m[7], m[11], m[12]) for m in markers) == [
        ("barrier", f"{topic}:0", 10), ("barrier", f"{topic}:1", 10)]
    assert len({m[9] for m in markers}) == 1 and markers[0][9] == 1
    row = got.all_data()[0]
    assert row[2] == topic and row[0].startswith(b"k") and row[6] == 0
    assert row[5].year >= 2024


def test_max_offsets_per_trigger_caps_every_batch(spark, kafka: KafkaTool, unique_name,
                                                  tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    kafka.produce(topic, 100)
    query, got = start(spark, base(kafka, topic, group, maxOffsetsPerTrigger="30"),
                       str(tmp_path / "c"), available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    sizes = [len(got.data[b]) for b in sorted(got.data)]
    assert sum(sizes) == 100 and max(sizes) <= 30 and len(sizes) >= 4
    assert kafka.group_offsets(group) == {(topic, 0): 50, (topic, 1): 50}


def _run_once(spark, options, path) -> list[bytes]:
    query, got = start(spark, options, path, available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    return got.values()


def test_starting_offsets_forms(spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    # Records stamped in 1970 are past any time retention: without retention.ms=-1 the
    # broker's retention check (every 5 min) may delete them while the test reads.
    topic = kafka.create_topic(unique_name("t"), configs={"retention.ms": "-1"})
    old = kafka.produce(topic, 10, timestamp_ms=1_000_000)
    new = kafka.produce(topic, 10, start=10, timestamp_ms=2_000_000)
    opts = base(kafka, topic, unique_name("g"), commitOffsets="false")
    assert _run_once(spark, {**opts, "startingOffsets": "latest"}, str(tmp_path / "a")) == []
    specific = json.dumps({topic: {"0": -2, "1": 7}})
    got = _run_once(spark, {**opts, "startingOffsets": specific}, str(tmp_path / "b"))
    assert len(got) == 10 + 3
    del opts["startingOffsets"]
    got = _run_once(spark, {**opts, "startingTimestamp": "1500000"}, str(tmp_path / "c"))
    assert sorted(got) == sorted(new)
    by_ts = json.dumps({topic: {"0": 0, "1": 3_000_000}})
    got = _run_once(spark, {**opts, "startingOffsetsByTimestamp": by_ts,
                            "startingOffsetsByTimestampStrategy": "latest"}, str(tmp_path / "d"))
    assert sorted(got) == sorted(v for i, v in enumerate(old + new) if i % 2 == 0)


def test_starting_offsets_group_uses_committed_offsets(spark, kafka: KafkaTool, unique_name,
                                                       tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    values = kafka.produce(topic, 20)
    kafka.commit_group(group, {(topic, 0): 8})  # partition 1 has none: fallback earliest
    got = _run_once(spark, base(kafka, topic, group, startingOffsets="group"),
                    str(tmp_path / "a"))
    assert sorted(got) == sorted(values[16::2] + values[1::2])
    assert kafka.group_offsets(group) == {(topic, 0): 10, (topic, 1): 10}


def test_idle_stream_commits_within_one_trigger_and_never_ahead(
    spark, kafka: KafkaTool, unique_name, tmp_path
) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    violations: list[str] = []

    def check(batch_id: int, rows: list[tuple]) -> None:
        # While batch N runs, the group must not hold any offset beyond its start.
        data = [r for r in rows if r[7] is None]
        committed = kafka.group_offsets(group)
        for part in (0, 1):
            offs = [r[4] for r in data if r[3] == part]
            if offs and committed.get((topic, part), 0) > min(offs):
                violations.append(f"batch {batch_id}: {committed} beyond {min(offs)}")

    query, got = start(spark, base(kafka, topic, group), str(tmp_path / "c"),
                       interval="500 milliseconds", on_batch=check)
    try:
        for round_ in range(3):
            kafka.produce(topic, 20, start=20 * round_)
            want = 10 * (round_ + 1)
            wait_for(lambda: len(got.values()) == 20 * (round_ + 1), 60, "records read")
            t0 = time.monotonic()
            wait_for(lambda: kafka.group_offsets(group) == {(topic, 0): want, (topic, 1): want},
                     30, "group commit on idle stream")
            assert time.monotonic() - t0 < 5
    finally:
        query.stop()
    assert violations == []


def test_include_headers_adds_headers_column(spark, kafka: KafkaTool, unique_name,
                                             tmp_path) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    prod = kafka.producer()
    prod.send(topic, value=b"v", partition=0, headers=[("h1", b"a"), ("h2", b"")])
    prod.send(topic, value=b"w", partition=0)
    prod.flush()
    query, got = start(spark, base(kafka, topic, unique_name("g"), includeHeaders="true",
                                   commitOffsets="false"), str(tmp_path / "c"),
                       available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    rows = got.all_data()
    headers = [[(h["key"], bytes(h["value"])) for h in r[7]] for r in rows]
    assert headers == [[("h1", b"a"), ("h2", b"")], []]
