"""barrier-kafka options that only show their effect inside a running query."""

from __future__ import annotations

import json
import time

import pytest

from kafka_testkit import KafkaTool, start, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _drain(query) -> None:
    try:
        query.awaitTermination(120)
    finally:
        query.stop()


def test_assign_reads_only_the_assigned_partitions(spark, kafka: KafkaTool, unique_name,
                                                   tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t"), partitions=3), unique_name("g")
    kafka.produce(topic, 30, partitions=3)
    options = {"kafka.bootstrap.servers": kafka.bootstrap, "assign": json.dumps({topic: [0, 2]}),
               "kafka.group.id": group, "startingOffsets": "earliest"}
    query, got = start(spark, options, str(tmp_path / "c"), available_now=True)
    _drain(query)
    assert sorted({row[3] for row in got.all_data()}) == [0, 2]
    assert len(got.all_data()) == 20
    assert kafka.group_offsets(group) == {(topic, 0): 10, (topic, 2): 10}


def test_min_partitions_splits_ranges_and_still_reads_each_record_once(
    spark, kafka: KafkaTool, unique_name, tmp_path
) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    produced = kafka.produce(topic, 400)
    options = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
               "kafka.group.id": group, "startingOffsets": "earliest", "minPartitions": "6"}
    query, got = start(spark, options, str(tmp_path / "c"), available_now=True)
    _drain(query)
    assert sorted(got.values()) == sorted(produced)
    for part in (0, 1):
        assert sorted(r[4] for r in got.all_data() if r[3] == part) == list(range(200))
    # Only the last slice of a partition's range carries its barrier: one per partition.
    markers = [m for b in got.markers for m in got.markers[b]]
    assert sorted((m[11], m[12]) for m in markers) == [(f"{topic}:0", 200), (f"{topic}:1", 200)]
    assert kafka.group_offsets(group) == {(topic, 0): 200, (topic, 1): 200}


def test_min_offsets_per_trigger_waits_for_enough_records(spark, kafka: KafkaTool, unique_name,
                                                          tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    options = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
               "kafka.group.id": group, "startingOffsets": "earliest",
               "minOffsetsPerTrigger": "20", "maxTriggerDelay": "1h"}
    kafka.produce(topic, 10)
    query, got = start(spark, options, str(tmp_path / "c"), interval="200 milliseconds")
    try:
        # Ten records are below the minimum and the delay is an hour: once the query has
        # planned at least once, watch many 200 ms triggers in which no batch may appear.
        wait_for(lambda: query.status["message"].startswith("Waiting for"), 120,
                 "the first trigger to finish")
        window_end = time.monotonic() + 4
        while time.monotonic() < window_end:
            assert got.all_data() == [], "a batch was planned below minOffsetsPerTrigger"
            assert query.isActive, query.exception()
            time.sleep(0.2)
        kafka.produce(topic, 10, start=10)
        wait_for(lambda: len(got.all_data()) == 20, 60, "the batch once 20 records exist")
    finally:
        query.stop()
    assert sum(1 for rows in got.data.values() if rows) == 1  # one batch, planned at 20


def test_max_trigger_delay_plans_a_small_batch_after_the_delay(spark, kafka: KafkaTool,
                                                               unique_name, tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    kafka.produce(topic, 4)
    options = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
               "kafka.group.id": group, "startingOffsets": "earliest",
               "minOffsetsPerTrigger": "1000", "maxTriggerDelay": "2s"}
    started = time.monotonic()
    query, got = start(spark, options, str(tmp_path / "c"), interval="200 milliseconds")
    try:
        wait_for(lambda: len(got.all_data()) == 4, 90, "the delayed batch")
    finally:
        query.stop()
    assert time.monotonic() - started >= 2


def test_progress_reports_latest_offsets(spark, kafka: KafkaTool, unique_name, tmp_path) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    kafka.produce(topic, 10)
    options = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
               "kafka.group.id": group, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": "4"}
    query, _ = start(spark, options, str(tmp_path / "c"), interval="200 milliseconds")
    try:
        progress = wait_for(
            lambda: next((p for p in query.recentProgress
                          if p["sources"] and p["sources"][0].get("latestOffset")), None),
            90, "a progress event with latestOffset")
    finally:
        query.stop()
    latest = progress["sources"][0]["latestOffset"]
    latest = json.loads(latest) if isinstance(latest, str) else latest
    # What is available in Kafka, not what the capped batch planned.
    assert latest == {topic: {"0": 5, "1": 5}}
