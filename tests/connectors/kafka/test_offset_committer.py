"""OffsetCommitter against a real broker: monotonic, idempotent, best effort, no secrets."""

from __future__ import annotations

import json
import logging

import pytest
from kafka_testkit import KafkaTool

from sparkbarrier.connectors.kafka.commits._offset_committer import OffsetCommitter
from sparkbarrier.connectors.kafka._metrics import SourceMetrics
from sparkbarrier.connectors.kafka import parse_source_options
from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP

pytestmark = pytest.mark.kafka


def committer(kafka: KafkaTool, group: str, **extra: str) -> tuple[OffsetCommitter, SourceMetrics]:
    options = parse_source_options({"kafka.bootstrap.servers": kafka.bootstrap,
                                    "subscribe": "t", "kafka.group.id": group, **extra})
    metrics = SourceMetrics()
    return OffsetCommitter(options.admin_configs(), group, metrics), metrics


def test_commit_never_moves_group_offsets_back(kafka: KafkaTool, unique_name) -> None:
    topic, group = kafka.create_topic(unique_name("t")), unique_name("g")
    kafka.commit_group(group, {(topic, 0): 50})
    c, metrics = committer(kafka, group)
    try:
        assert c.commit(3, 1000, {TP(topic, 0): 40, TP(topic, 1): 7})
        assert kafka.group_offsets(group) == {(topic, 0): 50, (topic, 1): 7}
        assert c.commit(4, 1001, {TP(topic, 0): 60, TP(topic, 1): 9})
        assert c.commit(2, 999, {TP(topic, 0): 1, TP(topic, 1): 1})  # older id: no-op
        assert kafka.group_offsets(group) == {(topic, 0): 60, (topic, 1): 9}
        meta = json.loads(kafka.group_metadata(group)[(topic, 1)])
        assert meta == {"v": 1, "src": "barrier-kafka", "checkpointId": 4, "timestampMs": 1001}
        assert metrics.snapshot()["commits_succeeded"] == 2
    finally:
        c.close()


def test_commit_failure_is_counted_not_raised_and_leaks_no_secret(
    kafka: KafkaTool, unique_name, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-password-value"
    options = parse_source_options({
        "kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "kafka.group.id": "g",
        "kafka.bootstrap.timeout.ms": "500", "kafka.request.timeout.ms": "500",
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                  f'required username="u" password="{secret}";'})
    metrics = SourceMetrics()
    c = OffsetCommitter(options.admin_configs(), "g", metrics)
    caplog.set_level(logging.DEBUG)
    assert c.commit(1, 1, {TP("t", 0): 5}) is False
    assert metrics.snapshot()["commits_failed"] == 1
    assert c.last_committed_id is None  # retried by the next completion
    assert "failed" in caplog.text and secret not in caplog.text
