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
The key file's contents never leave ``ssl``; paths are not secrets.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from thriftpy2.http import THttpClient

__all__ = ["TlsSettings", "ssl_context", "https_transport", "https_protocol"]


@dataclass(frozen=True)
class TlsSettings:
    """How to reach a TLS gateway. Picklable (paths only; files are read on the executor)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_hostname: bool = True


def ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """A client context: certificates always verified; the host name unless switched off."""
    ctx = ssl.create_default_context(cafile=tls.ca_file) if tls.ca_file else ssl.create_default_context()
    ctx.check_hostname = tls.verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file or None)
    return ctx


def https_protocol(protocol: str, transport: Any) -> Any:
    """The pure-Python protocol over ``transport``: the Cython ones need a Cython transport,
    which ``THttpClient`` is not."""
    from thriftpy2.protocol.binary import TBinaryProtocol
    from thriftpy2.protocol.compact import TCompactProtocol

    cls = TCompactProtocol if protocol == "compact" else TBinaryProtocol
    return cls(transport, decode_response=False)


def https_transport(host: str, port: int, timeout_ms: int, tls: TlsSettings) -> Any:
    """A Thrift transport to ``https://host:port/`` (HBase's servlet serves any path)."""
    context = ssl_context(tls)  # built once per connection: a bad file fails here, not per call
    return THttpClient(f"https://{host}:{port}/", timeout=timeout_ms, ssl_context_factory=lambda: context,
                       keep_alive=True)
