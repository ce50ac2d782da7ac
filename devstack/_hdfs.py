"""The devstack's optional HDFS: one NameNode and one DataNode on 127.0.0.1, with WebHDFS.

Why a real HDFS: production keeps Spark's ``checkpointLocation`` on HDFS, and the
package reads and writes beside it through WebHDFS (``connectors/storage/_files.py``). Only a
real NameNode shows what that costs: the two-step CREATE whose redirect names a
DataNode, ``hdfs://`` paths in Spark's own checkpoint, renames that are atomic. The
daemons are Hadoop's own main classes on the jars of ``poms/hdfs/pom.xml`` (the
Hadoop release pyspark's client is), started like the other servers (marker, pid
record, log under ``<home>/logs``).

Settings that are the test contract (``_site``): every address is 127.0.0.1 and the
DataNode registers and advertises itself as 127.0.0.1 (WebHDFS redirects and Spark's
block reads go there, never to the machine's hostname); permissions are off
(any ``user.name`` may write anywhere); replication 1; no safe-mode extension, so
a restarted NameNode serves as soon as the DataNode has reported.

Life cycle: ``up`` is idempotent. It leaves an HDFS alone whose two daemons are ours
and serving (after a probe); otherwise it stops what is left and starts both, keeping
the data: the NameNode is formatted (``-format -nonInteractive -force``) only when it
has no metadata yet, or when ``up(fresh=True)`` wipes everything. Ready means: WebHDFS
answers ``GETFILESTATUS /``, the NameNode counts a live DataNode and is out of safe
mode, and a file written through WebHDFS (redirected to 127.0.0.1) reads back.
``down`` stops both; the stack's ``down`` does too.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import json
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from .._exceptions import DevstackError
from ..connectors.storage._files import WEBHDFS_ENV
from ._config import Paths, PortSpec, port_requests
from ._jvm import Java, find_java, write_log4j_config
from ._maven import Classpath, resolve_classpath
from ._process import (
    ProcessRecord,
    ProcessStatus,
    check_requested_ports,
    choose_ports,
    died,
    is_ours,
    log_tail,
    marker_for,
    port_accepts,
    spawn,
    stack_lock,
    stop_processes,
    stop_recorded,
)

__all__ = ["HDFS_ENV", "NAMES", "WEBHDFS_ENV", "Hdfs", "HdfsEndpoints", "HdfsPort", "HdfsStatus"]

log = logging.getLogger(__name__)

HDFS_ENV = "SPARKBARRIER_HDFS"
"""The NameNode's RPC address as a file-system URI, ``hdfs://127.0.0.1:<port>``."""

NAME = "hdfs"
NAMENODE = "hdfs-namenode"
DATANODE = "hdfs-datanode"
NAMES = (NAMENODE, DATANODE)
MAINS = {NAMENODE: "org.apache.hadoop.hdfs.server.namenode.NameNode",
          DATANODE: "org.apache.hadoop.hdfs.server.datanode.DataNode"}
_HEAPS = {NAMENODE: "512m", DATANODE: "384m"}
# What Hadoop 3.5's own launcher passes on Java 17 (hadoop_finalize_jpms_opts, the list
# hadoop-project's pom keeps in sync): reflection into java.base that Hadoop, Jersey and
# Kerby do at run time, which Java 17 refuses with InaccessibleObjectException.
_JAVA17_OPTIONS = tuple(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.io", "java.lang", "java.lang.reflect", "java.math", "java.net", "java.text", "java.util",
    "java.util.concurrent", "java.util.zip", "sun.security.util", "sun.security.x509"))
# C1 only, as the Kafka cluster's nodes: both daemons are up seconds sooner and test
# traffic never needs C2's code.
_JVM_OPTIONS = ("-Xms64m", "-XX:TieredStopAtLevel=1", "-XX:+UseG1GC", "-Djava.awt.headless=true")
_FORMAT_TIMEOUT_S = 120.0
_STOP_GRACE_S = 15.0
_RECHECK_S = 60.0
_HTTP_TIMEOUT_S = 10.0
# Chatty at INFO: one line per block, per client request, per audit event, ~1000 lines
# of directory locks per DataNode start.
_QUIET_LOGGERS = ("org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit", "org.apache.hadoop.hdfs.StateChange",
                  "org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace",
                  "org.apache.hadoop.hdfs.server.blockmanagement.BlockManager",
                  "org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.FsDatasetImpl")


class HdfsPort(PortSpec, enum.Enum):
    """The HDFS ports (all bound to 127.0.0.1), with their defaults: Hadoop 3's own, so
    ``hdfs://127.0.0.1:9820`` and ``http://127.0.0.1:9870`` look familiar. Requested and
    chosen as the stack's ``_config.Port`` are (``port_requests``, ``choose_ports``):
    argument, else ``SPARKBARRIER_DEVSTACK_<KEY>_PORT``; a busy default is replaced by a
    free port, a busy request is an error."""

    NAMENODE = ("hdfs_namenode", 9820)  # RPC: what hdfs:// URIs name
    NAMENODE_HTTP = ("hdfs_namenode_http", 9870)  # WebHDFS and /jmx
    DATANODE = ("hdfs_datanode", 9866)  # block transfer
    DATANODE_HTTP = ("hdfs_datanode_http", 9864)  # WebHDFS data: where CREATE and OPEN redirect
    DATANODE_IPC = ("hdfs_datanode_ipc", 9867)


_PROCESS_PORTS = {NAMENODE: (HdfsPort.NAMENODE, HdfsPort.NAMENODE_HTTP),
                  DATANODE: (HdfsPort.DATANODE, HdfsPort.DATANODE_HTTP, HdfsPort.DATANODE_IPC)}


@dataclass(frozen=True)
class HdfsEndpoints:
    uri: str  # hdfs://127.0.0.1:<rpc port>: fs.defaultFS, Spark's checkpointLocation prefix
    webhdfs: str  # http://127.0.0.1:<http port>: the NameNode's WebHDFS (and /jmx)

    def env(self) -> dict[str, str]:
        return {HDFS_ENV: self.uri, WEBHDFS_ENV: self.webhdfs}

    def exports(self) -> str:
        """``export`` lines for ``eval "$(python -m sparkbarrier.devstack hdfs env)"``."""
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env().items())


@dataclass(frozen=True)
class HdfsStatus:
    home: Path
    processes: tuple[ProcessStatus, ...]
    endpoints: HdfsEndpoints | None

    @property
    def running(self) -> bool:
        return all(p.alive and p.serving for p in self.processes)


class Hdfs:
    """Handle on the HDFS of the devstack in ``home`` (default: the stack's).

    ``ports`` maps ``HdfsPort`` to a number for explicit requests (they must be free);
    ``environ`` replaces ``os.environ``. Creating the object touches nothing; every
    wait is bounded and polls.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None, *,
                 cache: str | os.PathLike[str] | None = None,
                 ports: Mapping[HdfsPort, int] | None = None,
                 environ: Mapping[str, str] | None = None,
                 start_timeout_s: float = 180.0) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, cache, self._environ)
        self._port_requests = port_requests(ports or {}, self._environ, HdfsPort)
        self._start_timeout_s = start_timeout_s

    @property
    def data(self) -> Path:
        """Config (``conf/``), NameNode metadata (``name/``) and blocks (``data/``); kept
        across restarts, wiped by ``up(fresh=True)``."""
        return self.paths.data(NAME)

    def _log(self, name: str) -> Path:
        return self.paths.logs / f"{name}.log"

    def _records(self) -> dict[str, ProcessRecord | None]:
        return {name: ProcessRecord.load(self.paths.run, name) for name in NAMES}

    # ------------------------------------------------------------------ queries
    def endpoints(self) -> HdfsEndpoints | None:
        """The endpoints while both daemons are ours and alive, else None (cheap: no request)."""
        records = self._records()
        nn = records[NAMENODE]
        if nn is None or not all(r is not None and is_ours(r) for r in records.values()):
            return None
        return _endpoints(nn.ports[HdfsPort.NAMENODE.key], nn.ports[HdfsPort.NAMENODE_HTTP.key])

    def status(self) -> HdfsStatus:
        """What runs, from the pid records; cheap (no HDFS request)."""
        rows = []
        for name, record in self._records().items():
            alive = record is not None and is_ours(record)
            rows.append(ProcessStatus(
                name=name, pid=record.pid if record else None, alive=alive,
                serving=alive and record is not None and all(port_accepts(p) for p in record.ports.values()),
                ports=dict(record.ports) if record else {}, log=str(self._log(name))))
        return HdfsStatus(self.paths.home, tuple(rows), self.endpoints())

    # ------------------------------------------------------------------ life cycle
    def up(self, *, fresh: bool = False) -> HdfsEndpoints:
        """Start the HDFS unless it already serves; return its endpoints.

        Idempotent. ``fresh`` stops it and wipes its data first. Raises
        ``DevstackError`` (after stopping whatever this call started) when a
        prerequisite is missing or a daemon does not become ready in time.
        """
        self.paths.ensure()
        with stack_lock(self.paths.run):
            records = self._records()
            if not fresh and all(self._serving(n, r) for n, r in records.items()):
                self._check_requested_ports(records)
                endpoints = self.endpoints()
                if endpoints is not None:
                    probe(endpoints, deadline=time.monotonic() + _RECHECK_S)
                    log.info("hdfs already running and healthy")
                    return endpoints
            if fresh:
                log.info("starting hdfs afresh, its data wiped")
            elif any(r is not None for r in records.values()):
                log.info("restarting hdfs (not both daemons serve); its data stays")
            stop_recorded(self.paths.run, NAMES, grace_s=_STOP_GRACE_S)
            if fresh:
                shutil.rmtree(self.data, ignore_errors=True)
            return self._start(time.monotonic() + self._start_timeout_s)

    def down(self) -> list[str]:
        """Stop both daemons (SIGTERM, SIGKILL after a bounded wait); the data stays.
        Idempotent; returns the names of the daemons that were running."""
        with stack_lock(self.paths.run):
            return [r.name for r in stop_recorded(self.paths.run, NAMES, grace_s=_STOP_GRACE_S)]

    # ------------------------------------------------------------------ internals
    def _serving(self, name: str, record: ProcessRecord | None) -> bool:
        expected = {p.key for p in _PROCESS_PORTS[name]}
        return (record is not None and is_ours(record) and expected <= set(record.ports)
                and all(port_accepts(p) for p in record.ports.values()))

    def _check_requested_ports(self, records: Mapping[str, ProcessRecord | None]) -> None:
        for name, record in records.items():
            if record is not None:
                check_requested_ports(name, record, _PROCESS_PORTS[name], self._port_requests,
                                      "python -m sparkbarrier.devstack hdfs down")

    def _start(self, deadline: float) -> HdfsEndpoints:
        started_at = time.monotonic()
        java = find_java(self._environ)
        classpath = resolve_classpath(NAME, self.paths, java)
        ports = choose_ports(self._port_requests)
        conf = self._write_conf(ports)
        for name in NAMES:
            self._log(name).write_bytes(b"")
        if not (self.data / "name" / "current" / "VERSION").is_file():
            # A DataNode keeps the cluster id of the NameNode that formatted it: new
            # metadata needs new block storage, or the DataNode refuses to register.
            shutil.rmtree(self.data / "data", ignore_errors=True)
            self._format(java, classpath, conf)
        procs: dict[str, subprocess.Popen[bytes]] = {}
        records: list[ProcessRecord] = []
        try:
            for name in NAMES:  # side by side: the DataNode retries until the NameNode listens
                marker = marker_for(name, self.paths.home)
                cmd = java.command(marker=marker, heap=_HEAPS[name], classpath=classpath.as_arg(conf),
                                   main=MAINS[name], options=jvm_options(self.data, self.paths.logs))
                log.info("starting %s (log: %s)", name, self._log(name))
                procs[name] = spawn(cmd, log_path=self._log(name), cwd=self.data, env=self._environ)
                record = ProcessRecord(name=name, pid=procs[name].pid, marker=marker, log=str(self._log(name)),
                                       ports={p.key: ports[p] for p in _PROCESS_PORTS[name]}, started_at=time.time())
                record.save(self.paths.run)
                records.append(record)
            endpoints = _endpoints(ports[HdfsPort.NAMENODE], ports[HdfsPort.NAMENODE_HTTP])
            probe(endpoints, deadline=deadline, check=self._watch(procs))
        except BaseException:
            log.info("hdfs start failed; stopping what it started")
            stop_processes(records, grace_s=_STOP_GRACE_S)
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
            for record in records:
                ProcessRecord.remove(self.paths.run, record.name)
            raise
        log.info("hdfs serves on %s, webhdfs on %s (started in %.1fs)", endpoints.uri, endpoints.webhdfs,
                 time.monotonic() - started_at)
        return endpoints

    def _write_conf(self, ports: Mapping[HdfsPort, int]) -> Path:
        """``conf/`` with core-site.xml, hdfs-site.xml and log4j2.properties, rewritten on
        every start (the ports may have changed); it leads the classpath, which is how
        Hadoop's ``Configuration`` finds the site files."""
        conf = self.data / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.data / "tmp").mkdir(exist_ok=True)
        core, hdfs = _site(self.data, ports)
        (conf / "core-site.xml").write_text(site_xml(core))
        (conf / "hdfs-site.xml").write_text(site_xml(hdfs))
        write_log4j(conf)
        return conf

    def _format(self, java: Java, classpath: Classpath, conf: Path) -> None:
        log_path = self._log(NAMENODE)
        log.info("formatting the hdfs namenode (first start)")
        cmd = java.command(marker=f"-Dsparkbarrier.devstack.tool=hdfs-format@{self.paths.home}", heap="256m",
                           classpath=classpath.as_arg(conf), main=MAINS[NAMENODE],
                           args=("-format", "-nonInteractive", "-force"),
                           options=jvm_options(self.data, self.paths.logs))
        with open(log_path, "ab") as out:
            try:
                code = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      cwd=self.data, env=self._environ, timeout=_FORMAT_TIMEOUT_S,
                                      check=False).returncode
            except subprocess.TimeoutExpired as exc:
                raise DevstackError(f"formatting the hdfs namenode hung for {_FORMAT_TIMEOUT_S:.0f}s",
                                    fix=f"read {log_path}") from exc
        if code != 0:
            raise DevstackError(f"formatting the hdfs namenode failed (exit {code}; log: {log_path})",
                                fix="read the log tail above", log_path=str(log_path), log_tail=log_tail(log_path))

    def _watch(self, procs: Mapping[str, subprocess.Popen[bytes]]) -> Callable[[], None]:
        """A check for ``probe``: raises when a daemon this call started has exited."""
        def check() -> None:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise died(name, proc.returncode, self._log(name))
        return check


def write_log4j(conf: Path) -> None:
    """``conf/log4j2.properties``: the devstack's, with Hadoop's chattiest loggers at WARN."""
    log4j = write_log4j_config(conf)
    with open(log4j, "a") as out:
        for n, logger in enumerate(_QUIET_LOGGERS):
            out.write(f"logger.hdfs{n}.name = {logger}\nlogger.hdfs{n}.level = WARN\n")


def _endpoints(rpc: int, http: int) -> HdfsEndpoints:
    return HdfsEndpoints(uri=f"hdfs://127.0.0.1:{rpc}", webhdfs=f"http://127.0.0.1:{http}")


def jvm_options(data: Path, logs: Path) -> tuple[str, ...]:
    """JVM options of both daemons and the format tool. ``java.io.tmpdir`` is the data's
    ``tmp/`` because Jetty unpacks the web apps there (the system /tmp otherwise)."""
    return (*_JAVA17_OPTIONS, *_JVM_OPTIONS, f"-Dlog4j2.configurationFile={data / 'conf' / 'log4j2.properties'}",
            f"-Dhadoop.log.dir={logs}", f"-Djava.io.tmpdir={data / 'tmp'}")


SHARED_SETTINGS: Mapping[str, object] = {
    # The DataNode is 127.0.0.1 to everyone: its registration, WebHDFS redirects,
    # the block locations Spark's client gets. No DNS lookup of the machine's name.
    "dfs.datanode.hostname": "127.0.0.1",
    "dfs.client.use.datanode.hostname": "false",
    "dfs.datanode.use.datanode.hostname": "false",
    "dfs.namenode.datanode.registration.ip-hostname-check": "false",
    # Ready in seconds: no 30 s safe-mode extension, heartbeats and the first
    # block report at once.
    "dfs.namenode.safemode.extension": 0,
    "dfs.heartbeat.interval": 1,
    "dfs.blockreport.initialDelay": 0,
    # No background work a test never needs: metrics log lines, block scanning.
    "dfs.namenode.metrics.logger.period.seconds": 0,
    "dfs.datanode.metrics.logger.period.seconds": 0,
    "dfs.block.scanner.volume.bytes.per.second": 0,
}
"""hdfs-site settings of every devstack HDFS (this one and the HA pair of ``_hdfs_ha.py``)."""


def _site(data: Path, ports: Mapping[HdfsPort, int]) -> tuple[dict[str, object], dict[str, object]]:
    """(core-site, hdfs-site) settings; see the module docstring for why each matters."""
    def at(port: HdfsPort) -> str:
        return f"127.0.0.1:{ports[port]}"

    core: dict[str, object] = {
        "fs.defaultFS": f"hdfs://{at(HdfsPort.NAMENODE)}",
        "hadoop.tmp.dir": data / "tmp",
    }
    hdfs: dict[str, object] = {
        "dfs.namenode.name.dir": (data / "name").as_uri(),
        "dfs.datanode.data.dir": (data / "data").as_uri(),
        "dfs.replication": 1,
        "dfs.permissions.enabled": "false",
        "dfs.webhdfs.enabled": "true",
        "dfs.namenode.rpc-address": at(HdfsPort.NAMENODE),
        "dfs.namenode.http-address": at(HdfsPort.NAMENODE_HTTP),
        "dfs.datanode.address": at(HdfsPort.DATANODE),
        "dfs.datanode.http.address": at(HdfsPort.DATANODE_HTTP),
        "dfs.datanode.ipc.address": at(HdfsPort.DATANODE_IPC),
        **SHARED_SETTINGS,
    }
    return core, hdfs


def site_xml(settings: Mapping[str, object]) -> str:
    props = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
                    for k, v in settings.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{props}</configuration>\n'


# ---------------------------------------------------------------------- readiness
def probe(endpoints: HdfsEndpoints, *, deadline: float, check: Callable[[], None] | None = None) -> None:
    """Poll until the HDFS serves, or raise ``DevstackError`` at ``deadline``. ``check``
    runs before every attempt and may raise to abort (a daemon died).

    Serving means, in this order: WebHDFS answers ``GETFILESTATUS /``; the NameNode
    counts a live DataNode and is out of safe mode; a probe file written through
    WebHDFS (both redirects pointing at 127.0.0.1) reads back, and is deleted.
    """
    last = "no attempt yet"
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            problem = _not_ready(endpoints.webhdfs)
        except (OSError, ValueError) as exc:  # refused, reset, timed out, half-written JSON: not yet
            problem = repr(exc)
        if problem is None:
            return
        if problem != last:
            log.debug("hdfs not ready yet: %s", problem)
        last = problem
        time.sleep(0.5)
    raise DevstackError(f"hdfs at {endpoints.webhdfs} did not become ready in time (last: {last})",
                        fix="read <home>/logs/hdfs-namenode.log and hdfs-datanode.log; then "
                        "`python -m sparkbarrier.devstack hdfs up --fresh`")


def _not_ready(webhdfs: str) -> str | None:
    """What is missing for the HDFS to serve, or None."""
    status, _, body = http_request("GET", f"{webhdfs}/webhdfs/v1/?op=GETFILESTATUS")
    if status != 200:
        return f"GETFILESTATUS / answered {status}: {body[:200]!r}"
    status, _, body = http_request("GET", f"{webhdfs}/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")
    beans = json.loads(body).get("beans", []) if status == 200 else []
    if not beans:
        return f"no FSNamesystemState bean (HTTP {status})"
    if beans[0].get("NumLiveDataNodes", 0) < 1:
        return "no live datanode yet"
    if beans[0].get("FSState") != "Operational":
        return f"namenode in state {beans[0].get('FSState')!r} (safe mode)"
    return _roundtrip(webhdfs)


def _roundtrip(webhdfs: str) -> str | None:
    path = f"/tmp/.sparkbarrier-devstack-probe-{secrets.token_hex(4)}"
    url = f"{webhdfs}/webhdfs/v1{path}?user.name=sparkbarrier-devstack"
    content = b"sparkbarrier devstack probe\n"
    steps: tuple[tuple[str, str, bytes | None, int], ...] = (
        ("PUT", "&op=CREATE&overwrite=true", content, 201), ("GET", "&op=OPEN", None, 200))
    try:
        for method, query, body, wanted in steps:
            status, location, answer = http_request(method, url + query)
            if status != 307 or not location:
                return f"{method} {query[1:]} answered {status}, not a redirect: {answer[:200]!r}"
            if urlsplit(location).hostname != "127.0.0.1":
                raise DevstackError(f"hdfs redirects WebHDFS clients to {location}, not to 127.0.0.1",
                                    fix="check dfs.datanode.hostname in <home>/data/hdfs/conf/hdfs-site.xml")
            status, _, answer = http_request(method, location, body)
            if status != wanted:
                return f"{method} {query[1:]} at the datanode answered {status}: {answer[:200]!r}"
        if answer != content:
            return f"probe file read back as {answer[:100]!r}"
        return None
    finally:
        with contextlib.suppress(OSError):
            http_request("DELETE", url + "&op=DELETE")


def http_request(method: str, url: str, body: bytes | None = None) -> tuple[int, str | None, bytes]:
    """One request, redirects not followed: (status, Location, body)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=_HTTP_TIMEOUT_S)
    try:
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        conn.request(method, f"{parts.path}?{parts.query}", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Location"), response.read()
    finally:
        conn.close()
