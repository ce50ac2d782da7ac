"""Keep secrets out of the Kafka clients' log lines and error messages.

kafka-python: ``KafkaAdminClient`` logs its whole configuration at DEBUG, including
``sasl_plain_password`` and ``ssl_password``. A filter on that logger replaces
the values of secret-looking keys (see ``is_secret_key``) before any handler
sees the record. Installed once, at import of the modules that create clients.

librdkafka (confluent-kafka): it redacts its own sensitive properties, but its
log lines and error strings are free text we do not control. :class:`SecretScrubber`
knows the secret *values* of one consumer's settings and replaces them in any text;
the executor routes librdkafka's log through it and scrubs every client error it
turns into an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..._options import is_secret_key, redact
from ._failover import librdkafka_log_level

__all__ = ["SecretScrubber", "install_client_log_redaction"]

# kafka-python loggers known to print client configurations.
_CONFIG_LOGGERS = ("kafka.admin.client", "kafka.consumer.group", "kafka.producer.kafka")


class _RedactConfigs(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, Mapping):
            record.args = redact(args)
        elif isinstance(args, tuple) and any(isinstance(a, Mapping) for a in args):
            record.args = tuple(redact(a) if isinstance(a, Mapping) else a for a in args)
        return True


_FILTER = _RedactConfigs()


class _SlowTaskNotice(logging.Filter):
    """kafka-python 3's event loop warns "Task ... ran for 0.6s (>0.100s threshold). It is
    blocking the event loop" when a synchronous call (a lookup, a commit) holds it; on
    the driver that is expected and says nothing a user can act on, yet it reached the
    console every few batches. Only that message is dropped; the logger's other
    warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "blocking the event loop" not in str(record.msg)


_SLOW = _SlowTaskNotice()


def install_client_log_redaction() -> None:
    """Idempotent: add the redacting filter to kafka-python's config-printing loggers
    (and drop its slow-task notice, see :class:`_SlowTaskNotice`)."""
    for name in _CONFIG_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    selector = logging.getLogger("kafka.net.selector")
    if _SLOW not in selector.filters:
        selector.addFilter(_SLOW)


class SecretScrubber:
    """Replaces the secret values of one client's settings in free text.

    Also serves as confluent-kafka's ``logger`` setting (it calls ``log(level, fmt,
    *args)``): lines are formatted, scrubbed and passed to the ``logger`` given, at
    ``level`` when one is given (the query-start check logs every librdkafka line at
    DEBUG: its outcome is reported once, by the error it raises).
    """

    def __init__(self, configs: Mapping[str, Any], logger: logging.Logger, *, level: int | None = None) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({str(v) for k, v in configs.items()
                                if is_secret_key(k) and str(v)}, key=len, reverse=True)
        self._logger = logger
        self._level = level

    def __call__(self, text: object) -> str:
        out = str(text)
        for secret in self._secrets:
            out = out.replace(secret, "***")
        return out

    def log(self, level: int, fmt: str, *args: object) -> None:
        text = fmt % args if args else fmt
        level = self._level if self._level is not None else librdkafka_log_level(level, text)
        if self._logger.isEnabledFor(level):
            self._logger.log(level, "%s", self(text))
