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

Credentials (:func:`acquire`): with a keytab, through the credential-store extension
(``gss_acquire_cred_from``: ``client_keytab`` + a ``MEMORY:`` ticket cache private to this
process and principal), so the process's default ticket cache is never read or
overwritten and two principals can work side by side in one process; MIT renews the
ticket from the keytab when it expires. Why memory and not a file in a private 0700
directory: Spark ends Python workers with ``os._exit``, so no cleanup would run and TGT
files would pile up in ``/tmp``; a memory cache never touches the disk and dies with
the process (a forked worker gets its own copy). Without a keytab, the default ticket cache
(``KRB5CCNAME``, filled by ``kinit``). A credential or handshake failure cannot heal by
retrying, so it is a :class:`KerberosError` (permanent; the connection does not fail
over on it) naming the option to fix. Keytab contents never leave MIT's library; only
the path appears in messages.
"""

from __future__ import annotations

import enum
import hashlib
import os
import struct
import threading
from dataclasses import dataclass
from typing import Any

from ..._exceptions import KerberosError

__all__ = ["Qop", "KerberosSettings", "KerberosError", "GssapiSaslClient", "acquire", "check_credentials",
           "parse_qops", "sasl_transport", "sasl_protocol"]

PRINCIPAL_OPTION = "hbase.thrift.kerberos.client.principal"
KEYTAB_OPTION = "hbase.thrift.kerberos.client.keytab"
SERVICE_OPTION = "hbase.thrift.kerberos.service"
QOP_OPTION = "hbase.thrift.security.qop"
# Our receive limit announced to the server; a frame to the server stays under its own.
_MAX_BUFFER = 0xFFFFFF
HANDSHAKE_TIMEOUT_S = 5.0


class Qop(enum.IntEnum):
    """RFC 4752 security layers, as bit masks; larger is stronger."""

    AUTH = 1
    AUTH_INT = 2
    AUTH_CONF = 4

    @property
    def label(self) -> str:
        return {Qop.AUTH: "auth", Qop.AUTH_INT: "auth-int", Qop.AUTH_CONF: "auth-conf"}[self]


QOP_NAMES = {"auth": Qop.AUTH, "authentication": Qop.AUTH, "auth-int": Qop.AUTH_INT,
             "integrity": Qop.AUTH_INT, "auth-conf": Qop.AUTH_CONF, "privacy": Qop.AUTH_CONF}
"""Hadoop's names and HBase's newer ones (``hbase.thrift.security.qop`` accepts both)."""


@dataclass(frozen=True)
class KerberosSettings:
    """How to authenticate to the gateways. Picklable (names and a path; no key material).

    ``qops``: the layers the user accepts; the strongest the server also offers is used.
    """

    principal: str | None = None
    keytab: str | None = None
    service: str = "hbase"
    qops: frozenset[Qop] = frozenset(Qop)

    def describe_qops(self) -> str:
        return ",".join(q.label for q in sorted(self.qops, reverse=True))


def parse_qops(raw: str) -> frozenset[Qop]:
    """``"auth-conf,auth-int"`` → {AUTH_CONF, AUTH_INT}; HBase's newer names accepted."""
    from ..._exceptions import ConfigError

    names = [p.strip().lower() for p in raw.split(",") if p.strip()]
    bad = [n for n in names if n not in QOP_NAMES]
    if bad or not names:
        raise ConfigError(f"option {QOP_OPTION!r}: {raw!r} is not a list of auth, auth-int, auth-conf "
                          "(or authentication, integrity, privacy)", option=QOP_OPTION)
    return frozenset(QOP_NAMES[n] for n in names)


# ---------------------------------------------------------------------------- credentials
_lock = threading.Lock()
_creds: dict[tuple[int, str | None, str | None], Any] = {}


def _credential_error(settings: KerberosSettings, exc: BaseException) -> KerberosError:
    text = _gss_text(exc)
    if settings.keytab is None:
        ccache = os.environ.get("KRB5CCNAME", "the default ticket cache")
        return KerberosError(
            f"no usable Kerberos ticket for the HBase Thrift gateways in {ccache} ({text}); run `kinit` "
            f"as the job's user before the query, or give {PRINCIPAL_OPTION!r} and {KEYTAB_OPTION!r}",
            option=KEYTAB_OPTION)
    if "not found in Kerberos database" in text:
        return KerberosError(
            f"the KDC does not know the client principal {settings.principal!r} ({text}); "
            f"check {PRINCIPAL_OPTION!r}", option=PRINCIPAL_OPTION)
    if "Preauthentication failed" in text or "Key version" in text or "No key table entry" in text:
        return KerberosError(
            f"the keytab {settings.keytab!r} does not log in {settings.principal!r} ({text}); it is stale "
            f"(the principal's key changed since it was exported) or for another principal: export a fresh "
            f"keytab and pass it in {KEYTAB_OPTION!r}", option=KEYTAB_OPTION)
    return KerberosError(
        f"Kerberos login of {settings.principal!r} with keytab {settings.keytab!r} failed ({text}); check "
        f"{PRINCIPAL_OPTION!r}, {KEYTAB_OPTION!r} and KRB5_CONFIG (the realm's KDC)", option=KEYTAB_OPTION)


def _gss_text(exc: BaseException) -> str:
    """One line from a GSSError (major and minor messages), else ``Type: message``."""
    gen = getattr(exc, "gen_message", None)
    if callable(gen):
        try:
            return " ".join(str(gen()).split())
        except (TypeError, ValueError, AttributeError, UnicodeError):  # formatting only: use str()
            pass
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def acquire(settings: KerberosSettings) -> Any:
    """Initiator credentials for ``settings``, cached per process; forces the login.

    With a keytab the TGT is requested now (``lifetime`` makes MIT resolve the
    credential), so a stale keytab or unknown principal fails here, at query start,
    and not inside a Thrift call. Raises :class:`KerberosError`.
    """
    require_gssapi()
    import gssapi

    if settings.keytab is not None and not os.path.isfile(settings.keytab):
        raise KerberosError(
            f"keytab file {settings.keytab!r} ({KEYTAB_OPTION}) does not exist on this node; ship it with "
            "`spark-submit --files <keytab>` and give its file name, or put it at the same path on every node",
            option=KEYTAB_OPTION)
    key = (os.getpid(), settings.principal, settings.keytab)
    with _lock:
        creds = _creds.get(key)
        if creds is not None:
            try:
                if creds.lifetime > 60:
                    return creds
            except gssapi.exceptions.GSSError:
                pass  # expired without a keytab to renew: acquire afresh (and report)
        name = (gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
                if settings.principal else None)
        try:
            if settings.keytab is not None:
                digest = hashlib.sha256(f"{settings.principal}\0{settings.keytab}".encode()).hexdigest()[:16]
                store: dict[bytes | str, bytes | str] = {b"client_keytab": settings.keytab.encode(),
                         b"ccache": f"MEMORY:sparkbarrier-{os.getpid()}-{digest}".encode()}
                creds = gssapi.Credentials(name=name, usage="initiate", store=store)
            else:
                creds = gssapi.Credentials(name=name, usage="initiate")
            if creds.lifetime <= 0:
                raise gssapi.exceptions.ExpiredCredentialsError(0x000B0000, 0)
        except gssapi.exceptions.GSSError as exc:
            raise _credential_error(settings, exc) from None
        _creds[key] = creds
        return creds


def require_gssapi() -> None:
    """The ``gssapi`` package is an extra (it builds against MIT krb5): say how to get it."""
    try:
        import gssapi  # noqa: F401
    except ImportError as exc:
        from ..._exceptions import ConfigError

        raise ConfigError(
            f"'hbase.thrift.authentication' = kerberos needs the gssapi package on the driver and every "
            f"executor ({exc}): pip install 'sparkbarrier[kerberos]' (builds against MIT Kerberos' "
            "libkrb5-dev)", option="hbase.thrift.authentication") from None


def check_credentials(settings: KerberosSettings) -> None:
    """Query start: log in (or find a ticket) once, so credential problems fail the query now."""
    require_gssapi()
    acquire(settings)


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
        self._ctx: Any = None
        self._error = ""

    # -- handshake
    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        import gssapi

        creds = acquire(self.settings)
        target = gssapi.Name(f"{self.settings.service}@{self.host}", gssapi.NameType.hostbased_service)
        flags = (gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
                 | gssapi.RequirementFlag.confidentiality)
        self._ctx = gssapi.SecurityContext(name=target, creds=creds, usage="initiate", flags=flags)
        try:
            token = self._ctx.step()
        except gssapi.exceptions.GSSError as exc:
            raise self._service_error(exc) from None
        return True, mechanism, token or b""

    def _service_error(self, exc: BaseException) -> KerberosError:
        text = _gss_text(exc)
        principal = f"{self.settings.service}/{self.host}"
        if "not found in Kerberos database" in text:
            return KerberosError(
                f"the KDC knows no service principal {principal} for the HBase Thrift gateway {self.where} "
                f"({text}); {SERVICE_OPTION!r} must be the primary of the gateway's "
                "hbase.thrift.kerberos.principal and the gateway must be reached by the host name in that "
                "principal (not an IP address)", option=SERVICE_OPTION, gateway=self.where)
        return KerberosError(f"Kerberos to the HBase Thrift gateway {self.where} as {principal} failed ({text})",
                             option=SERVICE_OPTION, gateway=self.where)

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        import gssapi

        try:
            if not self._ctx.complete:
                return True, self._ctx.step(challenge) or b""
            return True, self._choose_layer(self._ctx.unwrap(challenge).message)
        except gssapi.exceptions.GSSError as exc:
            raise self._service_error(exc) from None

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
        return self._ctx.wrap(answer, False).message

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
            token = self._ctx.wrap(data[i:i + chunk], conf).message
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
            result = self._ctx.unwrap(frame[4:])
        except gssapi.exceptions.GSSError as exc:
            self._error = f"SASL frame from {self.where} failed its integrity check ({_gss_text(exc)})"
            return False, b""
        if self.qop is Qop.AUTH_CONF and not result.encrypted:
            self._error = f"SASL frame from {self.where} was not encrypted although qop auth-conf was agreed"
            return False, b""
        return True, result.message

    def getError(self) -> str:  # noqa: N802 - python-sasl's name, called by thriftpy2
        return self._error


# ---------------------------------------------------------------------------- transport
def sasl_transport(host: str, port: int, timeout_ms: int, settings: KerberosSettings, *,
                   cython: bool = True) -> Any:
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


def sasl_protocol(protocol: str, transport: Any) -> Any:
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
    """What a failed handshake means. A SASL refusal (``Bad status``) is permanent; silence or a
    hang-up is a transport error (a busy gateway may heal, so it is failed over within the
    failover budget) whose message says the likeliest cause: a gateway that is not Kerberized."""
    from thriftpy2.transport import TTransportException

    text = " ".join(str(exc).split())[:300]
    if "Bad status" in text:
        return KerberosError(
            f"HBase Thrift gateway {host}:{port} refused the Kerberos login ({text}); check that the gateway "
            f"accepts the client principal and that {QOP_OPTION!r} ({settings.describe_qops()}) matches its "
            "hbase.thrift.security.qop", option=QOP_OPTION, gateway=f"{host}:{port}")
    return TTransportException(
        type=TTransportException.TIMED_OUT,
        message=f"no SASL/GSSAPI answer from {host}:{port} within {HANDSHAKE_TIMEOUT_S:g} s ({type(exc).__name__}: "
                f"{text}): the gateway does not look Kerberized (hbase.thrift.security.qop unset), or is "
                "overloaded; for a plain gateway set hbase.thrift.authentication=none")
