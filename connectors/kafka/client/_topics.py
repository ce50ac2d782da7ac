"""Partitions of topics for the tools beside a query, from Spark's ``kafka.*`` options.

Why here: ``starting_offsets_from_sink`` fills in the partitions a commit record lacks,
and must reach a secured cluster exactly as the source does. So it takes the source's
own option names (``kafka.bootstrap.servers``, ``kafka.security.protocol``,
``kafka.sasl.*``, ``kafka.ssl.*``: Spark's ``format("kafka")`` names), turned into
kafka-python settings by the code the source and the status CLI use
(:func:`._client_config.client_settings`, which parses them with ``_security``). A
GSSAPI login is checked with the KDC first (:func:`preflight`): kafka-python would only
time out bootstrapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...._exceptions import ConfigError, SourceError
from ._client_config import client_settings

__all__ = ["client_options", "preflight", "topic_partitions"]

_PREFIX = "kafka."
_BOOTSTRAP = "kafka.bootstrap.servers"
_TIMEOUT_MS = 30_000


def client_options(options: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """``(bootstrap servers, kafka-python settings)`` from Spark-style ``kafka.*`` options.

    Only client options: a key without the ``kafka.`` prefix (a source option such as
    ``subscribe``) is an error naming it, as is a missing ``kafka.bootstrap.servers``.
    The input is not mutated.
    """
    other = sorted(key for key in options if not key.lower().startswith(_PREFIX))
    if other:
        raise ConfigError(f"option {other[0]!r} is not a Kafka client option: give Spark's kafka.* names "
                          "(kafka.bootstrap.servers, kafka.security.protocol, kafka.sasl.*, kafka.ssl.*)",
                          option=other[0])
    bootstrap = next((value.strip() for key, value in options.items() if key.lower() == _BOOTSTRAP), "")
    if not bootstrap:
        raise ConfigError(f"option {_BOOTSTRAP!r} is required to look up the topics' partitions", option=_BOOTSTRAP)
    return bootstrap, client_settings({key[len(_PREFIX):]: value for key, value in options.items()})


def preflight(bootstrap: str, settings: Mapping[str, Any]) -> None:
    """With GSSAPI, log in and ask for the brokers' service tickets now, so a Kerberos mistake
    is a :class:`~...._exceptions.KerberosError` naming its option, not a bootstrap timeout."""
    from ._kerberos import KerberosLogin

    login = settings.get("sasl_kerberos_name")
    if isinstance(login, KerberosLogin):
        from ._kerberos_check import check_kerberos

        check_kerberos(login.kerberos, bootstrap, settings.get("sasl_kerberos_domain_name"))


def topic_partitions(bootstrap: str, settings: Mapping[str, Any], topics: Iterable[str]) -> dict[str, set[int]]:
    """Partition ids of each of ``topics`` that exists (a missing one is left out: the caller names it).

    Raises :class:`SourceError` when Kafka cannot be reached with these settings.
    """
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    wanted = list(topics)
    preflight(bootstrap, settings)
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 **{"request_timeout_ms": _TIMEOUT_MS + 1000, **settings})
    except KafkaError as exc:
        raise SourceError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    try:
        existing = consumer.topics()
        return {t: set(consumer.partitions_for_topic(t) or ()) for t in wanted if t in existing}
    except KafkaError as exc:
        raise SourceError(f"cannot list the partitions of {sorted(wanted)} on {bootstrap}: {exc}") from exc
    finally:
        consumer.close()
