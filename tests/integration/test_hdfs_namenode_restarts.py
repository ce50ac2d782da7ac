"""Checkpoint-folder calls against a real NameNode that restarts, is not the first address
configured, or stays down (``connectors/storage/_webhdfs.py``): they ride through, reach it, or
fail with one error naming the addresses, quickly.

The HDFS here is this module's own (a throw-away devstack home on free ports), never
the shared ``hdfs`` fixture's: the test kills its NameNode. Every wait polls with a
deadline.

What runs where: here, one NameNode (``devstack/_hdfs.py``) restarted under calls, a
bound that runs out, and an HA ``hdfs-site.xml`` whose first NameNode is absent; a real
HA pair (``devstack/_hdfs_ha.py``: two NameNodes with shared edits, ``DFSHAAdmin``
transitions) and its failovers under folder calls and under a running Spark query in
tests/integration/test_hdfs_ha.py; the failover rules answer by answer (standby,
startup, safe mode, 503) against a fake NameNode in tests/connectors/test_webhdfs.py.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from folder_calls import folder_calls
from polling import wait_for

from sparkbarrier import FileSystemError
from sparkbarrier.connectors.storage._files import WEBHDFS_ENV, folder
from sparkbarrier.connectors.storage._webhdfs_retry import RETRY_ENV
from sparkbarrier.devstack import Devstack
from sparkbarrier.devstack._hdfs import Hdfs, HdfsEndpoints, HdfsPort
from sparkbarrier.devstack._process import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.hdfs]


@pytest.fixture(scope="module")
def own_hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hdfs, HdfsEndpoints]]:
    home = tmp_path_factory.mktemp("hdfs-restarts") / "devstack-home"
    cluster = Hdfs(home, ports=dict(zip(HdfsPort, free_ports(len(HdfsPort)), strict=True)))
    try:
        yield cluster, cluster.up()
    finally:
        Devstack(home).down()


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))  # empty unless a test writes hdfs-site.xml
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.setenv("HADOOP_USER_NAME", "sparkbarrier-test")


def _ha_site(directory: Path, *addresses: str) -> None:
    props = {"dfs.nameservices": "prod", "dfs.ha.namenodes.prod": "nn1,nn2",
             "dfs.namenode.http-address.prod.nn1": addresses[0], "dfs.namenode.http-address.prod.nn2": addresses[1]}
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (directory / "hdfs-site.xml").write_text(f"<configuration>{body}</configuration>")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(120)
def test_an_ha_nameservice_whose_first_namenode_is_down_reaches_the_second(own_hdfs, tmp_path: Path,
                                                                            monkeypatch) -> None:
    _, endpoints = own_hdfs
    _ha_site(tmp_path, f"127.0.0.1:{_closed_port()}", endpoints.webhdfs.removeprefix("http://"))
    monkeypatch.setenv(RETRY_ENV, "30")
    f = folder(f"hdfs://prod/tests/ha-{os.getpid()}-{time.time_ns()}")
    started = time.monotonic()
    f.create("a", b"first")
    assert f.read("a") == b"first" and f.names() == ["a"] and f.exists()
    assert time.monotonic() - started < 10  # a refused connection fails over at once, no backoff


@pytest.mark.timeout(300)
def test_folder_calls_ride_through_a_namenode_crash_and_restart_and_a_namenode_down_past_the_bound_fails_quickly(
        own_hdfs, monkeypatch) -> None:
    cluster, endpoints = own_hdfs
    monkeypatch.setenv(WEBHDFS_ENV, endpoints.webhdfs)
    monkeypatch.setenv(RETRY_ENV, "150")  # longer than a kill + start of the devstack's NameNode
    base = f"{endpoints.uri}/tests/restart-{os.getpid()}-{time.time_ns()}"
    f = folder(base)
    with folder_calls(f, join_timeout=160) as calls:
        done, failures = calls.done, calls.failures
        wait_for(lambda: len(done) >= 3 or failures, timeout=60, what="calls before the crash")
        namenode = next(p for p in cluster.status().processes if p.name == "hdfs-namenode")
        assert namenode.pid is not None
        os.kill(namenode.pid, signal.SIGKILL)  # a crash, as a NameNode host dying
        wait_for(lambda: not cluster.status().processes[0].alive, timeout=30, what="the NameNode to die")
        before = len(done)

        # Down past the bound: one error, quickly, naming the address and where it came from.
        monkeypatch.setenv(RETRY_ENV, "2")
        started = time.monotonic()
        with pytest.raises(FileSystemError) as err:
            folder(base).names()
        assert time.monotonic() - started < 6
        assert f"{endpoints.webhdfs} (from SPARKBARRIER_WEBHDFS): connection refused" in str(err.value)
        assert "within 2 s (SPARKBARRIER_WEBHDFS_RETRY_SECONDS)" in str(err.value)

        restarted_at = time.monotonic()
        assert cluster.up() == endpoints  # both daemons again, the same ports and metadata
        wait_for(lambda: len(done) >= before + 3 or failures, timeout=120, what="calls after the restart")
    assert failures == [], failures
    assert [n for n, _, _ in done] == list(range(len(done)))
    slowest = max(seconds for _, _, seconds in done)
    assert slowest > 1, "no call waited: the NameNode was never down under a call"
    assert f.names() == [f"{n:05d}" for n, _, _ in done]
    print(f"\nride-through: {len(done)} create+read+list calls, {before} before the crash; slowest {slowest:.1f} s; "
          f"the restart (up()) took {time.monotonic() - restarted_at:.1f} s")
