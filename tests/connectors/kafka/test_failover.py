"""The Kafka error map: what heals by waiting, what fails at once, and how it is logged.

The fault suite (tests/integration/test_kafka_failover.py) kills real brokers; these
pin the classification and the retry loop's bounds without a server.
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError as RdKafkaError
from kafka import errors as kp

from sparkbarrier import SourceError
from sparkbarrier.connectors.kafka.client._failover import (
    LIBRDKAFKA_RETRIABLE, ProblemLog, kafka_python_retriable, retry_failover)
from sparkbarrier.connectors.kafka.reader._librdkafka import GONE, NOT_YET, permanent_error

_LOG = logging.getLogger("sparkbarrier.test.failover")


@pytest.mark.parametrize("name", [
    "_DESTROY", "_DESTROY_BROKER", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT",
    "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION", "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "OFFSET_NOT_AVAILABLE",
    "NOT_ENOUGH_REPLICAS", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"])
def test_failover_errors_of_librdkafka_are_retried(name: str) -> None:
    """The codes seen while killing brokers (leader, coordinator, rolling restart),
    by librdkafka's own names, so the numbers cannot drift from the library's."""
    code = getattr(RdKafkaError, name)
    assert code in LIBRDKAFKA_RETRIABLE and code in NOT_YET
    assert permanent_error(code, "x") is None


@pytest.mark.parametrize("name", [
    "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED", "_SSL", "OFFSET_OUT_OF_RANGE", "_AUTO_OFFSET_RESET",
    "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"])
def test_errors_no_wait_can_fix_are_not_retried(name: str) -> None:
    code = getattr(RdKafkaError, name)
    assert code not in LIBRDKAFKA_RETRIABLE
    assert code in GONE or name in ("OFFSET_OUT_OF_RANGE", "_AUTO_OFFSET_RESET") \
        or permanent_error(code, "x") is not None


def test_kafka_python_errors_follow_the_java_clients_retriable_tree() -> None:
    for exc in (kp.NotLeaderForPartitionError(), kp.LeaderNotAvailableError(),
                kp.NotCoordinatorError(), kp.CoordinatorNotAvailableError(),
                kp.KafkaConnectionError("111 ECONNREFUSED"), kp.KafkaTimeoutError(),
                kp.OffsetNotAvailableError(), ConnectionRefusedError()):
        assert kafka_python_retriable(exc), exc
    for exc in (kp.SaslAuthenticationFailedError(), kp.TopicAuthorizationFailedError(),
                kp.OffsetOutOfRangeError(), ValueError("bug")):
        assert not kafka_python_retriable(exc), exc


def test_a_failover_is_retried_and_logged_once_then_once_healed(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=_LOG.name)
    answers = [kp.NotLeaderForPartitionError(), kp.NotLeaderForPartitionError(),
               kp.NotLeaderForPartitionError(), 42]

    def call() -> int:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    got = retry_failover("look up offsets", call, timeout_s=10, interval_s=0.01,
                         problems=ProblemLog(_LOG, "barrier-kafka"))
    assert got == 42 and not answers
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # the healed line at the problem's level: the driver's log shows WARNING and above
    assert len(warnings) == 2 and "failover.timeoutMs" in warnings[0]
    assert "look up offsets works again after" in warnings[1]


def test_a_fatal_error_is_raised_at_once() -> None:
    calls = []

    def call() -> None:
        calls.append(1)
        raise kp.TopicAuthorizationFailedError()

    with pytest.raises(kp.TopicAuthorizationFailedError):
        retry_failover("look up offsets", call, timeout_s=10, interval_s=0.01,
                       problems=ProblemLog(_LOG, "barrier-kafka"))
    assert calls == [1]


def test_a_failover_longer_than_the_budget_fails_naming_the_option() -> None:
    def call() -> None:
        raise kp.LeaderNotAvailableError()

    with pytest.raises(SourceError, match=r"cannot look up offsets: LeaderNotAvailableError.*"
                                          r"\(failover\.timeoutMs=50") as err:
        retry_failover("look up offsets", call, timeout_s=0.05, interval_s=0.01,
                       problems=ProblemLog(_LOG, "barrier-kafka"), topic_partition="t:0")
    assert err.value.topic_partition == "t:0"


def test_failover_timeout_option_is_validated() -> None:
    from sparkbarrier import ConfigError
    from sparkbarrier.connectors.kafka import parse_source_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "commitOffsets": "false"}
    assert parse_source_options(base).failover_timeout_ms == 120_000
    assert parse_source_options({**base, "failover.timeoutMs": "5000"}).failover_timeout_ms == 5000
    with pytest.raises(ConfigError, match="failover.timeoutMs"):
        parse_source_options({**base, "failover.timeoutMs": "0"})


def test_kafka_pythons_reconnect_lines_go_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    """A rolling restart made kafka-python log every reconnect attempt at ERROR."""
    caplog.set_level(logging.INFO)
    manager = logging.getLogger("kafka.net.manager")
    manager.error("Connection failed: %s", "KafkaConnectionError: 111 ECONNREFUSED")
    manager.warning("Bootstrap connection to bootstrap-0 failed: %s (backoff 0.1 secs)", "x")
    manager.error("an unrelated error stays")
    assert [r.getMessage() for r in caplog.records] == ["an unrelated error stays"]
