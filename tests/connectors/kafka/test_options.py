"""Option parsing of barrier-kafka: pure unit tests, no broker, no Spark."""

from __future__ import annotations

import logging

import pytest

from sparkbarrier import ConfigError
from sparkbarrier.connectors.kafka import (
    BarrierKafkaDataSource,
    kafka_options_table,
    parse_source_options,
)
from sparkbarrier.connectors.kafka._options import SPECS
from sparkbarrier.connectors.kafka.client._positions import EARLIEST, LATEST, AtOffset, StartKind
from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP

BASE = {"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t", "kafka.group.id": "g"}


def opts(**extra: str) -> dict[str, str]:
    return {**BASE, **extra}


def test_minimal_options_parse_with_spark_defaults() -> None:
    o = parse_source_options(BASE)
    assert o.topics == ("t",)
    assert o.start_kind is StartKind.LATEST
    assert o.fail_on_data_loss is True
    assert o.include_headers is False
    assert o.commit_offsets is True


def test_option_keys_are_case_insensitive() -> None:
    o = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "a,b",
                              "kafka.group.id": "g", "STARTINGOFFSETS": "earliest"})
    assert o.topics == ("a", "b") and o.start_kind is StartKind.EARLIEST


def test_unknown_option_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match="valid options are:.*subscribePattern") as err:
        parse_source_options(opts(subscrbe="x"))
    assert err.value.option == "subscrbe"


@pytest.mark.parametrize("key", ["kafka.auto.offset.reset", "kafka.enable.auto.commit",
                                 "kafka.key.deserializer", "kafka.value.deserializer",
                                 "kafka.interceptor.classes", "endingOffsets"])
def test_options_spark_rejects_are_rejected_with_reason(key: str) -> None:
    with pytest.raises(ConfigError, match="not supported: .+") as err:
        parse_source_options(opts(**{key: "x"}))
    assert err.value.option == key


@pytest.mark.parametrize("strategies", [{}, {"subscribePattern": "t.*"},
                                        {"assign": '{"t": [0]}'}])
def test_exactly_one_subscription_strategy(strategies: dict[str, str]) -> None:
    raw = {k: v for k, v in BASE.items() if k != "subscribe"} if not strategies else opts(**strategies)
    with pytest.raises(ConfigError, match="exactly one of"):
        parse_source_options(raw)


def test_group_id_required_unless_commits_off() -> None:
    raw = {k: v for k, v in BASE.items() if k != "kafka.group.id"}
    with pytest.raises(ConfigError, match="kafka.group.id"):
        parse_source_options(raw)
    assert parse_source_options({**raw, "commitOffsets": "false"}).group_id is None
    with pytest.raises(ConfigError, match="kafka.group.id"):
        parse_source_options({**raw, "commitOffsets": "false", "startingOffsets": "group"})


def test_starting_offsets_json_becomes_value_objects() -> None:
    o = parse_source_options(opts(startingOffsets='{"t": {"0": -2, "1": -1, "2": 42}}'))
    assert o.start_kind is StartKind.SPECIFIC
    assert o.specific_starts == {TP("t", 0): EARLIEST, TP("t", 1): LATEST, TP("t", 2): AtOffset(42)}


@pytest.mark.parametrize("value, message", [
    ("soonest", "earliest, latest, group or JSON"),
    ('{"t": {"0": -3}}', "-2 for earliest"),
    ('{"t": {"x": 1}}', "not a number"),
    ('{"t": ', "must be JSON"),
])
def test_bad_starting_offsets_name_the_fix(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options(opts(startingOffsets=value))


def test_timestamp_starts() -> None:
    o = parse_source_options(opts(startingTimestamp="1000"))
    assert o.start_kind is StartKind.TIMESTAMP and o.start_timestamp == 1000
    o = parse_source_options(opts(startingOffsetsByTimestamp='{"t": {"0": 5}}',
                                  startingOffsetsByTimestampStrategy="LATEST"))
    assert o.start_kind is StartKind.BY_TIMESTAMP and o.start_timestamps == {TP("t", 0): 5}
    assert o.timestamp_strategy == "latest"
    with pytest.raises(ConfigError, match="only one of"):
        parse_source_options(opts(startingTimestamp="1", startingOffsets="earliest"))


def test_group_start_and_fallback() -> None:
    o = parse_source_options(opts(startingOffsets="group"))
    assert o.start_kind is StartKind.GROUP and o.group_fallback == "earliest"
    with pytest.raises(ConfigError, match="earliest, latest, error"):
        parse_source_options(opts(startingOffsets="group", **{"startingOffsets.groupFallback": "x"}))


@pytest.mark.parametrize("key, value", [("maxOffsetsPerTrigger", "0"), ("maxOffsetsPerTrigger", "x"),
                                        ("failOnDataLoss", "yes"), ("minPartitions", "-1"),
                                        ("maxTriggerDelay", "soon")])
def test_bad_values_name_the_option(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_source_options(opts(**{key: value}))
    assert key in str(err.value)


def test_min_above_max_offsets_rejected() -> None:
    with pytest.raises(ConfigError, match="must not exceed"):
        parse_source_options(opts(minOffsetsPerTrigger="10", maxOffsetsPerTrigger="5"))


def test_kafka_options_map_to_client_kwargs_without_mutating_input() -> None:
    raw = opts(**{"kafka.security.protocol": "SSL", "kafka.isolation.level": "read_committed",
                  "kafka.request.timeout.ms": "5000", "kafka.check.crcs": "false"})
    before = dict(raw)
    o = parse_source_options(raw)
    assert raw == before
    assert o.client_configs == {"isolation_level": "read_committed",
                                "request_timeout_ms": 5000, "check_crcs": False}
    assert o.consumer_configs()["security_protocol"] == "SSL"
    assert "group_id" not in o.consumer_configs()


def test_unknown_kafka_setting_rejected() -> None:
    with pytest.raises(ConfigError, match="kafka-python has no 'fetch_max_wait'") as err:
        parse_source_options(opts(**{"kafka.fetch.max.wait": "5"}))
    assert "remove it" not in str(err.value)


def test_jaas_config_maps_to_plain_credentials() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="alice" password="hunter2";')
    o = parse_source_options(opts(**{"kafka.sasl.jaas.config": jaas, "kafka.sasl.mechanism":
                                     "PLAIN", "kafka.security.protocol": "SASL_PLAINTEXT"}))
    assert o.consumer_configs()["sasl_plain_username"] == "alice"
    assert o.consumer_configs()["sasl_plain_password"] == "hunter2"


def test_secrets_never_in_errors_or_safe_options(caplog: pytest.LogCaptureFixture) -> None:
    secret = "hunter2-very-secret"
    raw = opts(**{"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                  "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.'
                  f'PlainLoginModule required username="u" password="{secret}";'})
    caplog.set_level(logging.DEBUG)
    o = parse_source_options(raw)
    assert secret not in repr(o.safe_options)
    assert secret not in repr(o) and secret not in str(o)
    with pytest.raises(ConfigError) as err:
        parse_source_options({**raw, "failOnDataLoss": "maybe"})
    assert secret not in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_source_options({**raw, "kafka.sasl.jaas.config": f"broken {secret}"})
    assert secret not in str(err.value)
    assert secret not in caplog.text


def test_datasource_validates_at_construction() -> None:
    with pytest.raises(ConfigError):
        BarrierKafkaDataSource({"kafka.bootstrap.servers": "h:1"})
    ds = BarrierKafkaDataSource(dict(BASE))
    assert ds.name() == "barrier-kafka"
    names = ds.schema().fieldNames()
    assert names[:7] == ["key", "value", "topic", "partition", "offset", "timestamp",
                         "timestampType"]
    assert len(names) == 7  # exactly Spark's Kafka columns by default
    assert BarrierKafkaDataSource({**BASE, "barrierMarkers": "true"}).schema().fieldNames()[7] == "_barrier_kind"
    assert "headers" in BarrierKafkaDataSource({**BASE, "includeHeaders": "true"}).schema().fieldNames()


def test_options_table_lists_every_spec() -> None:
    table = kafka_options_table()
    assert all(f"`{s.key}`" in table for s in SPECS)


def test_object_settings_rejected_and_api_version_parsed() -> None:
    with pytest.raises(ConfigError, match="Python object"):
        parse_source_options(opts(**{"kafka.ssl.context": "x"}))
    assert parse_source_options(opts(**{"kafka.api.version": "3.7"})).client_configs == {
        "api_version": (3, 7)}


def test_choice_options_parse_to_enums_with_the_same_spellings() -> None:
    from sparkbarrier.connectors.kafka.client._client_config import ConsumerClient
    from sparkbarrier.connectors.kafka._options import GroupFallback, StartingOffsetsByTimestampStrategy

    o = parse_source_options(BASE)
    assert o.group_fallback is GroupFallback.EARLIEST
    assert o.timestamp_strategy is StartingOffsetsByTimestampStrategy.ERROR
    assert o.consumer_client is ConsumerClient.AUTO
    o = parse_source_options(opts(**{"startingOffsets.groupFallback": "LATEST",
                                     "startingOffsetsByTimestampStrategy": " latest",
                                     "kafkaConsumer.client": "Kafka-Python"}))
    assert o.group_fallback is GroupFallback.LATEST
    assert o.timestamp_strategy is StartingOffsetsByTimestampStrategy.LATEST
    assert o.consumer_client is ConsumerClient.KAFKA_PYTHON
    with pytest.raises(ConfigError, match="option 'startingOffsets.groupFallback' must be one of "
                                          "earliest, latest, error"):
        parse_source_options(opts(**{"startingOffsets.groupFallback": "none"}))


def test_option_tables_use_one_type_vocabulary() -> None:
    from sparkbarrier.connectors._options import TYPE_NAMES, OptionSpec, parse_bool
    from sparkbarrier.connectors.hbase._options import READ_OPTION_SPECS, SINK_OPTION_SPECS

    for spec in (*SPECS, *SINK_OPTION_SPECS, *READ_OPTION_SPECS):
        assert spec.type_name in TYPE_NAMES, spec.key
    with pytest.raises(ValueError, match="not one of"):
        OptionSpec("x", parse_bool, False, "x", type_name="boolean")


def test_driver_clients_ask_a_dead_broker_again_within_a_second_unless_told_otherwise() -> None:
    # kafka-python sees a moved leader only when a reconnect to the dead one fails; with
    # its own 30 s backoff cap a leader kill stalled the planner 13-59 s (issue 33).
    o = parse_source_options(BASE)
    assert o.consumer_configs()["reconnect_backoff_max_ms"] == 1000
    assert o.admin_configs()["reconnect_backoff_max_ms"] == 1000  # the group committer's
    own = parse_source_options(opts(**{"kafka.reconnect.backoff.max.ms": "5000"}))
    assert own.consumer_configs()["reconnect_backoff_max_ms"] == 5000
    assert own.admin_configs()["reconnect_backoff_max_ms"] == 5000
