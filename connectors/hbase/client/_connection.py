"""Connections to HBase's Thrift gateways: one gateway loop, one retry-and-error path.

Every path that talks to HBase -- the sink's writer and commits, the reader, lineage,
rollback, status, resume and the CLI -- holds a :class:`GatewayConnection` built from
one :class:`HBaseConnectionOptions`: :class:`HBaseConnection` for Thrift1 (happybase's
API) and ``_thrift2.Thrift2Connection`` for the admin client. So TLS, Kerberos, the
gateway list and ``hbase.thrift.failover.*`` mean the same on all of them, and the
clients themselves are built in one place (``_transport.Dialer``).

The HBase Thrift server closes sockets idle for 60 s (``hbase.thrift.server.socket.read.timeout``
/ connection cleaner), so a long-lived executor connection meets a dead socket on its
next call; a gateway may also restart or die. :meth:`GatewayConnection.call` then retries
the call on a fresh socket: first to the same gateway, then to the next ones in the
partition's spreading order (``_gateways.spread``), for ``rounds`` passes with
``backoff_ms`` between passes, and finally raises a :class:`SinkError` naming every
gateway. Failing over in the middle of a batch is safe because callers only pass
idempotent calls (puts with explicit timestamps, gets, table admin); ``checkAndPut``
callers re-read after a retry to learn the outcome. A scan cannot be retried call by
call (its scanner lives in one gateway): :meth:`GatewayConnection.scan` reopens it just
after the last row returned. A gateway that fails is named in one warning per
connection. What cannot heal is not retried (``_errors``): a TLS failure, a refused
Kerberos login, a configuration error (a missing CA file, an unreadable keytab: a
:class:`ConfigError` naming the option, raised before the first gateway is tried).
Created lazily so a pickled writer never carries a socket.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

import happybase

from ...._exceptions import ConfigError, SinkError
from ._errors import OPEN_ERRORS, SERVER_ERRORS, TLS_ERRORS, tls_error
from ._gateways import Gateway, describe, spread
from ._options import HBaseConnectionOptions, parse_connection_options
from ._sasl import KerberosSettings
from ._thrift_types import Thrift1Connection
from ._tls import TlsSettings
from ._transport import Dialer

__all__ = ["GatewayConnection", "HBaseConnection", "connection_options"]

log = logging.getLogger(__name__)
T = TypeVar("T")
S = TypeVar("S")  # a scanner id
R = TypeVar("R")  # a row of a scan


class Client(Protocol):
    """An open client of one gateway: what a connection keeps between calls."""

    def close(self) -> None: ...


C = TypeVar("C", bound=Client)


def _why(exc: BaseException) -> str:
    """A transport error in one line, not cut short: its message may end in the fix (``_sasl``'s do)."""
    message = getattr(exc, "message", None)  # thriftpy2's exceptions; their str() is a repr
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(exc if message is None else message)
    lines = text.strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _nothing(client: object) -> None:
    """The call of a bare connect: opening the socket is the whole work."""


class GatewayConnection(Generic[C]):
    """Lazy, self-healing access to one client of a gateway out of several (see module doc).

    ``gateways`` in the order this connection prefers them: spread by ``spread_index``
    (the task's or read partition's index) so partitions spread evenly and deterministically.
    Not thread-safe: one socket at a time.
    """

    label = "HBase Thrift gateway"
    """One gateway, as warnings and per-gateway errors name it."""
    service = "HBase Thrift server"
    """All of them, as the "cannot reach" error names them."""
    fix = "are they running and are hbase.thrift.* right?"

    def __init__(self, opts: HBaseConnectionOptions, gateways: tuple[Gateway, ...], spread_index: int = 0) -> None:
        self._opts = opts
        self._spread_index = spread_index
        self._gateways = spread(gateways, spread_index)
        self._current = 0
        self._rounds, self._backoff_ms = opts.failover_rounds, opts.failover_backoff_ms
        self._dialer: Dialer | None = None
        self._warned: set[Gateway] = set()
        self._conn: C | None = None

    def _open(self, gateway: Gateway) -> C:
        """An open client of ``gateway`` (subclasses: through :meth:`_dial`)."""
        raise NotImplementedError

    def _dial(self) -> Dialer:
        """The dialer, made before the first gateway is tried: a configuration error fails at once."""
        if self._dialer is None:
            self._dialer = Dialer(self._opts)
        return self._dialer

    @property
    def options(self) -> HBaseConnectionOptions:
        """The options this connection was made with."""
        return self._opts

    @property
    def spread_index(self) -> int:
        """The index that picked this connection's first gateway."""
        return self._spread_index

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

    @property
    def connection(self) -> C:
        """The open client, connecting (with failover) if there is none."""
        if self._conn is None:
            self._failover(_nothing, first=None)
        if self._conn is None:  # _failover connects or raises; explicit, unlike assert
            raise SinkError(f"no connection to any {self.label}")
        return self._conn

    def reconnect(self) -> None:
        """A fresh socket: to the current gateway if it answers, else to the next live one."""
        self.close()
        self._failover(_nothing, first=None)

    def failover(self) -> None:
        """Move to the next gateway that opens (callers whose call died with a transport error)."""
        self.close()
        self._current = (self._current + 1) % len(self._gateways)
        self._failover(_nothing, first=None)

    def call(self, fn: Callable[[C], T], *, what: str | None = None) -> T:
        """Run ``fn(client)``; on a transport error retry on a fresh socket, failing over.

        ``what`` names the call in errors. The server's own answers (``SERVER_ERRORS``) pass
        through unchanged: the caller knows what they mean (``_errors.refusals``).
        """
        try:
            return fn(self.connection)
        except TLS_ERRORS as exc:
            self.close()
            raise tls_error(f"{self.label} {self.gateway}", exc, during=what) from exc
        except OPEN_ERRORS as exc:
            log.info("%s transport to %s failed (%s); reconnecting once, then failing over", self.label,
                     self.gateway, _why(exc))
            return self._failover(fn, first=exc, what=what)

    def scan(self, open_scanner: Callable[[C, bytes | None], S], fetch: Callable[[C, S], list[R]],
             close_scanner: Callable[[C, S], None], row_key: Callable[[R], bytes], *, what: str) -> Iterator[list[R]]:
        """The batches of one scan (``fetch`` until it returns none), every row once and in order.

        ``open_scanner(client, after)`` opens the scan just after row ``after`` (None: from
        its start). A scanner lives in one gateway, so when its socket dies the scan is
        opened again on the next gateway just after the last row returned; the same when
        a call the consumer made through this connection between two batches failed over.
        Gives up with a :class:`SinkError` after one failure per gateway and failover
        round without a new batch.
        """
        after: bytes | None = None
        stalls = 0
        while True:
            client = self.connection
            try:
                scanner = open_scanner(client, after)
            except TLS_ERRORS as exc:
                self.close()
                raise tls_error(f"{self.label} {self.gateway}", exc, during=what) from exc
            except OPEN_ERRORS as exc:
                stalls = self._scan_failed(what, exc, stalls)
                continue
            try:
                while self._conn is client:  # else a call between batches failed over: reopen there
                    rows = fetch(client, scanner)
                    if not rows:
                        return
                    stalls = 0
                    yield rows
                    after = row_key(rows[-1])
            except TLS_ERRORS as exc:
                self.close()
                raise tls_error(f"{self.label} {self.gateway}", exc, during=what) from exc
            except OPEN_ERRORS as exc:
                stalls = self._scan_failed(what, exc, stalls)
            finally:
                if self._conn is client:  # the scanner's socket is still the live one: release it
                    try:
                        close_scanner(client, scanner)
                    except OPEN_ERRORS + SERVER_ERRORS as exc:
                        log.debug("ignoring error while closing a scanner of %s: %s", what, exc)

    def _scan_failed(self, what: str, exc: BaseException, stalls: int) -> int:
        """Move a scan whose socket died to the next gateway; the count of failures without progress."""
        stalls += 1
        if stalls > self._rounds * len(self._gateways):
            self.close()
            raise SinkError(f"{what} failed {stalls} times in a row without progress through "
                            f"[{describe(self._gateways)}] ({_why(exc)}); "
                            "hbase.thrift.failover.rounds sets how often it is resumed") from exc
        failed = self.gateway
        self.failover()  # raises SinkError naming every gateway when none answers
        log.warning("%s through %s failed (%s); resuming through %s just after the last row", what, failed,
                    _why(exc), self.gateway)
        return stalls

    def _failover(self, fn: Callable[[C], T], *, first: BaseException | None, what: str | None = None) -> T:
        """Try ``fn`` on a fresh socket to each gateway from the current one, ``rounds`` times."""
        self.close()
        self._dial()  # a configuration error is the same on every gateway: raise it now
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
                    raise tls_error(f"{self.label} {gateway}", exc, during=what) from exc
                except OPEN_ERRORS as exc:
                    errors[gateway] = exc
                    self.close()
                    if n > 1 and gateway not in self._warned:
                        self._warned.add(gateway)
                        log.warning("%s %s failed (%s); skipping it, trying the next one", self.label, gateway,
                                    _why(exc))
        detail = "; ".join(f"{g}: {_why(e)}" for g, e in errors.items())
        raise SinkError(
            f"cannot reach the {self.service} {describe(self._gateways)}: no gateway answered after "
            f"{self._rounds} pass(es) over {n} gateway(s) ({detail}); {self.fix} "
            "(hbase.thrift.failover.rounds / hbase.thrift.failover.backoff set the retries)"
        ) from errors.get(self.gateway)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OPEN_ERRORS as exc:
                log.debug("ignoring error while closing a dead connection to %s: %s", self.gateway, exc)
            self._conn = None

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_conn"] = state["_dialer"] = None  # a socket and an SSL context stay where they were made
        return state


class _Thrift1Client(happybase.Connection):
    """happybase's API over a client from the one dialer (``_transport``).

    happybase builds its client in ``_refresh_thrift_client`` from a plain ``TSocket``;
    this override takes the dialer's instead (plain, TLS or SASL) and keeps the rest of happybase.
    """

    def __init__(self, dialer: Dialer, gateway: Gateway, timeout_ms: int) -> None:
        self._dialer, self._gateway = dialer, gateway
        super().__init__(host=gateway.host, port=gateway.port, timeout=timeout_ms, autoconnect=True)

    def _refresh_thrift_client(self) -> None:
        from happybase.connection import Hbase

        self.transport, self.client = self._dialer.client(Hbase, self._gateway)


class HBaseConnection(GatewayConnection[Thrift1Connection]):
    """Thrift1 (happybase's ``Connection`` as ``.connection``, typed by ``_thrift_types``) over ``opts.gateways``.

    ``spread_index``: the task's or read partition's index, which picks its first gateway.
    """

    def __init__(self, opts: HBaseConnectionOptions, spread_index: int = 0) -> None:
        super().__init__(opts, opts.gateways, spread_index)

    def _open(self, gateway: Gateway) -> Thrift1Connection:
        return _Thrift1Client(self._dial(), gateway, self._opts.timeout_ms)


def connection_options(options: Mapping[str, str] | None = None, *, host: str | None = None,
                       port: int | None = None, transport: str | None = None, protocol: str | None = None,
                       tls: TlsSettings | None = None, kerberos: KerberosSettings | None = None,
                       defaults: Mapping[str, str] | None = None) -> HBaseConnectionOptions:
    """The connection of a caller outside a query (``read_committed``, ``lineage``, ``sink_status``,
    ``starting_offsets_from_sink``, the CLI), parsed by the sink's own specs (``CONNECTION_OPTION_SPECS``).

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
