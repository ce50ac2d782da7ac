"""A happybase connection to one of several Thrift gateways, failing over on transport errors.

The HBase Thrift server closes sockets idle for 60 s (``hbase.thrift.server.socket.read.timeout``
/ connection cleaner), so a long-lived executor connection meets a dead socket on its
next call; a gateway may also restart or die. :meth:`HBaseConnection.call` then retries
the call on a fresh socket: first to the same gateway, then to the next ones in the
partition's spreading order (``_gateways.spread``), for ``rounds`` passes with
``backoff_ms`` between passes, and finally raises a :class:`SinkError` naming every
gateway. Failing over in the middle of a batch is safe because callers only pass
idempotent calls (puts with explicit timestamps, gets, table admin); ``checkAndPut``
callers re-read after a retry to learn the outcome. A gateway that fails is named in
one warning per connection. Created lazily so a pickled writer never carries a socket.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import happybase

from ..._exceptions import ConfigError, SinkError
from ._errors import OPEN_ERRORS, TLS_ERRORS, TRANSPORT_ERRORS, tls_error
from ._gateways import Gateway, describe, spread
from ._options import HBaseConnectionOptions, parse_connection_options
from ._sasl import KerberosSettings, sasl_protocol, sasl_transport
from ._tls import TlsSettings, https_protocol, https_transport

__all__ = ["HBaseConnection", "open_connection", "connection_options"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def open_connection(host: str, port: int, transport: str, protocol: str, timeout_ms: int,
                    tls: TlsSettings | None = None, kerberos: KerberosSettings | None = None) -> happybase.Connection:
    if kerberos is not None:
        return _SaslConnection(kerberos, host=host, port=port, timeout=timeout_ms, protocol=protocol,
                               autoconnect=True)
    if tls is not None:
        return _TlsConnection(tls, host=host, port=port, timeout=timeout_ms, protocol=protocol, autoconnect=True)
    return happybase.Connection(
        host=host, port=port, timeout=timeout_ms, transport=transport, protocol=protocol,
        autoconnect=True,
    )


class _TlsConnection(happybase.Connection):
    """happybase over Thrift-over-HTTPS (the only TLS HBase's gateways offer, see ``_tls``).

    happybase builds its client in ``_refresh_thrift_client`` from a plain ``TSocket``;
    this override swaps in the HTTPS transport and keeps the rest of happybase.
    """

    def __init__(self, tls: TlsSettings, protocol: str = "binary", **kwargs: Any) -> None:
        self._tls, self._protocol_name = tls, protocol
        super().__init__(protocol=protocol, **kwargs)

    def _refresh_thrift_client(self) -> None:
        from happybase.connection import Hbase
        from thriftpy2.thrift import TClient

        self.transport = https_transport(self.host, self.port, self.timeout, self._tls)
        self.client = TClient(Hbase, https_protocol(self._protocol_name, self.transport))


class _SaslConnection(happybase.Connection):
    """happybase over SASL/GSSAPI (Kerberos), as a gateway with ``hbase.thrift.security.qop`` speaks it.

    The SASL transport does its own framing, so ``hbase.thrift.transport`` does not apply;
    the protocol is the Cython binary one over thriftpy2's Cython SASL transport (see ``_sasl``).
    """

    def __init__(self, kerberos: KerberosSettings, protocol: str = "binary", **kwargs: Any) -> None:
        self._kerberos, self._protocol_name = kerberos, protocol
        super().__init__(protocol=protocol, **kwargs)

    def _refresh_thrift_client(self) -> None:
        from happybase.connection import Hbase
        from thriftpy2.thrift import TClient

        self.transport = sasl_transport(self.host, self.port, self.timeout, self._kerberos)
        self.client = TClient(Hbase, sasl_protocol(self._protocol_name, self.transport))


class HBaseConnection:
    """Lazy, self-healing access to the Thrift client (``.client``) of one gateway out of several.

    ``gateways`` (default: just ``host:port``) in the order this connection prefers them;
    :meth:`from_options` orders them by ``spread_index`` (the task's or read partition's
    index) so partitions spread evenly and deterministically.
    """

    def __init__(self, host: str, port: int, *, transport: str = "buffered",
                 protocol: str = "binary", timeout_ms: int = 60_000,
                 gateways: tuple[Gateway, ...] | None = None, rounds: int = 1,
                 backoff_ms: int = 0, tls: TlsSettings | None = None,
                 kerberos: KerberosSettings | None = None) -> None:
        self._gateways = gateways or (Gateway(host, port),)
        self._current = 0
        self._transport, self._protocol, self._timeout_ms = transport, protocol, timeout_ms
        self._rounds, self._backoff_ms = rounds, backoff_ms
        self._tls, self._kerberos = tls, kerberos
        self._warned: set[Gateway] = set()
        self._conn: happybase.Connection | None = None

    @classmethod
    def from_options(cls, opts: HBaseConnectionOptions, spread_index: int = 0) -> HBaseConnection:
        gateways = spread(opts.gateways, spread_index)
        return cls(gateways[0].host, gateways[0].port, transport=opts.transport, protocol=opts.protocol,
                   timeout_ms=opts.timeout_ms, gateways=gateways, rounds=opts.failover_rounds,
                   backoff_ms=opts.failover_backoff_ms, tls=opts.tls, kerberos=opts.kerberos)

    @property
    def gateway(self) -> Gateway:
        """The gateway this connection uses now (or will try first)."""
        return self._gateways[self._current]

    @property
    def host(self) -> str:
        return self.gateway.host

    @property
    def port(self) -> int:
        return self.gateway.port

    def _open(self, gateway: Gateway) -> happybase.Connection:
        return open_connection(gateway.host, gateway.port, self._transport, self._protocol, self._timeout_ms,
                               self._tls, self._kerberos)

    @property
    def connection(self) -> happybase.Connection:
        if self._conn is None:
            self._failover(lambda c: None, first=None)
        if self._conn is None:  # _failover connects or raises; explicit, unlike assert
            raise SinkError("no connection to any HBase Thrift gateway")
        return self._conn

    def reconnect(self) -> None:
        """A fresh socket: to the current gateway if it answers, else to the next live one."""
        self.close()
        self._failover(lambda c: None, first=None)

    def failover(self) -> None:
        """Move to the next gateway that opens (callers whose call died with a transport error)."""
        self.close()
        self._current = (self._current + 1) % len(self._gateways)
        self._failover(lambda c: None, first=None)

    def call(self, fn: Callable[[happybase.Connection], T]) -> T:
        """Run ``fn(connection)``; on a transport error retry on a fresh socket, failing over."""
        try:
            return fn(self.connection)
        except TLS_ERRORS as exc:
            raise tls_error(f"HBase Thrift gateway {self.gateway}", exc) from exc
        except TRANSPORT_ERRORS as exc:
            log.info("HBase Thrift transport to %s failed (%s); reconnecting once, then failing over",
                     self.gateway, exc)
            return self._failover(fn, first=exc)

    def _failover(self, fn: Callable[[happybase.Connection], T], *, first: BaseException | None) -> T:
        """Try ``fn`` on a fresh socket to each gateway from the current one, ``rounds`` times."""
        self.close()
        n = len(self._gateways)
        errors: dict[Gateway, BaseException] = {}
        if first is not None:
            errors[self.gateway] = first
        for round_ in range(self._rounds):
            if round_:
                time.sleep(self._backoff_ms / 1000)
            for step in range(n):
                gateway = self._gateways[(self._current + step) % n]
                try:
                    self._conn = self._open(gateway)
                    self._current = self._gateways.index(gateway)
                    return fn(self._conn)
                except TLS_ERRORS as exc:
                    self.close()
                    raise tls_error(f"HBase Thrift gateway {gateway}", exc) from exc
                except OPEN_ERRORS as exc:
                    errors[gateway] = exc
                    self.close()
                    if n > 1 and gateway not in self._warned:
                        self._warned.add(gateway)
                        log.warning("HBase Thrift gateway %s failed (%s: %s); skipping it, trying the next one",
                                    gateway, type(exc).__name__, exc)
        detail = "; ".join(f"{g}: {type(e).__name__}: {e}" for g, e in errors.items())
        raise SinkError(
            f"cannot reach the HBase Thrift server: no gateway answered after {self._rounds} pass(es) "
            f"over {n} gateway(s) "
            f"[{describe(self._gateways)}] ({detail}); are they running and are hbase.thrift.* right? "
            "(hbase.thrift.failover.rounds / hbase.thrift.failover.backoff set the retries)"
        ) from errors.get(self.gateway)

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


def connection_options(options: Mapping[str, str] | None = None, *, host: str | None = None,
                       port: int | None = None, transport: str | None = None, protocol: str | None = None,
                       tls: TlsSettings | None = None, kerberos: KerberosSettings | None = None,
                       defaults: Mapping[str, str] | None = None) -> HBaseConnectionOptions:
    """The connection of a caller outside a query (``read_committed``, ``lineage``, ``sink_status``,
    the CLI), parsed by the sink's own specs (``CONNECTION_OPTION_SPECS``).

    ``options`` holds any ``hbase.*`` option exactly as the sink takes it, so TLS, Kerberos,
    a gateway list and failover work the same everywhere. The keyword arguments are the
    older spellings of some of them; naming one setting both ways is an error rather than
    a silent choice. ``defaults``: the caller's own defaults (a status read gives up sooner).
    """
    raw = dict(defaults or {})
    given = {"hbase.thrift.host": host, "hbase.thrift.port": None if port is None else str(port),
             "hbase.thrift.transport": transport, "hbase.thrift.protocol": protocol}
    lowered = {key.lower() for key in options or {}}
    for key, value in given.items():
        if value is None:
            continue
        if key.lower() in lowered:
            raise ConfigError(f"option {key!r} is given twice: as a keyword argument and in options",
                              option=key)
        raw[key] = value
    raw.update(options or {})
    parsed = parse_connection_options(raw)
    if tls is not None:
        if parsed.tls is not None:
            raise ConfigError("tls= and option 'hbase.thrift.tls' both set it; give one", option="hbase.thrift.tls")
        parsed = dataclasses.replace(parsed, tls=tls)
    if kerberos is not None:
        if parsed.kerberos is not None:
            raise ConfigError("kerberos= and option 'hbase.thrift.authentication' both set it; give one",
                              option="hbase.thrift.authentication")
        parsed = dataclasses.replace(parsed, kerberos=kerberos)
    if parsed.tls is not None and parsed.kerberos is not None:
        raise ConfigError("Kerberos cannot be combined with TLS: HBase serves TLS only in HTTP mode, where "
                          "Kerberos is SPNEGO; use the gateways' SASL qop auth-conf for encryption instead",
                          option="hbase.thrift.authentication")
    return parsed
