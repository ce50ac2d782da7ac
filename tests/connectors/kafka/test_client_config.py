"""kafka.* options -> kafka-python and librdkafka settings: unit tests, no broker, no Spark."""

from __future__ import annotations

import logging

import pytest
from kafka import KafkaConsumer

from sparkbarrier import ConfigError
from sparkbarrier.connectors.kafka import parse_source_options
from sparkbarrier.connectors.kafka.client._client_config import (
    _LIBRDKAFKA,
    ConsumerClient,
    librdkafka_configs,
)
from sparkbarrier.connectors.kafka.client._secrets import SecretScrubber

BASE = {"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t", "kafka.group.id": "g"}


def test_auto_is_the_default_client_and_the_others_selectable() -> None:
    o = parse_source_options(BASE)
    assert o.consumer_client is ConsumerClient.AUTO
    for name, client in (("NATIVE", ConsumerClient.NATIVE), ("confluent", ConsumerClient.CONFLUENT)):
        assert parse_source_options({**BASE, "kafkaConsumer.client": name}).consumer_client is client
    o = parse_source_options({**BASE, "kafkaConsumer.client": "Kafka-Python"})
    assert o.consumer_client is ConsumerClient.KAFKA_PYTHON and o.librdkafka_configs == {}
    with pytest.raises(ConfigError, match="auto, native, confluent, kafka-python"):
        parse_source_options({**BASE, "kafkaConsumer.client": "java"})


def test_the_compiled_module_is_built_and_speaks_librdkafkas_error_codes() -> None:
    """./dev builds it, so the suite runs the default path users get; codes match both."""
    from confluent_kafka import KafkaError

    from sparkbarrier.connectors.kafka.reader import _rdkafka_arrow
    from sparkbarrier.connectors.kafka.reader._librdkafka import Err
    from sparkbarrier.connectors.kafka.reader._native_reader import available

    assert available() is None
    for err in Err:
        assert getattr(_rdkafka_arrow, f"ERR_{err.name}") == err
        assert getattr(KafkaError, err.name, getattr(KafkaError, f"_{err.name}", None)) == err


def test_native_client_without_the_module_fails_at_query_start(monkeypatch) -> None:
    from sparkbarrier.connectors.kafka.reader import _native_reader

    monkeypatch.setattr(_native_reader, "available", lambda: "it is not built (test)")
    with pytest.raises(ConfigError, match=r"'kafkaConsumer.client' is native, but it is not "
                                          r"built .*librdkafka-dev.*kafkaConsumer.client=auto"):
        parse_source_options({**BASE, "kafkaConsumer.client": "native"})
    assert parse_source_options(BASE).consumer_client is ConsumerClient.AUTO


def test_non_security_options_map_to_librdkafka_names() -> None:
    """Security options have their own tests (test_security.py); the rest map by name."""
    o = parse_source_options({**BASE, "kafka.isolation.level": "read_committed",
                              "kafka.request.timeout.ms": "5000", "kafka.client.id": "c"})
    assert o.librdkafka_settings() == {
        "bootstrap.servers": "localhost:9092", "security.protocol": "PLAINTEXT",
        "isolation.level": "read_committed", "socket.timeout.ms": 5000, "client.id": "c"}


@pytest.mark.parametrize("key", ["kafka.socks5.proxy", "kafka.sasl.kerberos.domain.name"])
def test_unmappable_option_fails_at_load_naming_option_and_fix(key: str) -> None:
    with pytest.raises(ConfigError, match="no equivalent in librdkafka.*kafkaConsumer.client="
                                          "kafka-python") as err:
        parse_source_options({**BASE, key: "x"})
    assert err.value.option == key
    parse_source_options({**BASE, key: "x", "kafkaConsumer.client": "kafka-python"})


def test_kafka_python_tuning_applies_to_the_driver_only() -> None:
    o = parse_source_options({**BASE, "kafka.api.version": "3.7",
                              "kafka.bootstrap.timeout.ms": "500"})
    assert o.client_configs == {"api_version": (3, 7), "bootstrap_timeout_ms": 500}
    assert o.librdkafka_configs == {}


def test_max_poll_records_is_forced_and_names_the_option_to_use() -> None:
    with pytest.raises(ConfigError, match="arrowBatchSize"):
        parse_source_options({**BASE, "kafka.max.poll.records": "5"})


def test_every_mapped_setting_is_accepted_by_librdkafka() -> None:
    """librdkafka validates names and values when the client is created (no broker needed)."""
    from confluent_kafka import Consumer

    defaults = {k: v for k, v in KafkaConsumer.DEFAULT_CONFIG.items()
                if k in _LIBRDKAFKA and v is not None}
    defaults.update(client_rack="r", ssl_ciphers="ALL",
                    receive_buffer_bytes=1 << 20, send_buffer_bytes=1 << 20)
    assert set(defaults) >= set(_LIBRDKAFKA) - {"ssl_crlfile", "sasl_kerberos_service_name"}
    quiet = SecretScrubber({}, logging.getLogger("test.librdkafka"))
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "unit",
                         "logger": quiet, **librdkafka_configs(defaults)})
    consumer.close()


def test_scrubber_removes_secret_values_from_text_and_log(caplog) -> None:
    scrub = SecretScrubber({"sasl.password": "hunter2", "sasl.username": "alice",
                            "ssl.key.password": "hunter2-long"}, logging.getLogger("t.scrub"))
    assert scrub("auth as alice with hunter2-long / hunter2") == "auth as alice with *** / ***"
    caplog.set_level(logging.DEBUG)
    scrub.log(logging.WARNING, "%s [%s] %s", "FAIL", "rdkafka", "password hunter2 rejected")
    assert "hunter2" not in caplog.text and "password *** rejected" in caplog.text


def test_kafka_pythons_slow_task_notice_is_dropped_other_warnings_pass(caplog) -> None:
    from sparkbarrier.connectors.kafka.client._secrets import install_client_log_redaction

    install_client_log_redaction()
    caplog.set_level(logging.WARNING, logger="kafka.net.selector")
    selector = logging.getLogger("kafka.net.selector")
    selector.warning("Task %r ran for 0.640s (>0.100s threshold). It is blocking the event "
                     "loop -- likely a tight sync loop inside a coroutine." % "t")
    selector.warning("Task %s left RUNNING after step; demoting to UNSCHEDULED", "t")
    assert "blocking the event loop" not in caplog.text and "left RUNNING" in caplog.text
