"""One map from the Thrift clients' exceptions to sparkbarrier's documented error tree.

Why one place: a call to HBase can fail in four ways that need four different answers,
and the answer must not depend on which module made the call. Before this module the same
server error was put into words in seven files with three "first line of the message"
helpers, so one refusal read differently in the sink, the reader and the status CLI.

The map (``_exceptions.py`` holds the tree):

====================================================  =========================================
raised by happybase / thriftpy2 / ``ssl`` / ``gssapi``  becomes
====================================================  =========================================
``ssl.SSLError``, ``ssl.CertificateError``             :class:`SinkError` at once, naming
(:data:`TLS_ERRORS`)                                   ``hbase.thrift.tls.*``: a certificate the
                                                       CA did not sign cannot heal, so no retry
                                                       and no failover (:func:`tls_error`)
a refused login or SASL handshake                      :class:`KerberosError` (raised by the
                                                       login itself), never wrapped: its
                                                       ``option`` names the fix
a file an option names that cannot be read or          :class:`ConfigError` naming the option,
loaded (CA, client certificate or key, keytab)         before any gateway is tried (``_tls``,
                                                       ``_transport``): never retried
transport: ``TTransportException``, socket errors,     retried by ``GatewayConnection.call`` (and
EOF (:data:`TRANSPORT_ERRORS`)                         ``.scan``, Thrift1 and Thrift2 alike) on a
                                                       fresh socket and the next gateways; when
                                                       none answers, :class:`SinkError` "cannot
                                                       reach ..." naming every gateway
the server's answer: ``IOError``/``IllegalArgument``   :class:`SinkError` (or the caller's
(Thrift1), ``TIOError``/``TIllegalArgument``           narrower kind, :class:`FlushError`) with
(Thrift2), ``TApplicationException``                   what was being done and the first line
                                                       of the server's message (:func:`refused`)
====================================================  =========================================

The server sends a whole Java stack trace as the message of an ``IOError``; only its first
line is kept (:func:`first_line`), so every error is one line a user can read.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from ...._exceptions import SinkError, SparkBarrierError

__all__ = [
    "OPEN_ERRORS",
    "SERVER_ERRORS",
    "TLS_ERRORS",
    "TRANSPORT_ERRORS",
    "first_line",
    "refusals",
    "refused",
    "tls_error",
    "unreachable",
]

TLS_ERRORS: tuple[type[BaseException], ...] = (ssl.SSLError, ssl.CertificateError)
"""Certificate and handshake failures: permanent, so never retried."""

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    TTransportException,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionRefusedError,
    ConnectionAbortedError,
    socket.timeout,
    EOFError,
)
"""A socket that died or never opened: a fresh socket or another gateway may heal it."""

OPEN_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, OSError)
"""What opening a socket may raise (a refused or unroutable address is an ``OSError``)."""

SERVER_ERRORS: tuple[type[BaseException], ...] = (TException,)
"""The server's own answer (after ``GatewayConnection.call`` has retried the transport)."""

_TLS_FIX = ("check hbase.thrift.tls.ca (the CA that signed the gateway's certificate), the host name the "
            "certificate names (hbase.thrift.tls.verify-hostname) and hbase.thrift.tls.cert/key")


def first_line(exc: BaseException, *, typed: bool = False) -> str:
    """The first line of an error's message (Thrift messages may be undecoded bytes).

    ``typed`` prefixes the exception's type, for errors whose message alone is ambiguous
    (a bare ``EOFError`` has none).
    """
    message = getattr(exc, "message", None)
    if message is None:
        message = exc.args[0] if exc.args else ""
    if isinstance(message, bytes):
        message = message.decode(errors="replace")
    lines = str(message).splitlines()
    first = lines[0].strip()[:200] if lines else ""
    if not first:
        return type(exc).__name__
    return f"{type(exc).__name__}: {first}" if typed else first


def tls_error(where: str, exc: BaseException, *, during: str | None = None) -> SinkError:
    """TLS to ``where`` failed: fail at once with the reason and the options to check."""
    doing = f" during {during}" if during else ""
    return SinkError(f"TLS to the {where} failed{doing} ({type(exc).__name__}: {exc}); {_TLS_FIX}")


def unreachable(where: str, during: str, exc: BaseException, fix: str) -> SinkError:
    """``where`` did not answer ``during`` one call (its own client, no failover)."""
    return SinkError(f"cannot reach the {where} during {during} ({first_line(exc, typed=True)}); {fix}")


def refused(what: str, exc: BaseException, *, error: type[SparkBarrierError] = SinkError, fix: str = "",
            **fields: int | str | None) -> SparkBarrierError:
    """``what`` failed with ``exc``: one line of the documented ``error`` kind; ``fields`` are
    ``error``'s context attributes (``batch_id``, ``option``, ...)."""
    tail = f"; {fix}" if fix else ""
    return error(f"{what}: {first_line(exc)}{tail}", **fields)


@contextmanager
def refusals(what: str, *, error: type[SparkBarrierError] = SinkError, fix: str = "",
             also: tuple[type[BaseException], ...] = (), **fields: int | str | None) -> Iterator[None]:
    """Raise :func:`refused` for a server error inside the block (``also``: more kinds to wrap,
    e.g. a :class:`SinkError` that a :class:`FlushError` must carry).

    A :class:`KerberosError` is never caught: it is not in :data:`SERVER_ERRORS`, and its
    ``option`` must reach the user unchanged.
    """
    try:
        yield
    except SERVER_ERRORS + also as exc:
        raise refused(what, exc, error=error, fix=fix, **fields) from exc
