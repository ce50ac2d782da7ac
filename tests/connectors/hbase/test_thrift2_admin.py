"""The Thrift2 admin client against a real HBase Thrift2 server (no mocks).

Besides the client, this pins down the HBase behaviour the sink relies on (2.6.1):
with ``KEEP_DELETED_CELLS=TRUE`` a time-range read ``[0, T)`` still sees a cell that a
DeleteColumns/DeleteFamily marker at a timestamp >= T deleted; with FALSE it does not.
Data is written and read through Thrift1 (happybase), as the sink does.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import happybase
import pytest
from hbase_clients import thrift2_admin

from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase.client._connection import connection_options
from sparkbarrier.connectors.hbase.client._thrift2 import (
    FOREVER,
    FamilySettings,
    FamilySpec,
    KeepDeletedCells,
    Thrift2Admin,
)

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(120)]


@pytest.fixture
def admin(hbase_thrift2: tuple[str, int]) -> Iterator[Thrift2Admin]:
    client = thrift2_admin(*hbase_thrift2, timeout_ms=30_000)
    yield client
    client.close()


@pytest.fixture
def thrift1(hbase_thrift: tuple[str, int]) -> Iterator[happybase.Connection]:
    conn = happybase.Connection(*hbase_thrift, timeout=30_000)
    yield conn
    conn.close()


@pytest.fixture
def table_name(unique_name: Callable[[str], str], thrift1: happybase.Connection,
               hbase_thrift: tuple[str, int]) -> Iterator[Callable[[str], str]]:
    """``table_name("x")`` → a fresh name; every such table is dropped afterwards."""
    names: list[str] = []

    def make(prefix: str) -> str:
        names.append(unique_name(prefix))
        return names[-1]

    yield make
    cleanup = happybase.Connection(*hbase_thrift, timeout=30_000)
    try:
        existing = set(cleanup.tables())
        for name in names:
            if name.encode() in existing:
                cleanup.delete_table(name, disable=True)
    finally:
        cleanup.close()


def _kdc_table(admin: Thrift2Admin, name: str, keep_deleted_cells: int) -> None:
    admin.create_table(name, {"f": FamilySpec(max_versions=100,
                                              keep_deleted_cells=keep_deleted_cells)})


def test_create_table_with_keep_deleted_cells_reads_back(
        admin: Thrift2Admin, thrift1: happybase.Connection,
        table_name: Callable[[str], str]) -> None:
    name = table_name("kdc")
    assert not admin.table_exists(name)
    admin.create_table(name, {
        "f": FamilySpec(max_versions=100, keep_deleted_cells=KeepDeletedCells.TRUE),
        "g": FamilySpec(max_versions=3, ttl_seconds=3600, min_versions=1),
    })
    assert admin.table_exists(name)
    assert admin.family_settings(name) == {
        "f": FamilySettings(max_versions=100, keep_deleted_cells=KeepDeletedCells.TRUE,
                            ttl_seconds=FOREVER, min_versions=0),
        "g": FamilySettings(max_versions=3, keep_deleted_cells=KeepDeletedCells.FALSE,
                            ttl_seconds=3600, min_versions=1),
    }
    # Why Thrift2 at all: Thrift1's column descriptor has no such attribute.
    descriptor = thrift1.table(name).families()[b"f"]
    assert descriptor["max_versions"] == 100
    assert not any("deleted" in key for key in descriptor)


def test_table_created_through_thrift1_reads_keep_deleted_cells_false(
        admin: Thrift2Admin, thrift1: happybase.Connection,
        table_name: Callable[[str], str]) -> None:
    name = table_name("t1")
    thrift1.create_table(name, {"f": {"max_versions": 7}})
    assert admin.family_settings(name) == {
        "f": FamilySettings(max_versions=7, keep_deleted_cells=KeepDeletedCells.FALSE,
                            ttl_seconds=FOREVER, min_versions=0),
    }


def test_region_boundaries_of_pre_split_and_unsplit_tables(
        admin: Thrift2Admin, table_name: Callable[[str], str]) -> None:
    split = table_name("split")
    admin.create_table(split, {"f": FamilySpec()}, split_keys=[b"m", b"g", b"t"])
    assert admin.region_boundaries(split) == [
        (b"", b"g"), (b"g", b"m"), (b"m", b"t"), (b"t", b"")]
    whole = table_name("whole")
    admin.create_table(whole, {"f": FamilySpec()})
    assert admin.region_boundaries(whole) == [(b"", b"")]


@pytest.mark.parametrize("kdc", [KeepDeletedCells.TRUE, KeepDeletedCells.FALSE],
                         ids=["keep_deleted", "plain"])
def test_exact_version_delete_removes_only_that_version(
        admin: Thrift2Admin, thrift1: happybase.Connection,
        table_name: Callable[[str], str], kdc: int) -> None:
    name = table_name("versions")
    _kdc_table(admin, name, kdc)
    table = thrift1.table(name)
    for ts in (10, 20, 30):
        table.put(b"r", {b"f:q": b"v%d" % ts, b"f:other": b"o%d" % ts}, timestamp=ts)
    admin.delete_versions(name, [(b"r", b"f", b"q", 20)])
    assert table.cells(b"r", b"f:q", versions=10, include_timestamp=True) == [
        (b"v30", 30), (b"v10", 10)]
    assert table.cells(b"r", b"f:other", versions=10, include_timestamp=True) == [
        (b"o30", 30), (b"o20", 20), (b"o10", 10)]
    # The version's own marker shares its timestamp, so no time range that contains
    # the version excludes the marker: even KEEP_DELETED_CELLS does not bring it back.
    assert table.row(b"r", columns=[b"f:q"], timestamp=21) == {b"f:q": b"v10"}
    # Deleting the newest version makes the next older one current.
    admin.delete_versions(name, [(b"r", b"f", b"q", 30)])
    assert table.row(b"r", columns=[b"f:q"]) == {b"f:q": b"v10"}
    admin.delete_versions(name, [])  # nothing to do is no call at all


@pytest.mark.parametrize("marker", ["delete_columns", "delete_family"])
@pytest.mark.parametrize("kdc", [KeepDeletedCells.TRUE, KeepDeletedCells.FALSE],
                         ids=["keep_deleted", "plain"])
def test_time_range_read_sees_cells_deleted_at_or_after_its_end_only_with_keep_deleted_cells(
        admin: Thrift2Admin, thrift1: happybase.Connection,
        table_name: Callable[[str], str], kdc: int, marker: str) -> None:
    name = table_name("asof")
    _kdc_table(admin, name, kdc)
    table = thrift1.table(name)
    table.put(b"r", {b"f:q": b"v"}, timestamp=10)
    if marker == "delete_columns":  # happybase → deleteAllTs: DeleteColumns <= 50
        table.delete(b"r", columns=[b"f:q"], timestamp=50)
    else:  # happybase → deleteAllRowTs: DeleteFamily <= 50
        table.delete(b"r", timestamp=50)
    # ``timestamp=T`` is the time range [0, T): the marker at 50 lies outside for T <= 50.
    expected = {b"r": {b"f:q": b"v"}} if kdc == KeepDeletedCells.TRUE else {}
    for as_of in (11, 30, 50):
        assert dict(table.scan(timestamp=as_of)) == expected, as_of
    # Once the range contains the marker, or without a range, the cell is gone either way.
    assert dict(table.scan(timestamp=51)) == {}
    assert dict(table.scan()) == {}
    assert table.cells(b"r", b"f:q", versions=10) == []


def test_missing_table_is_a_sink_error_naming_server_and_table(
        admin: Thrift2Admin, hbase_thrift2: tuple[str, int],
        unique_name: Callable[[str], str]) -> None:
    missing = unique_name("missing")
    with pytest.raises(SinkError) as info:
        admin.family_settings(missing)
    message = str(info.value)
    assert f"{hbase_thrift2[0]}:{hbase_thrift2[1]}" in message and missing in message
    assert "\n" not in message


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_port_without_server_is_one_clear_sink_error() -> None:
    port = _free_port()
    with pytest.raises(SinkError) as info:
        thrift2_admin("127.0.0.1", port, timeout_ms=5_000)
    message = str(info.value)
    assert f"cannot reach the HBase Thrift2 server 127.0.0.1:{port}" in message
    assert "org.apache.hadoop.hbase.thrift2.ThriftServer" in message  # the fix: start it
    assert "\n" not in message


def test_thrift1_port_is_a_clear_sink_error(hbase_thrift: tuple[str, int]) -> None:
    admin = thrift2_admin(*hbase_thrift, timeout_ms=10_000)
    try:
        with pytest.raises(SinkError, match="serves Thrift2, not Thrift1") as info:
            admin.table_exists("hbase:meta")
    finally:
        admin.close()
    assert "\n" not in str(info.value)


def test_unknown_transport_is_rejected_before_connecting() -> None:
    """Built from the sink's options like every connection: a bad value is a ConfigError naming
    the option (it used to be a SinkError from the client's own constructor)."""
    with pytest.raises(ConfigError, match="hbase.thrift.transport") as info:
        Thrift2Admin(connection_options({"hbase.thrift2.host": f"127.0.0.1:{_free_port()}",
                                         "hbase.thrift.transport": "http"}))
    assert info.value.option == "hbase.thrift.transport"


def test_no_thrift2_gateway_in_the_options_is_a_config_error_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="hbase.thrift2.port") as info:
        Thrift2Admin(connection_options({"hbase.thrift.host": "127.0.0.1:9090"}))
    assert info.value.option == "hbase.thrift2.port"


def _kill_sockets_to(port: int) -> int:
    """Shut down this process's open Thrift sockets to ``port`` at the OS level (a gateway restart)."""
    import gc

    from thriftpy2.transport import TSocket

    def to_port(o: object) -> bool:
        try:
            return (isinstance(o, TSocket) and o.sock is not None and o.sock.fileno() >= 0
                    and o.sock.getpeername()[1] == port)
        except ReferenceError:  # gc also lists weak proxies whose object is gone
            return False

    live = [o for o in gc.get_objects() if to_port(o)]
    for tsock in live:
        tsock.sock.shutdown(socket.SHUT_RDWR)
    return len(live)


def test_version_scan_resumes_after_a_dead_socket_and_after_a_delete_between_chunks_failed_over(
        admin: Thrift2Admin, thrift1: happybase.Connection, table_name: Callable[[str], str],
        hbase_thrift2: tuple[str, int]) -> None:
    """Rollback's scan-and-delete through the shared gateway loop: every version in the range
    comes back once, whether the scan's socket dies or a delete between chunks fails over."""
    name = table_name("gap")
    _kdc_table(admin, name, KeepDeletedCells.TRUE)
    table = thrift1.table(name)
    for i in range(5):
        for ts in (10, 20, 30):
            table.put(b"r%d" % i, {b"f:q": b"v%d" % ts}, timestamp=ts)
    chunks = admin.versions_in_range(name, [b"f"], 15, 35, chunk=2)  # rows r0 r1 | r2 r3 | r4
    first = next(chunks)
    assert {c[0] for c in first} == {b"r0", b"r1"}
    assert _kill_sockets_to(hbase_thrift2[1]) >= 1
    admin.delete_versions(name, first)  # its socket is dead: the call fails over to a fresh one
    second = next(chunks)  # the scan sees its socket replaced and reopens there after r1
    assert _kill_sockets_to(hbase_thrift2[1]) >= 1  # and now the scan's own socket dies
    rest = [cell for chunk in chunks for cell in chunk]
    seen = first + second + rest
    assert sorted(seen) == sorted((b"r%d" % i, b"f", b"q", ts) for i in range(5) for ts in (20, 30))
    assert table.cells(b"r0", b"f:q", versions=10, include_timestamp=True) == [(b"v10", 10)]


def _distinct_free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_thrift2_fails_over_like_thrift1_and_honours_the_failover_options(
        hbase_thrift2: tuple[str, int], caplog: pytest.LogCaptureFixture) -> None:
    """One gateway loop for both services: a dead Thrift2 gateway is skipped with a warning;
    all down, ``hbase.thrift.failover.rounds`` passes ``.backoff`` ms apart, then one error."""
    import logging
    import time

    dead, other = _distinct_free_ports(2)
    caplog.set_level(logging.WARNING)
    live = connection_options({"hbase.thrift2.host": f"127.0.0.1:{dead},{hbase_thrift2[0]}:{hbase_thrift2[1]}",
                               "hbase.thrift.failover.rounds": "1"})
    with Thrift2Admin(live) as admin:
        assert admin.table_exists("hbase:meta")
        assert admin.port == hbase_thrift2[1]
    assert f"HBase Thrift2 server 127.0.0.1:{dead} failed" in caplog.text
    down = connection_options({"hbase.thrift2.host": f"127.0.0.1:{dead},127.0.0.1:{other}",
                               "hbase.thrift.failover.rounds": "2", "hbase.thrift.failover.backoff": "400"})
    started = time.monotonic()
    with pytest.raises(SinkError) as info:
        Thrift2Admin(down)
    text = str(info.value)
    assert "2 pass(es) over 2 gateway(s)" in text and f"127.0.0.1:{dead}" in text and f"127.0.0.1:{other}" in text
    assert time.monotonic() - started >= 0.4
