"""TLS to a Thrift1 gateway, against the devstack's HTTPS gateway (HBase's own ThriftServer
in HTTP mode with ``hbase.thrift.ssl.enabled``; its certificate names ``localhost`` only).

Write and read through it; a CA that did not sign it, and a host name it does not name
(``127.0.0.1``), are rejected at once (no failover, no retry) with an error naming the
options to fix; no key material or password reaches the error or the logs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest
from hbase_clients import thrift1, thrift2_admin

from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase._options import parse_read_options
from sparkbarrier.connectors.hbase.client._tls import TlsSettings

pytestmark = [pytest.mark.hbase]

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.string())])


def test_tls_options_need_tls_on() -> None:
    with pytest.raises(ConfigError, match="hbase.thrift.tls.ca"):
        parse_read_options({"table": "t", "hbase.thrift.tls.ca": "/x.pem"})
    opts = parse_read_options({"table": "t", "hbase.thrift.tls": "true", "hbase.thrift.tls.ca": "/x.pem"})
    assert opts.tls == TlsSettings(ca_file="/x.pem", verify_hostname=True)


def test_write_and_read_over_tls(make_sink, tls_gateway, tls2_gateway) -> None:
    host, port, ca = tls_gateway
    # The sink's admin calls (table creation, commit table), the data path and exactly once's
    # Thrift2 calls (the family check, version deletes) all go over HTTPS.
    sink = make_sink(SCHEMA, **{"hbase.thrift.host": host, "hbase.thrift.port": str(port),
                                "hbase.thrift2.host": tls2_gateway, "hbase.thrift.tls": "true",
                                "hbase.thrift.tls.ca": ca})
    assert sink.opts.exactly_once
    msg = sink.task([{"id": f"k{i}", "v": str(i)} for i in range(20)], batch=0)
    sink.commit([msg], 0)
    from sparkbarrier.connectors.hbase import read_committed

    view = read_committed(host, port, sink.opts.table, sink_id=sink.opts.sink_id,
                          commit_table=sink.opts.commit_table, tls=sink.opts.tls).to_pylist()
    assert sorted((r["id"], r["v"]) for r in view) == sorted((f"k{i}", str(i)) for i in range(20))


def _call(host: str, port: int, tls: TlsSettings) -> None:
    conn = thrift1(host, port, tls=tls, rounds=3, backoff_ms=1000)
    try:
        conn.call(lambda c: c.tables())
    finally:
        conn.close()


def test_wrong_ca_is_rejected_at_once(tls_gateway, tmp_path: Path, caplog) -> None:
    from sparkbarrier.devstack import _certs

    host, port, _ = tls_gateway
    other = _certs.make_ca(_certs.private_dir(tmp_path / "other"), "not-the-gateways-ca")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SinkError, match="certificate verify failed") as info:
        _call(host, port, TlsSettings(ca_file=str(other.cert_pem)))
    assert "hbase.thrift.tls.ca" in str(info.value)
    assert "BEGIN" not in str(info.value) and "BEGIN" not in caplog.text
    assert "skipping it" not in caplog.text  # not retried: a certificate cannot heal


def test_host_the_certificate_does_not_name_is_rejected(tls_gateway) -> None:
    _, port, ca = tls_gateway
    with pytest.raises(SinkError, match="(?i)hostname|IP address mismatch"):
        _call("127.0.0.1", port, TlsSettings(ca_file=ca))
    _call("127.0.0.1", port, TlsSettings(ca_file=ca, verify_hostname=False))  # switched off on purpose


def test_thrift2_client_speaks_https_and_checks_the_ca(tls_gateway, tmp_path: Path) -> None:
    """The Thrift2 admin client over TLS. The devstack's HTTPS gateway serves Thrift1, so a
    verified handshake shows as the server refusing the Thrift2 method (it answered over
    HTTPS); with a foreign CA the handshake itself is refused."""
    from sparkbarrier.devstack import _certs

    host, port, ca = tls_gateway
    admin = thrift2_admin(host, port, timeout_ms=10_000, tls=TlsSettings(ca_file=ca))
    try:
        with pytest.raises(SinkError) as info:
            admin.table_exists("hbase:meta")
        assert "TLS" not in str(info.value) and "Invalid method name" in str(info.value)
    finally:
        admin.close()
    other = _certs.make_ca(_certs.private_dir(tmp_path / "other"), "not-the-gateways-ca")
    admin = thrift2_admin(host, port, timeout_ms=10_000, tls=TlsSettings(ca_file=str(other.cert_pem)))
    try:
        with pytest.raises(SinkError, match="TLS to the HBase Thrift2 server .* certificate verify failed"):
            admin.table_exists("hbase:meta")
    finally:
        admin.close()
