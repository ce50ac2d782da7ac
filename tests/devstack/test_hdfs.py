"""The devstack's HDFS (``devstack/_hdfs.py``) does what checkpoint tests rely on: WebHDFS
writes and reads whose redirects stay on 127.0.0.1, a DataNode registered as 127.0.0.1,
``env`` lines that name it, and data that survives a restart.

The shared HDFS comes from the session fixture ``hdfs``; the restart runs in a
throw-away home on free ports, so it never stops the shared one. The first two tests
need no server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from devstack_helpers import run_cli

from sparkbarrier.devstack import Devstack, DevstackError
from sparkbarrier.devstack._config import port_requests
from sparkbarrier.devstack._hdfs import Hdfs, HdfsPort, _site
from sparkbarrier.devstack._process import free_ports

_USER = {"user.name": "sparkbarrier-test"}


def _write(webhdfs: str, path: str, data: bytes) -> str:
    """WebHDFS's two-step CREATE: the NameNode answers 307 naming a DataNode, which takes the
    bytes. Returns the DataNode URL it redirected to."""
    first = requests.put(f"{webhdfs}/webhdfs/v1{path}", params={"op": "CREATE", "overwrite": "true", **_USER},
                         allow_redirects=False, timeout=30)
    assert first.status_code == 307, first.text
    location = first.headers["Location"]
    second = requests.put(location, data=data, headers={"Content-Type": "application/octet-stream"}, timeout=30)
    assert second.status_code == 201, second.text
    return location


def _read(webhdfs: str, path: str) -> tuple[bytes, str]:
    """(content, the DataNode URL OPEN redirected to)."""
    response = requests.get(f"{webhdfs}/webhdfs/v1{path}", params={"op": "OPEN", **_USER}, timeout=30)
    assert response.status_code == 200, response.text
    assert [r.status_code for r in response.history] == [307]
    return response.content, response.history[0].headers["Location"]


def test_every_address_is_loopback_and_the_settings_are_the_contract(tmp_path: Path) -> None:
    ports = {port: port.default for port in HdfsPort}
    core, site = _site(tmp_path, ports)
    assert core["fs.defaultFS"] == "hdfs://127.0.0.1:9820"
    addresses = {k: v for k, v in site.items() if k.endswith("address")}
    assert addresses == {
        "dfs.namenode.rpc-address": "127.0.0.1:9820", "dfs.namenode.http-address": "127.0.0.1:9870",
        "dfs.datanode.address": "127.0.0.1:9866", "dfs.datanode.http.address": "127.0.0.1:9864",
        "dfs.datanode.ipc.address": "127.0.0.1:9867"}
    # The DataNode registers as 127.0.0.1 and clients use that address, not a hostname.
    assert {k: v for k, v in site.items() if "hostname" in k} == {
        "dfs.datanode.hostname": "127.0.0.1", "dfs.client.use.datanode.hostname": "false",
        "dfs.datanode.use.datanode.hostname": "false",
        "dfs.namenode.datanode.registration.ip-hostname-check": "false"}
    assert (site["dfs.permissions.enabled"], site["dfs.replication"], site["dfs.webhdfs.enabled"]) == (
        "false", 1, "true")
    assert str(site["dfs.namenode.name.dir"]).startswith(tmp_path.as_uri())


def test_ports_are_requested_by_argument_or_environment_and_checked() -> None:
    env = {HdfsPort.NAMENODE.env: "19820"}
    assert port_requests({}, env, HdfsPort)[HdfsPort.NAMENODE] == 19820
    assert port_requests({HdfsPort.NAMENODE: 29820}, env, HdfsPort)[HdfsPort.NAMENODE] == 29820
    assert port_requests({}, {}, HdfsPort)[HdfsPort.NAMENODE_HTTP] is None
    assert HdfsPort.NAMENODE_HTTP.flag == "--hdfs-namenode-http-port"
    with pytest.raises(DevstackError, match="SPARKBARRIER_DEVSTACK_HDFS_DATANODE_PORT"):
        port_requests({}, {HdfsPort.DATANODE.env: "nine"}, HdfsPort)


@pytest.mark.hdfs
@pytest.mark.slow
def test_webhdfs_writes_reads_and_lists_through_a_datanode_on_loopback(hdfs, unique_name) -> None:
    folder = f"/tests/{unique_name('webhdfs')}"
    data = b"barrier\n" * 1000
    created_at = _write(hdfs.webhdfs, f"{folder}/part-0", data)
    content, opened_at = _read(hdfs.webhdfs, f"{folder}/part-0")
    assert content == data
    for url in (created_at, opened_at):
        assert urlsplit(url).hostname == "127.0.0.1", url

    listing = requests.get(f"{hdfs.webhdfs}/webhdfs/v1{folder}", params={"op": "LISTSTATUS", **_USER}, timeout=30)
    assert listing.status_code == 200, listing.text
    statuses = listing.json()["FileStatuses"]["FileStatus"]
    assert [(s["pathSuffix"], s["type"], s["length"], s["replication"]) for s in statuses] == [
        ("part-0", "FILE", len(data), 1)]

    # The NameNode hands Spark's hdfs:// client block locations on 127.0.0.1 too.
    info = requests.get(f"{hdfs.webhdfs}/jmx", params={"qry": "Hadoop:service=NameNode,name=NameNodeInfo"},
                        timeout=30).json()["beans"][0]
    assert [node["xferaddr"].split(":")[0] for node in json.loads(info["LiveNodes"]).values()] == ["127.0.0.1"]
    assert re.fullmatch(r"hdfs://127\.0\.0\.1:\d+", hdfs.uri)

    deleted = requests.delete(f"{hdfs.webhdfs}/webhdfs/v1{folder}",
                              params={"op": "DELETE", "recursive": "true", **_USER}, timeout=30)
    assert deleted.json() == {"boolean": True}


@pytest.mark.hdfs
@pytest.mark.kafka
@pytest.mark.hbase
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_env_prints_the_hdfs_and_webhdfs_variables_while_it_runs(hdfs) -> None:
    exports = f"export SPARKBARRIER_HDFS={hdfs.uri}\nexport SPARKBARRIER_WEBHDFS={hdfs.webhdfs}\n"
    result = run_cli("hdfs", "env", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == exports
    status = run_cli("hdfs", "status", timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert re.search(r"hdfs-namenode\s+up\s+pid=\d+", status.stdout), status.stdout
    assert re.search(r"hdfs-datanode\s+up\s+pid=\d+", status.stdout), status.stdout

    Devstack().up()  # the stack's own `env` names the HDFS beside Kafka and HBase
    stack_env = run_cli("env", timeout=60)
    assert stack_env.returncode == 0, stack_env.stderr
    assert stack_env.stdout.endswith(exports), stack_env.stdout


@pytest.mark.hdfs
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_restart_keeps_the_files_and_a_fresh_start_wipes_them(scratch_home: Path) -> None:
    hdfs = Hdfs(scratch_home, ports=dict(zip(HdfsPort, free_ports(len(HdfsPort)), strict=True)))
    endpoints = hdfs.up()
    _write(endpoints.webhdfs, "/kept/file", b"still here")
    assert hdfs.up() == endpoints  # idempotent: nothing restarted
    pids = {p.name: p.pid for p in hdfs.status().processes}

    assert sorted(hdfs.down()) == ["hdfs-datanode", "hdfs-namenode"]
    assert hdfs.endpoints() is None and not hdfs.status().running
    assert hdfs.up() == endpoints  # same ports, same metadata: not formatted again
    assert {p.name: p.pid for p in hdfs.status().processes} != pids
    assert _read(endpoints.webhdfs, "/kept/file")[0] == b"still here"

    hdfs.up(fresh=True)
    gone = requests.get(f"{endpoints.webhdfs}/webhdfs/v1/kept/file", params={"op": "GETFILESTATUS", **_USER},
                        timeout=30)
    assert gone.status_code == 404
    # scratch_home's Devstack(home).down() stops the HDFS too
