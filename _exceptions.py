"""Exceptions raised by sparkbarrier.

The tree::

    SparkBarrierError
    ├── ConfigError                 bad option / value; raised at query start
    │   └── KerberosError           a Kerberos login or SASL handshake refused, on either
    │                               hop (Kafka GSSAPI, HBase Thrift SASL); ``option`` names the fix
    ├── ProtocolError               checkpoint protocol violated (barrier/, state/)
    │   ├── StateCompatibilityError restored state belongs to another source/sink
    │   └── CorruptStateError       a state file fails its checksum or version check
    ├── SourceError                 the Kafka source cannot continue
    │   └── DataLossError           offsets vanished (retention, deleted topic)
    ├── SinkError                   a sink cannot continue (barrier-hbase, any checkpointed sink)
    │   ├── FencedError             another writer committed under the same sink id
    │   ├── FlushError              buffered mutations could not be written
    │   └── FileSystemError         the checkpoint's file system refused a call that cannot
    │                               heal, or stayed unavailable past its retry bound (an OSError)
    └── DevstackError               the local Kafka/HBase dev stack cannot start/stop

Every exception carries its context as attributes so callers never parse messages.
The clients' own exceptions become these in one place per client: HBase's Thrift,
TLS and socket errors in ``connectors/hbase/client/_errors.py``; Kafka's retriable and fatal
errors (both client libraries) in ``connectors/kafka/client/_failover.py``; WebHDFS answers and
network errors in ``connectors/storage/_webhdfs.py``.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = [
    "ConfigError",
    "CorruptStateError",
    "DataLossError",
    "DevstackError",
    "FencedError",
    "FileSystemError",
    "FlushError",
    "KerberosError",
    "ProtocolError",
    "SinkError",
    "SourceError",
    "SparkBarrierError",
    "StateCompatibilityError",
]


class SparkBarrierError(Exception):
    """Root of every error raised by sparkbarrier."""


class ConfigError(SparkBarrierError, ValueError):
    """An option is missing, unknown or has a bad value.

    ``option`` names the option (as the user spelled it where known); the
    message always says how to fix it.
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class KerberosError(ConfigError):
    """Kerberos or SASL refused: bad credentials, an unknown principal, no ticket, a qop
    mismatch. Permanent (retrying cannot heal it), so a configuration error: ``option``
    names what to fix, ``gateway`` where (HBase), on the Kafka and the HBase hop alike.
    ``code``: the status code it was classified by (MIT's minor status, else the GSS-API
    major status; None when the refusal did not come from ``gssapi``)."""

    def __init__(self, message: str, *, option: str | None = None,
                 gateway: str | None = None, code: int | None = None) -> None:
        super().__init__(message, option=option)
        self.gateway = gateway
        self.code = code


class ProtocolError(SparkBarrierError):
    """The checkpoint protocol was violated (e.g. a barrier id seen twice on a channel)."""

    def __init__(
        self, message: str, *, checkpoint_id: int | None = None, channel: Hashable | None = None
    ) -> None:
        super().__init__(message)
        self.checkpoint_id = checkpoint_id
        self.channel = channel


class StateCompatibilityError(ProtocolError):
    """Restored state was written for another topic set or sink id."""


class CorruptStateError(ProtocolError):
    """A persisted state file is torn, tampered with or of an unknown version.

    ``path`` is the file; the message says how to recover.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class SourceError(SparkBarrierError):
    """The Kafka source cannot continue."""

    def __init__(self, message: str, *, topic_partition: str | None = None) -> None:
        super().__init__(message)
        self.topic_partition = topic_partition


class DataLossError(SourceError):
    """Offsets that were planned are no longer available in Kafka."""


class SinkError(SparkBarrierError):
    """A sink cannot continue; ``batch_id`` is the Spark batch it was writing or committing."""

    def __init__(self, message: str, *, batch_id: int | None = None) -> None:
        super().__init__(message)
        self.batch_id = batch_id


class FencedError(SinkError):
    """Another writer committed a checkpoint under the same ``sink.id``."""


class FlushError(SinkError):
    """Buffered mutations could not be written to HBase."""


class FileSystemError(SinkError, OSError):
    """A call on the checkpoint's file system failed for good: the NameNodes stayed down or
    not ready past the retry bound, or one refused what cannot heal (a permission).

    Also an :class:`OSError`, as the file-system errors it replaces, so code that handles
    "cannot reach the file system" keeps handling it. ``location`` is the path called on;
    ``namenodes`` the addresses tried, each with where it came from; ``user`` whom the
    NameNode was asked as; ``transient`` whether every answer could have healed (the
    bound ran out) rather than one refusing for good.
    """

    def __init__(self, message: str, *, location: str, namenodes: tuple[str, ...] = (),
                 user: str | None = None, transient: bool = False) -> None:
        SinkError.__init__(self, message)
        self.location = location
        self.namenodes = namenodes
        self.user = user
        self.transient = transient

    def __str__(self) -> str:  # OSError's own __str__ would show the args tuple's first item only
        return str(self.args[0]) if self.args else ""


class DevstackError(SparkBarrierError):
    """The local dev stack (``python -m sparkbarrier.devstack``) cannot do what was asked.

    ``cause`` names what is wrong and ``fix`` what to do about it; ``str()`` joins them
    into the one line the CLI prints. ``log_path``/``log_tail`` point at the failing
    server's log when a server died or never became healthy.
    """

    def __init__(
        self,
        cause: str,
        *,
        fix: str,
        log_path: str | None = None,
        log_tail: str | None = None,
    ) -> None:
        super().__init__(f"{cause}; fix: {fix}")
        self.cause = cause
        self.fix = fix
        self.log_path = log_path
        self.log_tail = log_tail
