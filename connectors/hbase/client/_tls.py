"""TLS to the HBase Thrift gateways: Thrift over HTTPS, as HBase's servers offer it.

What HBase offers (checked in ``hbase-thrift-2.6.1.jar``, ``thrift.ThriftServer``):
``hbase.thrift.ssl.enabled`` is read only in ``setupHTTPServer``, i.e. when the gateway
runs in HTTP mode (``hbase.regionserver.thrift.http=true``): Jetty then serves
Thrift-over-HTTPS from a key store (``hbase.thrift.ssl.keystore.*``). The plain socket
server (``TBoundedThreadPoolServer``) has no TLS at all, and the HTTPS server has no
trust store setting, so it never asks for a client certificate (a client certificate
given here is presented and ignored by HBase 2.6; a proxy in front may require it).
The Thrift2 server extends the same class, so the same holds for it.

So a TLS connection is thriftpy2's ``THttpClient`` (HTTPS, kept alive) with an
``ssl.SSLContext`` built here: the CA file (PEM) or the system trust store, hostname
verification on unless switched off, an optional client certificate and key. Errors
that cannot heal (a certificate the CA did not sign, a host the certificate does not
name) are ``_errors.TLS_ERRORS``: the connection fails fast on them instead of retrying.
A file that cannot be read or loaded (a CA path that does not exist, a key that does not
match its certificate) is a :class:`ConfigError` naming its option, raised by
:func:`ssl_context` before any gateway is tried: it is the same on every gateway, so
trying them all and ending in "cannot reach" would hide the fix. The key file's
contents never leave ``ssl``; paths are not secrets.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from thriftpy2.http import THttpClient

from ...._exceptions import ConfigError
from ._thrift_types import Transport

__all__ = ["TlsSettings", "https_protocol", "https_transport", "ssl_context"]


@dataclass(frozen=True)
class TlsSettings:
    """How to reach a TLS gateway. Picklable (paths only; files are read on the executor)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_hostname: bool = True


CA_OPTION = "hbase.thrift.tls.ca"
CERT_OPTION = "hbase.thrift.tls.cert"
KEY_OPTION = "hbase.thrift.tls.key"


def _readable(option: str, path: str, what: str) -> None:
    """Raise :class:`ConfigError` naming ``option`` when ``path`` cannot be opened here.

    ``ssl`` reports a missing file as a bare ``FileNotFoundError`` (an ``OSError``, which the
    gateway loop would take for a dead socket and retry on every gateway).
    """
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"option {option!r}: cannot read the {what} {path!r} ({type(exc).__name__}: "
                          f"{exc.strerror or exc}); it must be readable at this path on the driver and every "
                          "executor", option=option) from None


def ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """A client context: certificates always verified; the host name unless switched off.

    Called once per connection, before the first gateway is tried. Raises
    :class:`ConfigError` naming ``hbase.thrift.tls.ca``, ``.cert`` or ``.key`` when a file
    cannot be read or is not what the option says.
    """
    if tls.ca_file:  # that CA alone, as before: not the system store besides it
        _readable(CA_OPTION, tls.ca_file, "CA file")
        try:
            ctx = ssl.create_default_context(cafile=tls.ca_file)
        except ssl.SSLError as exc:
            raise ConfigError(f"option {CA_OPTION!r}: {tls.ca_file!r} holds no PEM CA certificate "
                              f"({exc.reason or exc})", option=CA_OPTION) from None
    else:
        ctx = ssl.create_default_context()
    ctx.check_hostname = tls.verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if tls.cert_file:
        _readable(CERT_OPTION, tls.cert_file, "client certificate")
        if tls.key_file:
            _readable(KEY_OPTION, tls.key_file, "client key")
        try:
            # An empty password: an encrypted key fails here instead of OpenSSL prompting on a
            # terminal that an executor does not have (the option takes unencrypted keys).
            ctx.load_cert_chain(tls.cert_file, tls.key_file or None, password="")
        except ssl.SSLError as exc:
            option = KEY_OPTION if tls.key_file else CERT_OPTION
            raise ConfigError(f"option {option!r}: the client certificate {tls.cert_file!r} and its key "
                              f"{tls.key_file or tls.cert_file!r} do not load as a PEM pair ({exc.reason or exc})",
                              option=option) from None
    return ctx


def https_protocol(protocol: str, transport: Transport) -> Any:  # thriftpy2's protocol classes: untyped
    """The pure-Python protocol over ``transport``: the Cython ones need a Cython transport,
    which ``THttpClient`` is not."""
    from thriftpy2.protocol.binary import TBinaryProtocol
    from thriftpy2.protocol.compact import TCompactProtocol

    cls = TCompactProtocol if protocol == "compact" else TBinaryProtocol
    return cls(transport, decode_response=False)


def https_transport(host: str, port: int, timeout_ms: int, context: ssl.SSLContext) -> Transport:
    """A Thrift transport to ``https://host:port/`` (HBase's servlet serves any path).

    ``context``: from :func:`ssl_context`, built once per connection (so a bad file fails
    before the first gateway, not on each one).
    """
    return THttpClient(f"https://{host}:{port}/", timeout=timeout_ms, ssl_context_factory=lambda: context,
                       keep_alive=True)
