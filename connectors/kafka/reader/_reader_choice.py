"""Which client reads records on the executors (``kafkaConsumer.client``): one place.

Two moments decide it:

* query start, on the driver (:func:`parse_source_options`, which parses the options
  and then calls :func:`client_at_query_start`): an explicit choice that cannot work
  fails ``load()`` with the reason and the fix -- ``native`` where the compiled module
  does not load, ``native`` or ``confluent`` with GSSAPI -- and ``auto`` with GSSAPI
  becomes ``kafka-python`` (the only client path here that logs in with Kerberos; see
  ``_kerberos``), so every executor gets that answer with the options;
* each task, on the executor (:func:`reader_for`): ``auto`` picks the compiled
  reader where it loads on *that* machine, else confluent-kafka with a warning.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING

from ...._exceptions import ConfigError
from .._options import KafkaSourceOptions, parse_declared_options
from ..client._client_config import ConsumerClient, librdkafka_configs

if TYPE_CHECKING:
    import pyarrow as pa

    from ..client._security import Security
    from ._offset_range import KafkaRangePartition

__all__ = ["client_at_query_start", "parse_source_options", "reader_for"]

log = logging.getLogger(__name__)
OPTION = "kafkaConsumer.client"


def parse_source_options(raw: Mapping[str, str]) -> KafkaSourceOptions:
    """Spark's option map → :class:`KafkaSourceOptions` with the executors' client decided
    (query start: errors name the option and the fix). librdkafka's settings are derived
    only for a librdkafka client, so a setting only kafka-python has fails only there."""
    parsed = parse_declared_options(raw)
    client = client_at_query_start(parsed.consumer_client, parsed.security)
    settings = librdkafka_configs(parsed.client_configs) if client is not ConsumerClient.KAFKA_PYTHON else {}
    return dataclasses.replace(parsed, consumer_client=client, librdkafka_configs=settings)


def client_at_query_start(client: ConsumerClient, security: Security) -> ConsumerClient:
    """The client the executors will use; raises :class:`ConfigError` naming
    ``kafkaConsumer.client`` when the explicit choice cannot work (driver, query start)."""
    if security.kerberos is not None:
        from ..client._kerberos import librdkafka_gssapi

        if client in (ConsumerClient.NATIVE, ConsumerClient.CONFLUENT):
            raise ConfigError(
                f"option {OPTION!r} is {client.value}, but kafka.sasl.mechanism=GSSAPI and "
                f"{librdkafka_gssapi()}; set {OPTION}=auto or kafka-python (kafka-python "
                f"logs in with Kerberos)", option=OPTION)
        if client is ConsumerClient.AUTO:
            _tell_gssapi_choice(librdkafka_gssapi())
            return ConsumerClient.KAFKA_PYTHON
        return client
    if client is ConsumerClient.NATIVE:
        from ._native_reader import available

        if (reason := available()) is not None:
            raise ConfigError(
                f"option {OPTION!r} is native, but {reason}; install librdkafka's headers "
                f"(Debian: apt-get install librdkafka-dev) and reinstall sparkbarrier, or set "
                f"{OPTION}=auto", option=OPTION)
    return client


@cache
def _tell_gssapi_choice(reason: str) -> None:
    log.info("barrier-kafka: kafkaConsumer.client=auto reads with kafka-python because "
             "kafka.sasl.mechanism=GSSAPI and %s", reason)


Reader = Callable[["KafkaSourceOptions", "KafkaRangePartition", "pa.Schema"],
                  Iterator["pa.RecordBatch"]]


def reader_for(options: KafkaSourceOptions) -> Reader:
    """The read path ``kafkaConsumer.client`` selects, resolving ``auto`` on this executor."""
    client = options.consumer_client
    if client is ConsumerClient.KAFKA_PYTHON:
        from ._kafka_python_reader import read_records
        return read_records
    if client is not ConsumerClient.CONFLUENT:
        from ._native_reader import available, read_records
        if (reason := available()) is None:
            return read_records
        if client is ConsumerClient.NATIVE:  # checked at query start; this executor differs
            raise ConfigError(f"option {OPTION!r} is native, but on this executor {reason}",
                              option=OPTION)
        _warn_fallback(reason)
    from ._confluent_reader import read_records
    return read_records


@cache
def _warn_fallback(reason: str) -> None:
    log.warning("barrier-kafka: kafkaConsumer.client=auto reads with confluent-kafka because "
                "%s (the native reader is faster)", reason)
