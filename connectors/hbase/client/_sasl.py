"""SASL/GSSAPI (Kerberos) to HBase's Thrift gateways, as ``hbase.thrift.security.qop`` offers it.

What the gateway speaks (HBase 2.6 ``thrift.ThriftServer`` with
``hbase.thrift.security.authentication=kerberos``, socket mode): Thrift's SASL
transport (``TSaslServerTransport``, Java's GSSAPI SASL server). Every frame after the
handshake is ``length(4) + payload``; at qop ``auth`` the payload is the plain Thrift
bytes, at ``auth-int``/``auth-conf`` it is a GSS ``wrap`` token (signed / sealed).

thriftpy2 ships the transport (``TSaslClientTransport``, python-sasl's interface:
``start/step/encode/decode/getError``) but no GSSAPI mechanism, and ``pure-sasl``'s
needs the unmaintained ``kerberos`` module. :class:`GssapiSaslClient` is RFC 4752 on the
``gssapi`` package (MIT krb5's GSS-API): context establishment, then the security-layer
negotiation, choosing the strongest qop that both the option allows and the server
offers; ``encode``/``decode`` wrap and unwrap frames for ``auth-int``/``auth-conf``.

The settings are the type both hops share (:class:`KerberosSettings`, defined in
:mod:`...kerberos._settings`), and so are the credentials and the security context
(:mod:`...kerberos._login`): with a keytab, a ``MEMORY:`` ticket cache private to the
process and principal (never the process's default cache), renewed from the keytab;
without one, the default ticket cache (``KRB5CCNAME``, filled by ``kinit``). This module
binds them to HBase's option names (:data:`LOGIN_OPTIONS`). A credential or handshake
failure cannot heal by retrying, so it is a :class:`KerberosError` (permanent; the
connection does not fail over on it) from the one error map
(:mod:`...kerberos._errors`, by gssapi's status codes) naming the option to fix. Keytab
contents never leave MIT's library; only the path appears in messages.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from ...._exceptions import KerberosError
from ...kerberos import _login as _shared
from ...kerberos._errors import gss_reason, kerberos_error
from ...kerberos._settings import KerberosSettings, LoginOptions, OptionName, Qop

if TYPE_CHECKING:
    import gssapi

    from ._thrift_types import Transport

__all__ = [
    "LOGIN_OPTIONS",
    "GssapiSaslClient",
    "KerberosError",
    "KerberosSettings",
    "Qop",
    "check_credentials",
    "parse_qops",
    "sasl_protocol",
    "sasl_transport",
]

PRINCIPAL_OPTION = "hbase.thrift.kerberos.client.principal"
KEYTAB_OPTION = "hbase.thrift.kerberos.client.keytab"
SERVICE_OPTION = "hbase.thrift.kerberos.service"
QOP_OPTION = "hbase.thrift.security.qop"
# Our receive limit announced to the server; a frame to the server stays under its own.
_MAX_BUFFER = 0xFFFFFF
HANDSHAKE_TIMEOUT_S = 5.0


QOP_NAMES = {"auth": Qop.AUTH, "authentication": Qop.AUTH, "auth-int": Qop.AUTH_INT,
             "integrity": Qop.AUTH_INT, "auth-conf": Qop.AUTH_CONF, "privacy": Qop.AUTH_CONF}
"""Hadoop's names and HBase's newer ones (``hbase.thrift.security.qop`` accepts both)."""


def parse_qops(raw: str) -> frozenset[Qop]:
    """``"auth-conf,auth-int"`` → {AUTH_CONF, AUTH_INT}; HBase's newer names accepted."""
    from ...._exceptions import ConfigError

    names = [p.strip().lower() for p in raw.split(",") if p.strip()]
    bad = [n for n in names if n not in QOP_NAMES]
    if bad or not names:
        raise ConfigError(f"option {QOP_OPTION!r}: {raw!r} is not a list of auth, auth-int, auth-conf "
                          "(or authentication, integrity, privacy)", option=QOP_OPTION)
    return frozenset(QOP_NAMES[n] for n in names)


# ---------------------------------------------------------------------------- credentials
LOGIN_OPTIONS = LoginOptions(
    peer="the HBase Thrift gateways", peer_one="the HBase Thrift gateway",
    principal=OptionName(PRINCIPAL_OPTION),
    keytab=OptionName(KEYTAB_OPTION),
    service=OptionName(SERVICE_OPTION),
    service_fix=(f"{SERVICE_OPTION!r} must be the primary of the gateway's hbase.thrift.kerberos.principal "
                 "and the gateway must be reached by the host name in that principal (not an IP address)"),
    enabled=OptionName("hbase.thrift.authentication"), enabled_value="kerberos",
    keytab_login=f"give {PRINCIPAL_OPTION!r} and {KEYTAB_OPTION!r}")
"""HBase's names for the shared login's errors."""


def check_credentials(settings: KerberosSettings) -> None:
    """Query start: log in (or find a ticket) once, so credential problems fail the query now,
    naming ``hbase.thrift.kerberos.client.principal`` or ``.keytab``."""
    _shared.credentials(settings, LOGIN_OPTIONS)


# ---------------------------------------------------------------------------- SASL client
class GssapiSaslClient:
    """RFC 4752 SASL GSSAPI client with python-sasl's interface, for ``TSaslClientTransport``.

    One per connection (the transport calls the factory on ``open``). Raises
    :class:`KerberosError` from ``start``/``step`` on refusals, which ``open`` passes on.
    """

    def __init__(self, host: str, settings: KerberosSettings, port: int | None = None) -> None:
        self.host, self.settings = host, settings
        self.where = f"{host}:{port}" if port is not None else host
        self.qop: Qop | None = None
        self._server_max = 0
        self._ctx: gssapi.SecurityContext | None = None
        self._error = ""

    # -- handshake
    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        import gssapi

        flags = (gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
                 | gssapi.RequirementFlag.confidentiality)
        self._ctx, token = _shared.security_context(self.settings, self.host, LOGIN_OPTIONS, flags=flags,
                                                    gateway=self.where)
        return True, mechanism, token

    @property
    def _context(self) -> gssapi.SecurityContext:
        """The GSS context :meth:`start` made; thriftpy2 calls ``start`` before any other method."""
        if self._ctx is None:
            raise KerberosError(f"SASL handshake with {self.where} used before it started", gateway=self.where)
        return self._ctx

    def _step_error(self, exc: BaseException) -> KerberosError:
        """A refusal in a later step of the handshake, through the same map as the first."""
        return kerberos_error(self.settings, exc, LOGIN_OPTIONS, host=self.host, gateway=self.where)

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        import gssapi

        try:
            if not self._context.complete:
                return True, self._context.step(challenge) or b""
            return True, self._choose_layer(self._context.unwrap(challenge).message)
        except gssapi.exceptions.GSSError as exc:
            raise self._step_error(exc) from None

    def _choose_layer(self, offer: bytes) -> bytes:
        """Answer the server's ``[mask, max size(3)]`` with the strongest common qop."""
        if len(offer) != 4:
            raise KerberosError(f"HBase Thrift gateway {self.where} sent a malformed SASL security-layer "
                                f"offer ({len(offer)} bytes)", gateway=self.where)
        mask = offer[0]
        self._server_max = struct.unpack(">I", b"\0" + offer[1:])[0]
        common = [q for q in sorted(self.settings.qops, reverse=True) if mask & q]
        if not common:
            offered = ",".join(q.label for q in Qop if mask & q) or "none"
            raise KerberosError(
                f"HBase Thrift gateway {self.where} offers qop {offered} (its hbase.thrift.security.qop) but "
                f"{QOP_OPTION!r} allows only {self.settings.describe_qops()}; make them share one",
                option=QOP_OPTION, gateway=self.where)
        self.qop = common[0]
        size = 0 if self.qop is Qop.AUTH else _MAX_BUFFER
        answer = bytes([self.qop]) + struct.pack(">I", size)[1:]
        return self._context.wrap(answer, False).message

    # -- frames
    def encode(self, data: bytes) -> tuple[bool, bytes]:
        """``auth``: unchanged (the transport frames it). Else wrapped frames with length headers,
        split so that each token stays within the server's announced maximum."""
        if self.qop in (None, Qop.AUTH):
            return True, data
        conf = self.qop is Qop.AUTH_CONF
        # A wrap token adds at most ~64 bytes (header, checksum, padding) with AES.
        chunk = max(1024, self._server_max - 128) if self._server_max else len(data) or 1
        out = []
        for i in range(0, max(len(data), 1), chunk):
            token = self._context.wrap(data[i:i + chunk], conf).message
            out.append(struct.pack(">I", len(token)) + token)
        return True, b"".join(out)

    def decode(self, frame: bytes) -> tuple[bool, bytes]:
        """One frame (header included, as the transport passes it) → the Thrift bytes.

        At ``auth-conf`` an unsealed token is refused: the server must not downgrade.
        """
        import gssapi

        if self.qop in (None, Qop.AUTH):  # no layer (the transport does not call this then)
            return True, frame[4:]
        try:
            result = self._context.unwrap(frame[4:])
        except gssapi.exceptions.GSSError as exc:
            self._error = f"SASL frame from {self.where} failed its integrity check ({gss_reason(exc)})"
            return False, b""
        if self.qop is Qop.AUTH_CONF and not result.encrypted:
            self._error = f"SASL frame from {self.where} was not encrypted although qop auth-conf was agreed"
            return False, b""
        return True, result.message

    def getError(self) -> str:  # python-sasl's name, called by thriftpy2
        return self._error


# ---------------------------------------------------------------------------- transport
def sasl_transport(host: str, port: int, timeout_ms: int, settings: KerberosSettings, *,
                   cython: bool = True) -> Transport:
    """An unopened SASL/GSSAPI transport to ``host:port`` (thriftpy2's, with our mechanism).

    thriftpy2's Cython SASL transport where it is built (so the Cython binary protocol, as
    on the plain path, can sit on top: the pure-Python protocol costs ~2.5x client CPU),
    else (or with ``cython=False``) its pure-Python one. Pair it with :func:`sasl_protocol`.
    """
    from thriftpy2.transport import TSocket, sasl as thrift_sasl

    from ._errors import OPEN_ERRORS

    pure = thrift_sasl.TSaslClientTransport
    base = getattr(thrift_sasl, "TCySaslClientTransport", pure) if cython else pure
    sock = TSocket(host=host, port=port, socket_timeout=timeout_ms, connect_timeout=timeout_ms)

    clients: list[GssapiSaslClient] = []

    def new_client() -> GssapiSaslClient:
        clients.append(GssapiSaslClient(host, settings, port))
        del clients[:-1]
        return clients[-1]

    class _Transport(base):  # type: ignore[misc, valid-type]  # a base chosen at run time
        """``open`` splits failures: the socket (may heal: failover) from the handshake."""

        @property
        def qop(self) -> Qop | None:
            """The security layer agreed in the last handshake (None before one)."""
            return clients[-1].qop if clients else None

        def open(self) -> None:
            if not sock.is_open():
                sock.open()  # refused / unreachable: a transport error, failed over
            # A Kerberized gateway answers within milliseconds (accepting a context is local
            # work); a plain one waits for 16 MB it will never get (it reads the SASL start as
            # a Thrift message length). Bound the wait so that case fails fast and clearly.
            sock.sock.settimeout(min(timeout_ms / 1000, HANDSHAKE_TIMEOUT_S))
            try:
                super().open()
                sock.sock.settimeout(timeout_ms / 1000)
            except KerberosError:
                self.close()
                raise
            except OPEN_ERRORS as exc:  # silence, hang-up or a SASL refusal (``_errors``: the socket's errors)
                self.close()
                raise _handshake_error(host, port, settings, exc) from None

    return _Transport(new_client, "GSSAPI", sock)


def sasl_protocol(protocol: str, transport: Transport) -> Any:  # thriftpy2's protocol classes: untyped
    """The Thrift protocol over a :func:`sasl_transport`: Cython binary on the Cython transport."""
    from thriftpy2.protocol.binary import TBinaryProtocol
    from thriftpy2.protocol.compact import TCompactProtocol

    if protocol == "compact":
        return TCompactProtocol(transport, decode_response=False)
    try:
        from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]  # Cython, no stub
        from thriftpy2.transport.cybase import CyTransportBase
    except ImportError:
        return TBinaryProtocol(transport, decode_response=False)
    if isinstance(transport, CyTransportBase):
        return TCyBinaryProtocol(transport, decode_response=False)
    return TBinaryProtocol(transport, decode_response=False)


def _handshake_error(host: str, port: int, settings: KerberosSettings, exc: BaseException) -> Exception:
    """What a failed handshake means. A SASL refusal is permanent; silence or a hang-up is a
    transport error (a busy gateway may heal, so it is failed over within the failover
    budget) whose message says the likeliest cause: a gateway that is not Kerberized.

    Told apart by thriftpy2's exception type, not its text: inside the handshake (the socket
    is open already) ``NOT_OPEN`` is only raised for the server's SASL status ``BAD`` or
    ``ERROR`` ("Bad status"); silence is a timeout, a hang-up ``END_OF_FILE``."""
    from thriftpy2.transport import TTransportException

    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, TTransportException) and exc.type == TTransportException.NOT_OPEN:
        return KerberosError(
            f"HBase Thrift gateway {host}:{port} refused the Kerberos login ({text}); check that the gateway "
            f"accepts the client principal and that {QOP_OPTION!r} ({settings.describe_qops()}) matches its "
            "hbase.thrift.security.qop", option=QOP_OPTION, gateway=f"{host}:{port}")
    return TTransportException(
        type=TTransportException.TIMED_OUT,
        message=f"no SASL/GSSAPI answer from {host}:{port} within {HANDSHAKE_TIMEOUT_S:g} s ({type(exc).__name__}: "
                f"{text}): the gateway does not look Kerberized (hbase.thrift.security.qop unset), or is "
                "overloaded; for a plain gateway set hbase.thrift.authentication=none")
