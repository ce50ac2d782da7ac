"""The gateway loop against a real server: reconnect once, resume a scan, fail at once on configuration."""

from __future__ import annotations

import gc
import logging
import socket
import time

import pyarrow as pa
import pytest
from hbase_clients import thrift1
from thriftpy2.transport import TSocket

from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase.read._reader import find_commit, iter_committed

pytestmark = [pytest.mark.hbase]


def test_call_reconnects_after_the_server_side_closed_the_socket(hbase_thrift, caplog) -> None:
    caplog.set_level(logging.INFO, logger="sparkbarrier.connectors.hbase.client._connection")
    conn = thrift1(*hbase_thrift)
    try:
        conn.call(lambda c: c.tables())
        # What the Thrift server's idle cleaner does after 60 s: the socket dies under us
        # (shut down at the OS level; the Python objects still think it is open).
        live = [o for o in gc.get_objects() if isinstance(o, TSocket) and o.sock is not None
                and o.sock.fileno() >= 0 and o.sock.getpeername()[1] == hbase_thrift[1]]
        assert live
        for tsock in live:
            tsock.sock.shutdown(socket.SHUT_RDWR)
        assert isinstance(conn.call(lambda c: c.tables()), list)
        assert "reconnecting once" in caplog.text
    finally:
        conn.close()


def test_unreachable_server_is_a_clear_sink_error(hbase_thrift) -> None:
    conn = thrift1(hbase_thrift[0], 1)
    with pytest.raises(SinkError, match="cannot reach the HBase Thrift server"):
        conn.call(lambda c: c.tables())


def _peer_port(sock: socket.socket) -> int | None:
    """The port ``sock`` is connected to; None when it is not (e.g. a kept connection's
    socket that an earlier test shut down and nothing has used since)."""
    try:
        return sock.getpeername()[1]
    except OSError:
        return None


def _kill_sockets_to(port: int) -> int:
    """Shut down this process's open Thrift sockets to ``port`` at the OS level (what a gateway
    restart or its idle cleaner does); the Python objects still think they are open."""
    live = [o for o in gc.get_objects() if isinstance(o, TSocket) and o.sock is not None
            and o.sock.fileno() >= 0 and _peer_port(o.sock) == port]
    for tsock in live:
        tsock.sock.shutdown(socket.SHUT_RDWR)
    return len(live)


def test_a_scan_resumes_after_its_socket_died_with_every_row_once(make_sink, hbase_thrift, caplog) -> None:
    """The reader's scan goes through the one gateway loop: a dead socket mid-scan reopens
    the scan just after the last row taken, so every row comes back exactly once."""
    schema = pa.schema([("id", pa.string()), ("v", pa.string())])
    sink = make_sink(schema)
    rows = [{"id": f"k{i:05d}", "v": str(i)} for i in range(2500)]
    sink.commit([sink.task(rows, batch=0)], 0)
    conn = HBaseConnection(sink.opts)
    caplog.set_level(logging.WARNING, logger="sparkbarrier.connectors.hbase.client._connection")
    try:
        record = find_commit(conn, sink.opts.commit_table, sink.opts.table, sink.opts.sink_id)
        batches = iter_committed(conn, record, chunk_rows=700)
        first = next(batches)  # the scanner has sent its first 1,000 rows
        assert _kill_sockets_to(hbase_thrift[1]) >= 1
        got = pa.Table.from_batches([first, *batches])
    finally:
        conn.close()
    assert got["id"].to_pylist() == [r["id"] for r in rows]
    assert "resuming through" in caplog.text and "just after the last row" in caplog.text


def test_a_missing_ca_file_fails_at_once_naming_the_option_on_thrift1_and_thrift2(tmp_path) -> None:
    """The same on every gateway, so not retried: no "cannot reach" after the failover rounds."""
    from sparkbarrier.connectors.hbase.client._thrift2 import Thrift2Admin

    options = {"hbase.thrift.host": "127.0.0.1:1,127.0.0.1:2", "hbase.thrift2.host": "127.0.0.1:3",
               "hbase.thrift.tls": "true", "hbase.thrift.tls.ca": str(tmp_path / "gone.pem"),
               "hbase.thrift.failover.rounds": "3", "hbase.thrift.failover.backoff": "1000"}
    opts = connection_options(options)
    started = time.monotonic()
    for connect in (lambda: HBaseConnection(opts).call(lambda c: c.tables()), lambda: Thrift2Admin(opts)):
        with pytest.raises(ConfigError, match="cannot read the CA file") as info:
            connect()
        assert info.value.option == "hbase.thrift.tls.ca" and "cannot reach" not in str(info.value)
    assert time.monotonic() - started < 1


def test_an_unreadable_keytab_fails_at_once_naming_the_option(tmp_path) -> None:
    keytab = tmp_path / "not-a.keytab"
    keytab.write_bytes(b"not a keytab")
    opts = connection_options({"hbase.thrift.host": "127.0.0.1:1", "hbase.thrift.authentication": "kerberos",
                               "hbase.thrift.kerberos.client.principal": "etl@EXAMPLE.COM",
                               "hbase.thrift.kerberos.client.keytab": str(keytab)})
    with pytest.raises(ConfigError, match="not a Kerberos keytab") as info:
        HBaseConnection(opts).call(lambda c: c.tables())
    assert info.value.option == "hbase.thrift.kerberos.client.keytab"
