"""Test helpers: HBase clients to one ``host:port``, built the one way the product builds them.

Every connection takes an ``HBaseConnectionOptions`` (one client stack); tests that talk
to one gateway name it and the few settings they care about here. The defaults are a
test's, not the sink's: one pass over the gateway and no backoff, unless asked.
"""

from __future__ import annotations

from sparkbarrier.connectors.hbase import HBaseConnectionOptions, KerberosSettings
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase.client._thrift2 import Thrift2Admin
from sparkbarrier.connectors.hbase.client._tls import TlsSettings


def gateway_options(host: str, port: int, *, thrift2: bool = False, timeout_ms: int = 60_000, rounds: int = 1,
                    backoff_ms: int = 0, tls: TlsSettings | None = None,
                    kerberos: KerberosSettings | None = None) -> HBaseConnectionOptions:
    """``host:port`` as the Thrift1 gateway, or with ``thrift2`` as the Thrift2 one."""
    key = "hbase.thrift2.host" if thrift2 else "hbase.thrift.host"
    return connection_options({key: f"{host}:{port}", "hbase.thrift.timeout": str(timeout_ms),
                               "hbase.thrift.failover.rounds": str(rounds),
                               "hbase.thrift.failover.backoff": str(backoff_ms)}, tls=tls, kerberos=kerberos)


def thrift1(host: str, port: int, **settings: object) -> HBaseConnection:
    """A Thrift1 connection to ``host:port`` (``settings``: see :func:`gateway_options`)."""
    return HBaseConnection(gateway_options(host, port, **settings))


def thrift2_admin(host: str, port: int, **settings: object) -> Thrift2Admin:
    """A Thrift2 admin connection to ``host:port`` (``settings``: see :func:`gateway_options`)."""
    return Thrift2Admin(gateway_options(host, port, thrift2=True, **settings))
