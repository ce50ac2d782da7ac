"""Reconnect-once behaviour of the Thrift connection against a real server."""

from __future__ import annotations

import gc
import logging
import socket

import pytest
from thriftpy2.transport import TSocket

from sparkbarrier._exceptions import SinkError
from sparkbarrier.connectors.hbase._connection import HBaseConnection

pytestmark = [pytest.mark.hbase]


def test_call_reconnects_after_the_server_side_closed_the_socket(hbase_thrift, caplog) -> None:
    caplog.set_level(logging.INFO, logger="sparkbarrier.connectors.hbase._connection")
    conn = HBaseConnection(*hbase_thrift)
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
    conn = HBaseConnection(hbase_thrift[0], 1)
    with pytest.raises(SinkError, match="cannot reach the HBase Thrift server"):
        conn.call(lambda c: c.tables())
