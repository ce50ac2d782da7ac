"""Errors that cannot heal fail the task at once, with librdkafka's reason and the fix.

librdkafka retries a wrong password or a rejected certificate forever; before, a task
waited out the 30 s lookup timeout and reported "All broker connections are down". The
classification is unit-tested here with a fake fetcher; the fail-fast path runs against
the real broker (SASL against its plaintext listener is refused in the handshake).
"""

from __future__ import annotations

import logging
import time

import pytest
from kafka_testkit import KafkaTool
from pyspark.sql.pandas.types import to_arrow_schema

from sparkbarrier import DataLossError, SourceError
from sparkbarrier.connectors.kafka import parse_source_options, source_schema
from sparkbarrier.connectors.kafka.reader._librdkafka import (
    ClientErrors, Err, earliest, permanent_error, read_with,
)
from sparkbarrier.connectors.kafka.reader._partition_reader import KafkaRangePartition, read_range
from sparkbarrier.connectors.kafka.client._secrets import SecretScrubber

PART = KafkaRangePartition("t", 0, 0, 10, checkpoint_id=1, timestamp_ms=1)
BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "commitOffsets": "false"}


@pytest.mark.parametrize(("code", "fix"), [
    (Err.AUTHENTICATION, "kafka.sasl.jaas.config"),
    (Err.SASL_AUTHENTICATION_FAILED, "kafka.sasl.jaas.config"),
    (Err.SSL, "kafka.ssl.truststore"),
    (Err.TOPIC_AUTHORIZATION_FAILED, "Read and Describe on the topic"),
    (Err.CLUSTER_AUTHORIZATION_FAILED, "cluster permission"),
])
def test_authentication_tls_and_authorisation_errors_are_permanent_and_name_the_fix(
    code: Err, fix: str
) -> None:
    failure = permanent_error(code, "the broker's reason")
    assert failure is not None and failure.startswith("the broker's reason; ") and fix in failure


@pytest.mark.parametrize("code", [Err.TRANSPORT, Err.TIMED_OUT, Err.ALL_BROKERS_DOWN,
                                  30])  # 30: GROUP_AUTHORIZATION_FAILED, executors need none
def test_errors_that_can_heal_are_not_permanent(code: int) -> None:
    assert permanent_error(code, "reason") is None
    assert permanent_error(code, "reason", fatal=True) == "reason"  # librdkafka says fatal


def test_the_first_permanent_error_is_kept_scrubbed() -> None:
    errors = ClientErrors(SecretScrubber({"sasl.password": "hunter2"}, logging.getLogger()))
    errors.record(Err.ALL_BROKERS_DOWN, "all down")
    assert errors.permanent is None
    errors.record(Err.AUTHENTICATION, "SASL authentication error: bad password hunter2")
    errors.record(Err.SSL, "SSL handshake failed")
    assert errors.permanent is not None and "hunter2" not in errors.permanent
    assert errors.permanent.startswith("SASL authentication error: bad password ***; check")
    with pytest.raises(SourceError, match=r"cannot read t:0: SASL authentication error"):
        errors.raise_permanent(PART)


class _FakeFetcher:
    """Lookups that never answer; an authentication error arrives on the second one."""

    def __init__(self) -> None:
        self.errors = ClientErrors(SecretScrubber({}, logging.getLogger()))
        self.lookups = 0
        self.closed = False

    def earliest(self, timeout_s: float) -> int | None:
        self.lookups += 1
        if self.lookups == 2:
            self.errors.record(Err.AUTHENTICATION, "SASL authentication error: invalid "
                                                   "credentials")
        return None

    def topic_error(self, timeout_s: float) -> tuple[int, str]:
        """The metadata request a failing lookup makes to learn a moved leader."""
        return 0, ""

    def close(self) -> None:
        self.closed = True


def test_a_permanent_error_during_the_first_lookup_fails_the_task_at_once() -> None:
    fetcher = _FakeFetcher()
    with pytest.raises(SourceError, match=r"invalid credentials; check .*kafka\.sasl\.jaas"):
        list(read_with(fetcher, parse_source_options(BASE), PART))  # type: ignore[arg-type]
    assert fetcher.lookups == 2 and fetcher.closed


def test_a_lookup_that_never_answers_fails_after_its_timeout_with_the_last_error() -> None:
    fetcher = _FakeFetcher()
    fetcher.earliest = lambda timeout_s: None  # type: ignore[method-assign]
    fetcher.errors.record(Err.ALL_BROKERS_DOWN, "all broker connections are down")
    with pytest.raises(SourceError, match=r"of t:0 within 0.05 s .*: all broker connections are down"):
        earliest(fetcher, PART, 0.05)  # type: ignore[arg-type]


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["native", "confluent"])
def test_a_refused_login_fails_the_read_at_once_with_the_reason_and_the_fix(
    kafka: KafkaTool, unique_name, client: str
) -> None:
    """Default request timeout (30 s): the task must not wait it out."""
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    options = parse_source_options({
        **BASE, "kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
        "kafkaConsumer.client": client, "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required username="u" password="p-secret";'})
    schema = to_arrow_schema(source_schema(False), timezone="UTC")
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"SASL.*handshake failed.*; check .*kafka\.sasl") as err:
        list(read_range(options, KafkaRangePartition(topic, 0, 0, 1, checkpoint_id=1,
                                                     timestamp_ms=1), schema))
    assert time.monotonic() - started < 10
    assert "p-secret" not in str(err.value)


class _HiddenTopicFetcher(_FakeFetcher):
    """librdkafka reports the topic unknown; fresh metadata says why."""

    def __init__(self, metadata_error: tuple[int, str]) -> None:
        super().__init__()
        self.metadata_error = metadata_error

    def earliest(self, timeout_s: float) -> int | None:
        raise DataLossError("t:0 no longer exists", topic_partition="t:0")

    def topic_error(self, timeout_s: float) -> tuple[int, str]:
        return self.metadata_error


def test_a_topic_hidden_by_acls_is_an_authorisation_error_not_data_loss() -> None:
    """Kafka answers a topic the user may not Describe as if it did not exist."""
    hidden = _HiddenTopicFetcher((Err.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization "
                                                                  "failed"))
    with pytest.raises(SourceError, match=r"Topic authorization failed; .*Read and Describe") \
            as err:
        earliest(hidden, PART, 5)  # type: ignore[arg-type]
    assert not isinstance(err.value, DataLossError)
    with pytest.raises(DataLossError, match="no longer exists"):
        earliest(_HiddenTopicFetcher((Err.UNKNOWN_TOPIC_OR_PART, "gone")),  # type: ignore[arg-type]
                 PART, 5)
