"""Where the servers are: the endpoint variables and the one ``host:port`` parser.

The CLI, the devstack (``python -m sparkbarrier.devstack env`` prints these
variables), the demo and the test suite all find Kafka and HBase the same way, so the
variable names and the ``host:port`` syntax live here once; a renamed variable or a
new syntax (IPv6 brackets, say) is then one edit.
"""

from __future__ import annotations

from ._exceptions import ConfigError

__all__ = ["HBASE_ENV", "HBASE_GATEWAYS_ENV", "HBASE_THRIFT2_ENV", "HBASE_THRIFT2_TLS_ENV", "HBASE_TLS_CA_ENV",
           "HBASE_TLS_ENV", "KAFKA_ENV", "KAFKA_SECURITY_ENV", "parse_hostport"]

KAFKA_ENV = "SPARKBARRIER_KAFKA_BOOTSTRAP"
"""Kafka bootstrap servers (``host:port[,host:port]``), passed to clients as given."""

KAFKA_SECURITY_ENV = "SPARKBARRIER_KAFKA_SECURITY"
"""The devstack's secured Kafka listeners: a JSON manifest (endpoints, CA and client
stores, SCRAM users), written by ``devstack/_kafka_security.py``."""

HBASE_ENV = "SPARKBARRIER_HBASE_THRIFT"
"""The HBase Thrift1 server, ``host:port``."""

HBASE_GATEWAYS_ENV = "SPARKBARRIER_HBASE_THRIFT_GATEWAYS"
"""Every HBase Thrift1 gateway of one HBase, ``host:port,host:port`` (the first is
:data:`HBASE_ENV`'s): the value option ``hbase.thrift.host`` takes for a gateway list."""

HBASE_TLS_ENV = "SPARKBARRIER_HBASE_THRIFT_TLS"
"""An HBase Thrift1 gateway serving Thrift over HTTPS, ``host:port`` (option ``hbase.thrift.tls``)."""

HBASE_TLS_CA_ENV = "SPARKBARRIER_HBASE_THRIFT_TLS_CA"
"""The CA (PEM file) that signed :data:`HBASE_TLS_ENV`'s certificate (option ``hbase.thrift.tls.ca``)."""

HBASE_THRIFT2_ENV = "SPARKBARRIER_HBASE_THRIFT2"
"""The HBase Thrift2 server (admin calls), ``host:port`` on the Thrift1 host."""

HBASE_THRIFT2_TLS_ENV = "SPARKBARRIER_HBASE_THRIFT2_TLS"
"""An HBase Thrift2 gateway serving Thrift over HTTPS, ``host:port`` (option ``hbase.thrift2.host`` with
``hbase.thrift.tls``); its certificate is signed by :data:`HBASE_TLS_CA_ENV`'s CA."""


def parse_hostport(value: str, what: str = "endpoint") -> tuple[str, int]:
    """``(host, port)`` from ``"host:port"``; ConfigError naming ``what`` otherwise.

    Splits at the last colon, so a bracketed IPv6 host keeps its colons; the port must
    be a number in 1..65535, so a typo fails here and not as a connection timeout.
    """
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{what} must be host:port, got {value!r}", option=what)
    return host, int(port)
