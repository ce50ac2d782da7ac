"""The one way a Thrift client to an HBase gateway is built: plain socket, TLS or SASL.

Why one place: Thrift1 (happybase's client) and the Thrift2 admin client used to build
their sockets, transports and protocols each on its own, so a security mode could be
added to one and go missing on the other. A :class:`Dialer` is made from the
connection's :class:`~._options.HBaseConnectionOptions` and builds a client of either
service for any gateway, the same way:

* plain: ``TSocket`` (``hbase.thrift.timeout`` for the connect and every read), the
  buffered or framed transport and the binary or compact protocol of
  ``hbase.thrift.transport`` / ``.protocol`` (thriftpy2's Cython ones where built, as
  happybase uses them);
* TLS (``hbase.thrift.tls``): Thrift over HTTPS, the only TLS HBase's gateways offer (``_tls``);
* Kerberos (``hbase.thrift.authentication=kerberos``): SASL/GSSAPI, which frames itself (``_sasl``).

Configuration that is wrong on every gateway alike is checked when the dialer is made,
before any socket opens: the TLS files (:func:`._tls.ssl_context`) and a keytab this
machine cannot read. Both raise :class:`ConfigError` naming the option, so the gateway
loop (``_connection``) never retries them. A dialer holds an ``ssl.SSLContext`` and is
not picklable: connections make theirs where they connect.
"""

from __future__ import annotations

from typing import Any

from thriftpy2.thrift import TClient

from ...kerberos._login import check_keytab
from ._gateways import Gateway
from ._options import HBaseConnectionOptions, ThriftProtocol, ThriftTransport
from ._sasl import LOGIN_OPTIONS, sasl_protocol, sasl_transport
from ._thrift_types import Transport
from ._tls import https_protocol, https_transport, ssl_context

__all__ = ["Dialer"]


class Dialer:
    """Builds unopened Thrift clients to gateways from one options value (see module doc)."""

    def __init__(self, opts: HBaseConnectionOptions) -> None:
        self._opts = opts
        self._ssl = ssl_context(opts.tls) if opts.tls is not None else None  # ConfigError naming the file's option
        kerberos = opts.kerberos
        if kerberos is not None and kerberos.keytab is not None:
            check_keytab(kerberos, LOGIN_OPTIONS)  # KerberosError naming the keytab option

    def client(self, service: Any, gateway: Gateway) -> tuple[Transport, TClient]:
        """An unopened transport to ``gateway`` and a client of the thriftpy2 ``service`` over it.

        The caller opens the transport (so a refused socket is a transport error it may fail over).
        """
        opts, host, port = self._opts, gateway.host, gateway.port
        if opts.kerberos is not None:
            transport = sasl_transport(host, port, opts.timeout_ms, opts.kerberos)
            return transport, TClient(service, sasl_protocol(opts.protocol.value, transport))
        if self._ssl is not None:
            transport = https_transport(host, port, opts.timeout_ms, self._ssl)
            return transport, TClient(service, https_protocol(opts.protocol.value, transport))
        from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol
        from thriftpy2.transport import TBufferedTransport, TFramedTransport, TSocket

        sock = TSocket(host=host, port=port, socket_timeout=opts.timeout_ms, connect_timeout=opts.timeout_ms)
        framed = opts.transport is ThriftTransport.FRAMED
        transport = TFramedTransport(sock) if framed else TBufferedTransport(sock)
        compact = opts.protocol is ThriftProtocol.COMPACT
        protocol = (TCompactProtocol if compact else TBinaryProtocol)(transport, decode_response=False)
        return transport, TClient(service, protocol)
