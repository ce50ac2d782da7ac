"""``kafka.*`` options -> the settings of the two Kafka clients, in one place.

The source talks to Kafka through two clients (see the README, "choice of client"):

* kafka-python on the driver, always (metadata, ListOffsets, group commits), and on
  executors with ``kafkaConsumer.client=kafka-python``;
* librdkafka on executors by default, for its C record decoding: through
  sparkbarrier's compiled fetcher (``native``) or confluent-kafka (``confluent``).

Users write Kafka's dotted names once (``kafka.security.protocol``,
``kafka.sasl.jaas.config``, ``kafka.ssl.cafile`` ...). They are validated against
kafka-python's settings (the driver needs every one of them) and, when the executors
use confluent-kafka, mapped to librdkafka's names by :data:`_LIBRDKAFKA`. A setting
with no librdkafka counterpart is an error at query start naming the option and the
fix; it is never dropped silently. Returned dicts are fresh; inputs are not mutated.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from typing import Any

from kafka import KafkaConsumer

from ..._exceptions import ConfigError
from .._options import parse_bool, parse_int

__all__ = ["ConsumerClient", "kafka_python_configs", "librdkafka_configs"]


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
_KAFKA_PYTHON_CONFIG: Mapping[str, Any] = dict(KafkaConsumer.DEFAULT_CONFIG)
_JAAS_RE = re.compile(r'(\w+)\s*=\s*"([^"]*)"')

# kafka-python settings that take Python objects, not strings.
_OBJECT_SETTINGS = frozenset({"ssl_context", "selector", "socket_options", "metric_reporters",
                              "kafka_client", "partition_assignment_strategy",
                              "default_offset_commit_callback", "sasl_oauth_token_provider",
                              "consumer_timeout_ms"})

# kafka-python name -> librdkafka name (value passed as is), or (name, value converter).
_LIBRDKAFKA: Mapping[str, str | tuple[str, Callable[[Any], Any]]] = {
    "client_id": "client.id",
    "client_rack": "client.rack",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_ciphers": "ssl.cipher.suites",
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm",
                           lambda on: "https" if on else "none"),
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
    default = _KAFKA_PYTHON_CONFIG[name]
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
        if dotted == "sasl.jaas.config":
            fields = dict(_JAAS_RE.findall(raw))
            if "username" not in fields or "password" not in fields:
                raise ConfigError(
                    f"option {key!r}: only PlainLoginModule/ScramLoginModule with "
                    f'username="..." password="..." is supported',
                    option=key,
                )
            configs["sasl_plain_username"] = fields["username"]
            configs["sasl_plain_password"] = fields["password"]
            continue
        name = dotted.replace(".", "_")
        if name in _FORCED:
            raise ConfigError(f"option {key!r} is set by the source and cannot be changed "
                              f"({_FORCED[name]})", option=key)
        if name not in _KAFKA_PYTHON_CONFIG:
            raise ConfigError(
                f"option {key!r} is not a setting the Python Kafka client understands "
                f"(kafka-python has no {name!r}); remove it",
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
            key = ("kafka.sasl.jaas.config" if name.startswith("sasl_plain_")
                   else "kafka." + name.replace("_", "."))
            raise ConfigError(
                f"option {key!r} has no equivalent in librdkafka, which reads records on the "
                f"executors by default; remove it, or set kafkaConsumer.client=kafka-python "
                f"to read with kafka-python (slower)", option=key)
        if isinstance(target, tuple):
            out[target[0]] = target[1](value)
        else:
            out[target] = value
    return out
