"""Several Thrift1 gateways: parsing, spreading by partition, failover, the all-down error.

Against the real devstack, which runs two Thrift1 gateways of one HBase
(``SPARKBARRIER_HBASE_THRIFT_GATEWAYS``). "Carries traffic" is checked on the wire: the
test process holds established TCP connections to both gateway ports while the tasks
and read partitions are open, and every row written through either is read back exactly.
The mid-query kill of a gateway is in ``tests/integration/test_gateway_failover.py``.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import pyarrow as pa
import pytest

from hbase_tasks import write_task
from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
from sparkbarrier.connectors.hbase._datasource import HBaseCommittedReader, ScanPartition
from sparkbarrier.connectors.hbase.client._gateways import Gateway, parse_gateways, spread
from sparkbarrier.connectors.hbase._options import parse_read_options, parse_sink_options
from sparkbarrier.connectors.hbase.read._reader import committed_schema, find_commit
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.string())])


def test_gateway_list_takes_the_shared_port_where_an_entry_has_none() -> None:
    assert parse_gateways("h1:9091, h2", 9090) == (Gateway("h1", 9091), Gateway("h2", 9090))
    assert parse_gateways("[::1]:9095,h3", 9090) == (Gateway("::1", 9095), Gateway("h3", 9090))
    assert str(Gateway("::1", 9095)) == "[::1]:9095"
    for bad in ("", " , ", "h1:x", "h1:0", "h1,h1:9090"):
        with pytest.raises(ConfigError):
            parse_gateways(bad, 9090)


def test_single_host_options_keep_working_and_thrift2_follows_the_hosts() -> None:
    opts = parse_sink_options({"hbase.thrift.host": "a", "hbase.thrift.port": "1", "hbase.thrift2.port": "2",
                               "table": "t", "rowkey": "id"})
    assert (opts.host, opts.port, opts.thrift2_port) == ("a", 1, 2)
    assert opts.gateways == (Gateway("a", 1),) and opts.thrift2_gateways == (Gateway("a", 2),)
    many = parse_read_options({"hbase.thrift.host": "a:1,b:3", "hbase.thrift2.port": "2", "table": "t",
                               "hbase.thrift.failover.rounds": "5", "hbase.thrift.failover.backoff": "0"})
    assert many.gateways == (Gateway("a", 1), Gateway("b", 3))
    assert many.thrift2_gateways == (Gateway("a", 2), Gateway("b", 2))
    assert (many.failover_rounds, many.failover_backoff_ms) == (5, 0)


def test_partitions_spread_evenly_and_deterministically() -> None:
    gws = parse_gateways("a,b,c", 1)
    firsts = [spread(gws, i)[0] for i in range(9)]
    assert all(firsts.count(g) == 3 for g in gws)
    assert spread(gws, 4) == (gws[1], gws[2], gws[0]) == spread(gws, 4)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _peer_ports() -> set[int]:
    """Remote ports of this process's established TCP connections (from /proc, i.e. the kernel)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and fields[9] in inodes:  # ESTABLISHED
                    ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def gateways(every_gateway: Any) -> str:
    servers = every_gateway
    assert len(servers.hbase_gateways) >= 2, "two Thrift1 gateways needed (SPARKBARRIER_HBASE_THRIFT_GATEWAYS)"
    return ",".join(f"{h}:{p}" for h, p in servers.hbase_gateways[:2])


@pytest.mark.hbase
def test_tasks_and_read_partitions_use_both_gateways(make_sink, gateways: str) -> None:
    sink = make_sink(SCHEMA, **{"hbase.thrift.host": gateways})
    ports = {g.port for g in sink.opts.gateways}
    writers = [HBaseTaskWriter(sink.opts, TaskIdentity("q1", 0, p)) for p in range(2)]
    try:
        for w in writers:
            w.close = lambda: None  # type: ignore[method-assign]  # keep the sockets open to look at them
        messages = [write_task(w, [pa.RecordBatch.from_pylist(
            [{"id": f"p{p}k{i}", "v": str(i)} for i in range(50)], schema=SCHEMA)])
            for p, w in enumerate(writers)]
        assert ports <= _peer_ports()
        assert {w._conn.gateway.port for w in writers} == ports
    finally:
        for w in writers:
            HBaseTaskWriter.close(w)
    sink.commit(messages, 0)
    record = _record(sink)
    read_opts = {k: sink.raw[k] for k in ("hbase.thrift.host", "table", "sink.id", "commit.table")}
    reader = HBaseCommittedReader(read_opts, record, [], committed_schema(record))
    scans = [reader.read(ScanPartition(i, b"", b"")) for i in range(2)]
    first = [next(s) for s in scans]
    assert ports <= _peer_ports()
    rows = [pa.Table.from_batches([b, *s]) for b, s in zip(first, scans)]
    want = sorted((f"p{p}k{i}", str(i)) for p in range(2) for i in range(50))
    for table in rows:
        assert sorted(zip(table["id"].to_pylist(), table["v"].to_pylist())) == want


def _record(sink: Any) -> Any:
    conn = HBaseConnection(sink.opts)
    try:
        return find_commit(conn, sink.opts.commit_table, sink.opts.table, sink.opts.sink_id)
    finally:
        conn.close()


@pytest.mark.hbase
def test_dead_gateway_is_skipped_with_a_warning_naming_it(make_sink, servers: Any, caplog) -> None:
    dead = _free_ports(1)[0]
    live = servers.hbase_gateways[0]
    sink = make_sink(SCHEMA, **{"hbase.thrift.host": f"127.0.0.1:{dead},{live[0]}:{live[1]}"})
    caplog.set_level(logging.WARNING)
    msg = sink.task([{"id": "a", "v": "1"}], batch=0, partition=0)  # partition 0 starts at the dead one
    sink.commit([msg], 0)
    assert f"gateway 127.0.0.1:{dead} failed" in caplog.text
    assert sink.read() == [{"id": "a", "v": "1"}]


@pytest.mark.hbase
def test_all_gateways_down_is_a_clear_error_naming_them(hbase_thrift) -> None:
    ports = _free_ports(2)
    opts = parse_read_options({"hbase.thrift.host": ",".join(f"127.0.0.1:{p}" for p in ports), "table": "t",
                               "hbase.thrift.failover.rounds": "2", "hbase.thrift.failover.backoff": "10"})
    conn = HBaseConnection(opts)
    with pytest.raises(SinkError, match="cannot reach the HBase Thrift server") as info:
        conn.call(lambda c: c.tables())
    text = str(info.value)
    assert all(f"127.0.0.1:{p}" in text for p in ports)
    assert "2 pass(es)" in text and "hbase.thrift.failover.rounds" in text
