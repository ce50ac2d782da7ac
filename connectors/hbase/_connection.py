"""One happybase connection with a single reconnect-and-retry on transport errors.

The HBase Thrift server closes sockets idle for 60 s (``hbase.thrift.server.socket.read.timeout``
/ connection cleaner), so a long-lived executor connection meets a dead socket on its
next call. :meth:`HBaseConnection.call` retries such a call exactly once on a fresh
connection. Callers only pass idempotent calls (puts with explicit timestamps, gets,
table admin); ``checkAndPut`` callers re-read after a retry to learn the outcome.
Created lazily so a pickled writer never carries a socket.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import happybase
from thriftpy2.transport import TTransportException

from ..._exceptions import SinkError

__all__ = ["HBaseConnection", "TRANSPORT_ERRORS", "open_connection"]

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    TTransportException,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionRefusedError,
    ConnectionAbortedError,
    socket.timeout,
    EOFError,
)


def open_connection(host: str, port: int, transport: str, protocol: str, timeout_ms: int) -> happybase.Connection:
    return happybase.Connection(
        host=host, port=port, timeout=timeout_ms, transport=transport, protocol=protocol,
        autoconnect=True,
    )


class HBaseConnection:
    """Lazy, self-healing access to the Thrift client (``.client``) of one server."""

    def __init__(self, host: str, port: int, *, transport: str = "buffered",
                 protocol: str = "binary", timeout_ms: int = 60_000) -> None:
        self.host, self.port = host, port
        self._transport, self._protocol, self._timeout_ms = transport, protocol, timeout_ms
        self._conn: happybase.Connection | None = None

    @classmethod
    def from_options(cls, opts: Any) -> HBaseConnection:
        return cls(opts.host, opts.port, transport=opts.transport, protocol=opts.protocol,
                   timeout_ms=opts.timeout_ms)

    def _open(self) -> happybase.Connection:
        try:
            return open_connection(self.host, self.port, self._transport, self._protocol, self._timeout_ms)
        except TRANSPORT_ERRORS + (OSError,) as exc:
            raise SinkError(
                f"cannot reach the HBase Thrift server at {self.host}:{self.port} "
                f"({type(exc).__name__}: {exc}); is it running and are hbase.thrift.* right?"
            ) from exc

    @property
    def connection(self) -> happybase.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def reconnect(self) -> None:
        self.close()
        self._conn = self._open()

    def call(self, fn: Callable[[happybase.Connection], T]) -> T:
        """Run ``fn(connection)``; on a transport error retry once on a fresh socket."""
        try:
            return fn(self.connection)
        except TRANSPORT_ERRORS as exc:
            log.info("HBase Thrift transport to %s:%s failed (%s); reconnecting once",
                     self.host, self.port, exc)
            self.reconnect()
            try:
                return fn(self.connection)
            except TRANSPORT_ERRORS as again:
                raise SinkError(
                    f"HBase Thrift server {self.host}:{self.port} failed twice: {again}"
                ) from again

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except TRANSPORT_ERRORS as exc:
                log.debug("ignoring error while closing a dead HBase connection: %s", exc)
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        return state
