"""A real HDFS HA pair for the devstack: two NameNodes of one nameservice and one DataNode, on 127.0.0.1.

Why. Production checkpoints sit on an HA nameservice (``hdfs://<ns>/...``), and a
NameNode failover is routine there: the active one dies or is moved, the standby is
made active. Both of Spark's clients of that location must follow it: Hadoop's own
(``ConfiguredFailoverProxyProvider``, in the JVM) and sparkbarrier's WebHDFS layer
(``connectors/storage/_webhdfs.py``, in Python workers). Only a real pair shows what a standby
answers and how long a promotion takes; ``tests/integration/test_hdfs_ha.py`` kills and
promotes this one under running calls and a running query.

How (Hadoop's "HDFS High Availability" guide, the shared-storage variant): the edits
are shared through a folder both NameNodes see (``dfs.namenode.shared.edits.dir=
file:///...``; on one machine that is any folder, as NFS would be for two). The first
NameNode is formatted (which formats the shared edits too), started and made active;
the second is initialised from it with ``-bootstrapStandby`` and starts as the standby.
The DataNode reports to both. Fencing is ``shell(/bin/true)``: two processes on one
machine need none, and a SIGKILLed NameNode writes nothing. No ZooKeeper: transitions
are manual, through Hadoop's ``DFSHAAdmin`` main class (``hdfs haadmin`` without the
script): ``-transitionToActive --forcemanual --forceactive`` after a crash, ``-failover`` for a
graceful move (the old active becomes the standby).

Every process is Hadoop's own main class on the jars of ``poms/hdfs/pom.xml``, started
as ``_hdfs.py`` starts its two (markers, pid records, logs under ``<home>/logs``).
Each daemon has its own config folder: the two NameNodes share an address (127.0.0.1),
so each is told which one it is (``dfs.ha.namenode.id``). ``conf_dir`` holds what a
client needs (``fs.defaultFS=hdfs://<ns>`` and the nameservice): it is the
``HADOOP_CONF_DIR`` of Spark's Hadoop client and of sparkbarrier's WebHDFS layer alike.

Life cycle: a throw-away pair. ``up`` stops what its home has recorded, wipes the data
and starts afresh on free ports (12-22 s here); ``down`` stops all three. ``kill`` and
``start`` crash and restart one NameNode (it comes back as the standby). Every wait
polls with a deadline.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import DevstackError
from ._config import Paths
from ._hdfs import MAINS, SHARED_SETTINGS, HdfsEndpoints, http_request, jvm_options, probe, site_xml, write_log4j
from ._jvm import Java, find_java
from ._maven import Classpath, resolve_classpath
from ._process import (
    ProcessRecord,
    died,
    free_ports,
    kill_processes,
    log_tail,
    marker_for,
    port_accepts,
    spawn,
    stack_lock,
    stop_recorded,
)

__all__ = ["NAMENODE_IDS", "NAMESERVICE", "HaEndpoints", "HdfsHaPair"]

log = logging.getLogger(__name__)

NAMESERVICE = "devstack-ha"
NAMENODE_IDS = ("nn1", "nn2")
_DATANODE = "datanode"
_ADMIN = "admin"  # DFSHAAdmin's config folder
_ADMIN_MAIN = "org.apache.hadoop.hdfs.tools.DFSHAAdmin"
_PROVIDER = "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"
_HEAPS = {"nn1": "384m", "nn2": "384m", _DATANODE: "320m"}
_TOOL_TIMEOUT_S = 120.0
_STOP_GRACE_S = 15.0


@dataclass(frozen=True)
class HaEndpoints:
    """Where the pair serves. ``conf_dir`` is the clients' ``HADOOP_CONF_DIR``."""

    nameservice: str
    conf_dir: Path
    http: Mapping[str, str]  # NameNode id -> http://127.0.0.1:<port> (WebHDFS and /jmx)
    rpc: Mapping[str, int]  # NameNode id -> RPC port

    @property
    def uri(self) -> str:
        """``hdfs://<nameservice>``: what ``checkpointLocation`` starts with."""
        return f"hdfs://{self.nameservice}"

    def env(self) -> dict[str, str]:
        return {"HADOOP_CONF_DIR": str(self.conf_dir)}


class HdfsHaPair:
    """Handle on the HA pair in ``home`` (a folder of its own; nothing is shared with the
    stack's HDFS). Creating it touches nothing.

    A variant (``_hdfs_ha_kerberos.py``) changes what it must through the class attributes
    and the hooks marked below (settings, JVM options, readiness), and nothing else: one
    life cycle for both."""

    component = "hdfs-ha"  # data folder, process and log names
    http_host = "127.0.0.1"  # the host of the NameNodes' HTTP addresses (clients use it)

    def __init__(self, home: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None,
                 start_timeout_s: float = 180.0) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, None, self._environ)
        self._start_timeout_s = start_timeout_s
        self._procs: dict[str, subprocess.Popen[bytes]] = {}  # the daemons this handle started
        self._java: Java | None = None
        self._classpath: Classpath | None = None

    @property
    def data(self) -> Path:
        return self.paths.data(self.component)

    def _name(self, daemon: str) -> str:
        return f"{self.component}-{daemon}"

    def _log(self, daemon: str) -> Path:
        return self.paths.logs / f"{self._name(daemon)}.log"

    def endpoints(self) -> HaEndpoints:
        """The endpoints ``up`` chose (read back from ``ports.json``)."""
        ports = json.loads((self.data / "ports.json").read_text())
        return HaEndpoints(NAMESERVICE, self.data / "conf",
                           {nn: f"http://{self.http_host}:{ports[f'{nn}_http']}" for nn in NAMENODE_IDS},
                           {nn: ports[f"{nn}_rpc"] for nn in NAMENODE_IDS})

    # ------------------------------------------------------------------ life cycle
    def up(self) -> HaEndpoints:
        """Start the pair afresh (data wiped, free ports): nn1 active, nn2 standby, the
        DataNode live on both. Raises ``DevstackError`` (after stopping what it started)
        when a step fails or the pair is not ready by the deadline."""
        self.paths.ensure()
        deadline = time.monotonic() + self._start_timeout_s
        started_at = time.monotonic()
        with stack_lock(self.paths.run):
            self._stop_all()
            shutil.rmtree(self.data, ignore_errors=True)
            try:
                self._write_confs(_free_ports())
                endpoints = self.endpoints()
                self._tool("nn1", "-format", "-clusterId", "sparkbarrier-devstack-ha", "-nonInteractive", "-force")
                self._spawn("nn1")
                self._spawn(_DATANODE)  # it retries until the NameNodes listen
                self._wait_state("nn1", "standby", deadline)  # every HA NameNode starts as the standby
                self.transition_to_active("nn1")
                self._tool("nn2", "-bootstrapStandby", "-nonInteractive", "-force")
                self._spawn("nn2")
                self._serves(endpoints, deadline)
                self._wait_state("nn2", "standby", deadline, live_datanode=True)
            except BaseException:
                log.info("hdfs ha pair start failed; stopping what it started")
                self._stop_all()
                raise
        log.info("hdfs ha pair %s serves (nn1 active, nn2 standby; started in %.1fs)", endpoints.uri,
                 time.monotonic() - started_at)
        return endpoints

    def down(self) -> list[str]:
        """Stop all three (SIGTERM, SIGKILL after a bounded wait). Idempotent."""
        with stack_lock(self.paths.run):
            return self._stop_all()

    def _stop_all(self) -> list[str]:
        names = [self._name(d) for d in (*NAMENODE_IDS, _DATANODE)]
        stopped = [r.name for r in stop_recorded(self.paths.run, names, grace_s=_STOP_GRACE_S)]
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self._procs.clear()
        return stopped

    # ------------------------------------------------------------------ failures and transitions
    def kill(self, nn: str) -> None:
        """SIGKILL NameNode ``nn`` (a crash: nothing handed over) and wait until it is gone."""
        record = ProcessRecord.load(self.paths.run, self._name(nn))
        if record is None or not kill_processes([record]):
            raise DevstackError(f"NameNode {nn} of the HA pair is not running", fix="start it first")
        proc = self._procs.pop(nn, None)
        if proc is not None:
            proc.wait()  # reaped: no zombie

    def start(self, nn: str, *, timeout_s: float = 120.0) -> None:
        """Start NameNode ``nn`` again (its data kept); it comes back as the standby. Returns
        once it serves as the standby with the DataNode registered (a promotion right after
        finds the block locations)."""
        self._spawn(nn)
        self._wait_state(nn, "standby", time.monotonic() + timeout_s, live_datanode=True)

    def transition_to_active(self, nn: str) -> None:
        """``DFSHAAdmin -transitionToActive --forcemanual --forceactive nn`` (its confirmation
        answered): what an operator does after the active one crashed. ``--forceactive``
        because without it the tool first asks the other NameNode whether it is active
        and gives up when that one does not answer (it is dead, or not started yet). No
        fencing: the caller knows the old one is dead."""
        self._admin("-transitionToActive", "--forcemanual", "--forceactive", nn)

    def failover(self, active: str, standby: str) -> None:
        """``DFSHAAdmin -failover active standby``: the graceful move (``active`` becomes the
        standby, fenced with ``shell(/bin/true)`` if it does not)."""
        self._admin("-failover", active, standby)

    def state(self, nn: str) -> str | None:
        """``active`` or ``standby`` from the NameNode's /jmx, None while it does not answer."""
        beans = self._beans(nn, "NameNodeStatus")
        return str(beans[0].get("State")) if beans else None

    def jmx(self, nn: str, bean: str) -> dict[str, object]:
        """One /jmx bean of NameNode ``nn`` (``Hadoop:service=NameNode,name=<bean>``), {} if none."""
        beans = self._beans(nn, bean)
        return dict(beans[0]) if beans else {}

    # ------------------------------------------------------------------ hooks of a variant
    def _serves(self, endpoints: HaEndpoints, deadline: float) -> None:
        """Return once the active NameNode serves a client (here: a probe file written and
        read back through WebHDFS as a plain-HTTP user)."""
        probe(HdfsEndpoints(endpoints.uri, endpoints.http["nn1"]), deadline=deadline, check=self._watch())

    def _security(self) -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
        """(core-site for all, hdfs-site for clients and daemons, hdfs-site for daemons only)
        added to the plain settings; none here."""
        return {}, {}, {}

    def _jvm_options(self) -> tuple[str, ...]:
        """JVM options beyond ``_hdfs.jvm_options`` for every daemon and tool; none here."""
        return ()

    def _get(self, url: str) -> tuple[int, bytes]:
        """GET ``url`` from a NameNode's HTTP server: (status, body)."""
        status, _, body = http_request("GET", url)
        return status, body

    def _before_admin(self) -> None:
        """Runs before every ``DFSHAAdmin`` command (a variant logs the tool in); nothing here."""

    # ------------------------------------------------------------------ internals
    def _beans(self, nn: str, bean: str) -> list[dict[str, object]]:
        try:
            status, body = self._get(f"{self.endpoints().http[nn]}/jmx?qry=Hadoop:service=NameNode,name={bean}")
            return list(json.loads(body).get("beans", [])) if status == 200 else []
        except (OSError, ValueError):  # refused, reset, half-written: no answer yet
            return []

    def _wait_state(self, nn: str, wanted: str, deadline: float, *, live_datanode: bool = False) -> None:
        check = self._watch()
        while time.monotonic() < deadline:
            check()
            if self.state(nn) == wanted and (
                    not live_datanode or int(str(self.jmx(nn, "FSNamesystemState").get("NumLiveDataNodes", 0))) > 0):
                return
            time.sleep(0.3)
        raise DevstackError(f"NameNode {nn} of the HA pair is not {wanted} in time (state: {self.state(nn)})",
                            fix=f"read {self._log(nn)}", log_path=str(self._log(nn)), log_tail=log_tail(self._log(nn)))

    def _watch(self) -> Callable[[], None]:
        """A check for the waits: raises when a daemon this handle started has exited
        (unless ``kill`` ended it)."""
        def check() -> None:
            for daemon, proc in self._procs.items():
                if proc.poll() is not None:
                    raise died(self._name(daemon), proc.returncode, self._log(daemon))
        return check

    def _runtime(self) -> tuple[Java, Classpath]:
        if self._java is None or self._classpath is None:
            self._java = find_java(self._environ)
            self._classpath = resolve_classpath("hdfs", self.paths, self._java)
        return self._java, self._classpath

    def _command(self, daemon: str, marker: str, main: str, heap: str, *args: str) -> list[str]:
        java, classpath = self._runtime()
        home = self.data / daemon
        return java.command(marker=marker, heap=heap, classpath=classpath.as_arg(home / "conf"), main=main,
                            args=args, options=(*jvm_options(home, self.paths.logs), *self._jvm_options()))

    def _spawn(self, daemon: str) -> None:
        name = self._name(daemon)
        marker = marker_for(name, self.paths.home)
        main = MAINS["hdfs-datanode" if daemon == _DATANODE else "hdfs-namenode"]
        proc = spawn(self._command(daemon, marker, main, _HEAPS[daemon]), log_path=self._log(daemon),
                     cwd=self.data / daemon, env=self._environ)
        self._procs[daemon] = proc
        ProcessRecord(name=name, pid=proc.pid, marker=marker, log=str(self._log(daemon)),
                      started_at=time.time()).save(self.paths.run)

    def _tool(self, nn: str, *args: str) -> None:
        """A NameNode one-shot command (``-format``, ``-bootstrapStandby``) with ``nn``'s config."""
        self._run(self._command(nn, f"-Dsparkbarrier.devstack.tool={self.component}-{args[0][1:]}@{self.paths.home}",
                                MAINS["hdfs-namenode"], "256m", *args), self._log(nn), f"NameNode {nn} {args[0]}")

    def _admin(self, *args: str) -> None:
        self._before_admin()
        cmd = self._command(_ADMIN, f"-Dsparkbarrier.devstack.tool={self.component}-haadmin@{self.paths.home}",
                            _ADMIN_MAIN, "128m", *args)
        self._run(cmd, self.paths.logs / f"{self.component}-admin.log", f"DFSHAAdmin {' '.join(args)}", stdin=b"Y\n")

    def _run(self, cmd: list[str], log_path: Path, what: str, stdin: bytes = b"") -> None:
        started = time.monotonic()
        with open(log_path, "ab") as out:
            try:
                code = subprocess.run(cmd, input=stdin, stdout=out, stderr=subprocess.STDOUT, cwd=self.data,
                                      env=self._environ, timeout=_TOOL_TIMEOUT_S, check=False).returncode
            except subprocess.TimeoutExpired as exc:
                raise DevstackError(f"{what} hung for {_TOOL_TIMEOUT_S:.0f}s", fix=f"read {log_path}") from exc
        if code != 0:
            raise DevstackError(f"{what} failed (exit {code}; log: {log_path})", fix="read the log tail",
                                log_path=str(log_path), log_tail=log_tail(log_path))
        log.info("%s took %.1fs", what, time.monotonic() - started)

    def _write_confs(self, ports: Mapping[str, int]) -> None:
        """One config folder per daemon and for the admin tool (``<data>/<daemon>/conf``), the
        clients' (``<data>/conf``); ``ports.json`` for ``endpoints``."""
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "ports.json").write_text(json.dumps(ports))
        shared = self.data / "shared-edits"
        shared.mkdir()
        ns = NAMESERVICE
        security_core, security_hdfs, security_daemons = self._security()
        client: dict[str, object] = {
            "dfs.nameservices": ns,
            "dfs.ha.namenodes." + ns: ",".join(NAMENODE_IDS),
            **{f"dfs.namenode.rpc-address.{ns}.{nn}": f"127.0.0.1:{ports[f'{nn}_rpc']}" for nn in NAMENODE_IDS},
            **{f"dfs.namenode.http-address.{ns}.{nn}": f"{self.http_host}:{ports[f'{nn}_http']}"
               for nn in NAMENODE_IDS},
            f"dfs.client.failover.proxy.provider.{ns}": _PROVIDER,
            "dfs.replication": 1,
            "dfs.permissions.enabled": "false",
            "dfs.webhdfs.enabled": "true",
            **security_hdfs,
        }
        servers: dict[str, object] = {
            **client,
            "dfs.namenode.shared.edits.dir": shared.as_uri(),
            "dfs.ha.automatic-failover.enabled": "false",
            "dfs.ha.fencing.methods": "shell(/bin/true)",
            # The standby reads the shared edits every second (default 60 s), so a
            # promotion has little left to replay.
            "dfs.ha.tail-edits.period": "1s",
            "dfs.datanode.data.dir": (self.data / _DATANODE / "data").as_uri(),
            "dfs.datanode.address": f"127.0.0.1:{ports['dn']}",
            "dfs.datanode.http.address": f"127.0.0.1:{ports['dn_http']}",
            "dfs.datanode.ipc.address": f"127.0.0.1:{ports['dn_ipc']}",
            **SHARED_SETTINGS,
            **security_daemons,
        }
        core = {"fs.defaultFS": f"hdfs://{ns}", **security_core}
        # The clients' folder holds no log4j2.properties: on Spark's classpath it would
        # replace Spark's own logging configuration.
        (self.data / "conf").mkdir()
        (self.data / "conf" / "core-site.xml").write_text(site_xml(core))
        (self.data / "conf" / "hdfs-site.xml").write_text(site_xml(client))
        daemons: dict[str, dict[str, object]] = {_ADMIN: servers, _DATANODE: servers}
        for nn in NAMENODE_IDS:
            daemons[nn] = {**servers, "dfs.ha.namenode.id": nn,
                           "dfs.namenode.name.dir": (self.data / nn / "name").as_uri()}
        for daemon, hdfs in daemons.items():
            conf = self.data / daemon / "conf"
            conf.mkdir(parents=True)
            (self.data / daemon / "tmp").mkdir()
            (conf / "core-site.xml").write_text(site_xml({**core, "hadoop.tmp.dir": self.data / daemon / "tmp"}))
            (conf / "hdfs-site.xml").write_text(site_xml(hdfs))
            write_log4j(conf)


def _free_ports() -> dict[str, int]:
    """Seven free ports on 127.0.0.1, held together while chosen so none repeats."""
    keys = ("nn1_rpc", "nn1_http", "nn2_rpc", "nn2_http", "dn", "dn_http", "dn_ipc")
    ports = dict(zip(keys, free_ports(len(keys)), strict=True))
    if any(port_accepts(p) for p in ports.values()):  # pragma: no cover -- a race with another process
        raise DevstackError("a port chosen for the hdfs ha pair was taken at once", fix="try again")
    return ports
