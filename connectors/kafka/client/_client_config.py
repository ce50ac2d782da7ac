"""``kafka.*`` options -> the settings of the Kafka clients, in one place.

The source talks to Kafka through two client libraries (see docs/kafka-source.md and
docs/librdkafka.md):

* kafka-python on the driver, always (metadata, ListOffsets, group commits), and on
  executors with ``kafkaConsumer.client=kafka-python``;
* librdkafka on executors by default, for its C record decoding: through
  sparkbarrier's compiled fetcher (``native``) or confluent-kafka (``confluent``);
  both take the librdkafka settings made here.

Security options (protocol, SASL, TLS stores, in Java's or kafka-python's spelling)
are taken out first by :mod:`._security`, which derives both clients' settings from
one value. The rest are Kafka's dotted names (``kafka.request.timeout.ms`` ...):
validated against kafka-python's settings (the driver needs every one of them) and,
when the executors use librdkafka, mapped to librdkafka's names by :data:`_LIBRDKAFKA`.
A setting with no counterpart is an error at query start naming the option and the
fix; it is never dropped silently. Returned dicts are fresh; inputs are not mutated.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import cache
from typing import Any

from ...._exceptions import ConfigError
from ..._options import parse_bool, parse_int

__all__ = ["KAFKA_PYTHON_DEFAULTS", "ConsumerClient", "client_settings", "kafka_python_configs",
           "librdkafka_configs"]


class ConsumerClient(str, enum.Enum):
    """Which client reads records on the executors (``kafkaConsumer.client``)."""

    AUTO = "auto"  # NATIVE where the compiled module loads, else CONFLUENT
    NATIVE = "native"
    CONFLUENT = "confluent"
    KAFKA_PYTHON = "kafka-python"


# Settings the source decides itself; a user value would silently break reading.
_FORCED: Mapping[str, str] = {
    "group_id": "use the 'kafka.group.id' option",
    "enable_auto_commit": "offsets are committed by the source",
    "auto_offset_reset": "use startingOffsets",
    "key_deserializer": "records are returned as binary",
    "value_deserializer": "records are returned as binary",
    "allow_auto_create_topics": "the source never creates topics",
    "max_poll_records": "use the 'arrowBatchSize' option",
}


@cache
def _kafka_python_config() -> Mapping[str, Any]:
    """kafka-python's consumer settings and defaults, imported on first use: the driver's
    client, which executors reading through librdkafka never load."""
    from kafka import KafkaConsumer

    return dict(KafkaConsumer.DEFAULT_CONFIG)


KAFKA_PYTHON_DEFAULTS: Mapping[str, Any] = {
    # Java's default (1 s), not kafka-python's 30 s. kafka-python learns a partition's new
    # leader only when a reconnect to the dead one fails (that failure asks for fresh
    # metadata); until then a lookup waits inside the call. Its backoff doubles per
    # failure, so after a leader's broker died the driver asked again at ~6, ~13, ~25,
    # ~50 s: a leader moved at 9 s (Kafka's default broker.session.timeout.ms) was seen
    # at 12.6 s, one moved a little later at ~25 s or ~50 s (issue 33: batches stalled
    # 20-59 s). With 1 s the move is seen within about a second. A kafka.* option wins.
    "reconnect_backoff_max_ms": 1000,
}
"""kafka-python settings the source's own clients get unless a ``kafka.*`` option sets them."""

# kafka-python settings that take Python objects, not strings.
_OBJECT_SETTINGS = frozenset({"ssl_context", "selector", "socket_options", "metric_reporters",
                              "kafka_client", "partition_assignment_strategy",
                              "default_offset_commit_callback", "sasl_oauth_token_provider",
                              "consumer_timeout_ms"})

# kafka-python name -> librdkafka name (value passed as is).
_LIBRDKAFKA: Mapping[str, str] = {
    "client_id": "client.id",
    "client_rack": "client.rack",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_ciphers": "ssl.cipher.suites",
    "isolation_level": "isolation.level",
    "check_crcs": "check.crcs",
    "request_timeout_ms": "socket.timeout.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "fetch_min_bytes": "fetch.min.bytes",
    "fetch_max_bytes": "fetch.max.bytes",
    "fetch_max_wait_ms": "fetch.wait.max.ms",
    "max_partition_fetch_bytes": "max.partition.fetch.bytes",
    "receive_message_max_bytes": "receive.message.max.bytes",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "client_dns_lookup": "client.dns.lookup",
    "receive_buffer_bytes": "socket.receive.buffer.bytes",
    "send_buffer_bytes": "socket.send.buffer.bytes",
    # Group-membership timeouts: the source never joins a group, so both clients ignore
    # them in effect; passed on so a shared option map stays valid.
    "session_timeout_ms": "session.timeout.ms",
    "heartbeat_interval_ms": "heartbeat.interval.ms",
    "max_poll_interval_ms": "max.poll.interval.ms",
    "auto_commit_interval_ms": "auto.commit.interval.ms",
}

# Settings that tune kafka-python itself: its API-version probing, bootstrap wait,
# fetch-session protocol, metadata filter and metrics. They keep applying to the
# driver's kafka-python client. librdkafka has nothing of the kind to tune: it
# negotiates versions with every broker, retries bootstrap within the task's
# kafkaConsumer.pollTimeoutMs, and keeps its own statistics.
_KAFKA_PYTHON_ONLY = frozenset({
    "api_version", "api_version_auto_timeout_ms", "bootstrap_timeout_ms",
    "enable_incremental_fetch_sessions", "exclude_internal_topics", "metric_group_prefix",
    "metrics_enabled", "metrics_num_samples", "metrics_sample_window_ms",
})


def _client_value(key: str, name: str, raw: str) -> Any:
    """Convert a string to the type of kafka-python's default for ``name``."""
    if name in _OBJECT_SETTINGS:
        raise ConfigError(f"option {key!r} takes a Python object in kafka-python and cannot be "
                          f"set from an option string; remove it", option=key)
    if name == "api_version":
        parts = raw.strip().split(".")
        if not all(p.isdigit() for p in parts):
            raise ConfigError(f"option {key!r} must look like '3.7' or '2.8.1', got {raw!r}",
                              option=key)
        return tuple(int(p) for p in parts)
    default = _kafka_python_config()[name]
    if isinstance(default, bool):
        return parse_bool(key, raw)
    if isinstance(default, int) or name.endswith(("_ms", "_bytes", "_records")):
        return parse_int(key, raw, minimum=0)
    return raw


def kafka_python_configs(passthrough: Mapping[str, str]) -> dict[str, Any]:
    """Map Kafka's dotted ``kafka.*`` names to kafka-python keyword arguments."""
    configs: dict[str, Any] = {}
    for key, raw in passthrough.items():
        if key == "kafka.group.id":
            continue
        dotted = key[len("kafka."):]
        name = dotted.replace(".", "_")
        if name in _FORCED:
            raise ConfigError(f"option {key!r} is set by the source and cannot be changed "
                              f"({_FORCED[name]})", option=key)
        if name not in _kafka_python_config():
            raise ConfigError(
                f"option {key!r} is not a Kafka client setting barrier-kafka can pass on "
                f"(kafka-python has no {name!r}); check its spelling against Kafka's consumer "
                f"configs, or see docs/secured-kafka.md for the security options",
                option=key,
            )
        configs[name] = _client_value(key, name, raw)
    if "isolation_level" in configs and configs["isolation_level"] not in (
        "read_committed", "read_uncommitted"
    ):
        raise ConfigError("option 'kafka.isolation.level' must be read_committed or "
                          "read_uncommitted", option="kafka.isolation.level")
    return configs


def librdkafka_configs(kafka_python: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka settings equivalent to validated kafka-python ``kafka_python`` configs.

    Called at query start when the executors read with librdkafka, so a setting
    it cannot honour fails ``load()``, naming the option, instead of a task.
    """
    out: dict[str, Any] = {}
    for name, value in kafka_python.items():
        if name in _KAFKA_PYTHON_ONLY:
            continue
        target = _LIBRDKAFKA.get(name)
        if target is None:
            key = "kafka." + name.replace("_", ".")
            raise ConfigError(
                f"option {key!r} has no equivalent in librdkafka, which reads records on the "
                f"executors by default; remove it, or set kafkaConsumer.client=kafka-python "
                f"to read with kafka-python (slower)", option=key)
        out[target] = value
    return out


def client_settings(properties: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python keyword arguments from Kafka client properties as Java tools take them
    (``security.protocol=SASL_SSL``, ``ssl.truststore.location=...``; no ``kafka.`` prefix).

    For the tools beside a query (``sparkbarrier status --command-config``, like Kafka's
    own CLI tools), so they connect to a secured cluster exactly as the source does.
    """
    from ._security import parse_security

    prefixed = {"kafka." + k.strip(): v.strip() for k, v in properties.items()}
    security = parse_security(prefixed)
    for key in ("kafka.bootstrap.servers", "kafka.group.id"):
        prefixed.pop(key, None)
    return {**kafka_python_configs(prefixed), **security.kafka_python()}
