"""Keep secrets out of kafka-python's own log lines.

``KafkaAdminClient`` logs its whole configuration at DEBUG, including
``sasl_plain_password`` and ``ssl_password``. A filter on that logger replaces
the values of secret-looking keys (see ``is_secret_key``) before any handler
sees the record. Installed once, at import of the modules that create clients.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .._options import redact

__all__ = ["install_client_log_redaction"]

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


def install_client_log_redaction() -> None:
    """Idempotent: add the redacting filter to kafka-python's config-printing loggers."""
    for name in _CONFIG_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
