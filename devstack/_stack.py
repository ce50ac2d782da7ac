"""The dev stack as one object: ``up`` (idempotent), ``down``, ``status``, ``endpoints``.

Components, each started and health-checked as a unit:

* ``kafka``: process ``kafka`` (KRaft broker + controller);
* ``hbase``: processes ``hbase-master`` (master, regionserver, ZooKeeper),
  ``hbase-thrift`` (Thrift1, what happybase speaks) and ``hbase-thrift2``
  (THBaseService: family attributes, region locations, exact-version deletes);
* ``gateways``, only with ``up(all_gateways=True)`` (``up --all``): ``hbase-thrift-b``
  (a second Thrift1 gateway, for failover between gateways), ``hbase-thrift-tls``
  (Thrift1 over HTTPS) and ``hbase-thrift2-tls`` (Thrift2 over HTTPS, same certificate;
  exactly-once over TLS needs it). The demo needs none, so plain ``up`` leaves them out; the
  tests that use them ask for them (``tests/conftest.py``, ``every_gateway``). They
  serve the ``hbase`` component's master, so they stop whenever it restarts.

Optional, started apart (``cluster up``, ``_kafka_cluster``): a 3-node Kafka cluster
for failover tests; (``hdfs up``, ``_hdfs``): an HDFS with WebHDFS for checkpoints.
``endpoints`` names them while they run and ``down`` stops them too.

``up`` leaves a component alone while all its processes are ours, alive and listening
(and answer a real round trip); otherwise it stops what is left of it and starts it
afresh from empty data; it stops the gateways it was not asked for only when their
HBase restarts (another session may be using them). Whatever ``up`` started is stopped
again if ``up`` fails, so a failed ``up`` leaves nothing running that it started. ``up``/``down`` of one home
are serialised with a file lock, so concurrent pytest sessions share one stack.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._endpoints import (
    HBASE_ENV,
    HBASE_GATEWAYS_ENV,
    HBASE_THRIFT2_ENV,
    HBASE_THRIFT2_TLS_ENV,
    HBASE_TLS_CA_ENV,
    HBASE_TLS_ENV,
    KAFKA_ENV,
    KAFKA_SECURITY_ENV,
)
from .._exceptions import DevstackError
from . import (
    _hbase,
    _hbase_kerberos,
    _hdfs,
    _kafka,
    _kafka_cluster,
    _kafka_kerberos,
    _kafka_security,
    _kdc,
)
from ._config import Paths, Port, port_requests
from ._jvm import find_java
from ._maven import resolve_classpath
from ._process import (
    ProcessRecord,
    ProcessStatus,
    check_requested_ports,
    choose_ports,
    died,
    is_ours,
    marker_for,
    port_accepts,
    spawn,
    stack_lock,
    stop_processes,
    stop_recorded,
    wait_for_port,
)

__all__ = [
    "HBASE_ENV",
    "HBASE_GATEWAYS_ENV",
    "HBASE_THRIFT2_ENV",
    "KAFKA_ENV",
    "Devstack",
    "Endpoints",
    "ProcessStatus",
    "StackStatus",
]

log = logging.getLogger(__name__)

_GATEWAYS = "gateways"  # the component of the on-demand gateways

_COMPONENTS: dict[str, tuple[str, ...]] = {
    "kafka": (_kafka.NAME,),
    "hbase": (_hbase.MASTER, _hbase.THRIFT, _hbase.THRIFT2),
    _GATEWAYS: (_hbase.THRIFT_B, _hbase.THRIFT_TLS, _hbase.THRIFT2_TLS),
}
_DEFAULT = ("kafka", "hbase")  # what ``up`` starts; ``up(all_gateways=True)`` adds _GATEWAYS
_PROCESS_PORTS: dict[str, tuple[Port, ...]] = {
    _kafka.NAME: (Port.KAFKA, Port.KAFKA_CONTROLLER, Port.KAFKA_SASL_SSL, Port.KAFKA_MTLS,
                  Port.KAFKA_WRONG_HOST),
    _hbase.MASTER: (Port.HBASE_ZOOKEEPER, Port.HBASE_MASTER, Port.HBASE_REGIONSERVER),
    _hbase.THRIFT: (Port.HBASE_THRIFT,),
    _hbase.THRIFT2: (Port.HBASE_THRIFT2,),
    _hbase.THRIFT_B: (Port.HBASE_THRIFT_B,),
    _hbase.THRIFT_TLS: (Port.HBASE_THRIFT_TLS,),
    _hbase.THRIFT2_TLS: (Port.HBASE_THRIFT2_TLS,),
}
_PROCESSES = tuple(name for names in _COMPONENTS.values() for name in names)
_REQUIRED = tuple(name for c in _DEFAULT for name in _COMPONENTS[c])
_STOP_GRACE_S = {_hbase.MASTER: _hbase.MASTER_STOP_GRACE_S}
_RECHECK_S = 60.0  # budget for the round trip against an already running stack
_BIND_TRIES = 3  # starts of one ``up`` when a server finds a chosen port taken
_ADDRESS_IN_USE = b"Address already in use"  # java.net.BindException's message, in the server's log


def _port_was_taken(err: DevstackError) -> bool:
    """Whether the server ``err`` is about logged a port it could not bind (its whole log:
    a JVM's stack traces push the cause out of the tail)."""
    if err.log_path is None:
        return False
    try:
        return _ADDRESS_IN_USE in Path(err.log_path).read_bytes()
    except OSError:
        return False


@dataclass(frozen=True)
class Endpoints:
    """Where the running stack serves; all on 127.0.0.1."""

    kafka_bootstrap: str
    hbase_thrift: tuple[str, int]
    hbase_thrift2: tuple[str, int]
    # Every running plain Thrift1 gateway, first = hbase_thrift (the second: `up --all`).
    hbase_thrift_gateways: tuple[tuple[str, int], ...] = ()
    hbase_thrift_tls: tuple[str, int] | None = None  # the TLS (HTTPS) Thrift1 gateway, while it runs
    hbase_thrift_tls_ca: str | None = None  # the CA (PEM) that signed its certificate
    hbase_thrift2_tls: tuple[str, int] | None = None  # the TLS (HTTPS) Thrift2 gateway (same CA), while it runs
    kafka_security: str | None = None  # the secured listeners' manifest (JSON file)
    kafka_cluster_bootstrap: str | None = None  # the optional 3-node cluster, while it runs
    hdfs: _hdfs.HdfsEndpoints | None = None  # the optional HDFS, while it runs

    def env(self) -> dict[str, str]:
        """The variables the test fixtures and the demo read."""
        host, port = self.hbase_thrift
        host2, port2 = self.hbase_thrift2
        env = {KAFKA_ENV: self.kafka_bootstrap, HBASE_ENV: f"{host}:{port}",
               HBASE_THRIFT2_ENV: f"{host2}:{port2}"}
        if self.hbase_thrift_gateways:
            env[HBASE_GATEWAYS_ENV] = ",".join(f"{h}:{p}" for h, p in self.hbase_thrift_gateways)
        if self.hbase_thrift_tls is not None and self.hbase_thrift_tls_ca:
            env[HBASE_TLS_ENV] = f"{self.hbase_thrift_tls[0]}:{self.hbase_thrift_tls[1]}"
            env[HBASE_TLS_CA_ENV] = self.hbase_thrift_tls_ca
        if self.hbase_thrift2_tls is not None and self.hbase_thrift_tls_ca:
            env[HBASE_THRIFT2_TLS_ENV] = f"{self.hbase_thrift2_tls[0]}:{self.hbase_thrift2_tls[1]}"
        if self.kafka_security:
            env[KAFKA_SECURITY_ENV] = self.kafka_security
        if self.kafka_cluster_bootstrap:
            env[_kafka_cluster.KAFKA_CLUSTER_ENV] = self.kafka_cluster_bootstrap
        if self.hdfs is not None:
            env.update(self.hdfs.env())
        return env

    def exports(self) -> str:
        """``export K=V`` lines for ``eval "$(python -m sparkbarrier.devstack env)"``."""
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env().items())


@dataclass(frozen=True)
class StackStatus:
    home: Path
    processes: tuple[ProcessStatus, ...]
    endpoints: Endpoints | None = None

    @property
    def running(self) -> bool:
        """Every process that ``up`` starts alive and serving (the gateways of ``up --all``
        may be off)."""
        return all(p.alive and p.serving for p in self.processes if not p.optional)


@dataclass
class _Started:
    """Processes started by one ``up`` call, stopped again if that call fails."""

    records: list[ProcessRecord] = field(default_factory=list)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)


class Devstack:
    """Handle on the stack living in ``home`` (see ``_config`` for the defaults).

    ``ports`` maps ``Port`` → number for explicit requests (they must be free);
    ``environ`` replaces ``os.environ`` for tests. Creating the object touches nothing.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        cache: str | os.PathLike[str] | None = None,
        ports: Mapping[Port, int] | None = None,
        environ: Mapping[str, str] | None = None,
        start_timeout_s: float = 240.0,
    ) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, cache, self._environ)
        self._port_requests = port_requests(ports, self._environ)
        self._start_timeout_s = start_timeout_s

    # ------------------------------------------------------------------ queries
    def _records(self) -> dict[str, ProcessRecord | None]:
        return {name: ProcessRecord.load(self.paths.run, name) for name in _PROCESSES}

    def status(self) -> StackStatus:
        """What runs, from the pid records; cheap (no round trips)."""
        rows = []
        for name, record in self._records().items():
            alive = record is not None and is_ours(record)
            serving = alive and record is not None and all(
                port_accepts(p) for p in record.ports.values())
            rows.append(ProcessStatus(
                name=name,
                pid=record.pid if record else None,
                alive=alive,
                serving=serving,
                ports=dict(record.ports) if record else {},
                log=str(self.paths.logs / f"{name}.log"),
                optional=name not in _REQUIRED,
            ))
        return StackStatus(self.paths.home, tuple(rows), self.endpoints())

    def endpoints(self) -> Endpoints | None:
        """Endpoints of a running stack, or None if a process that ``up`` starts is not
        alive; the on-demand gateways are named only while they are alive."""
        records = self._records()
        if not all(r is not None and is_ours(r) for n, r in records.items() if n in _REQUIRED):
            return None
        kafka, thrift, thrift2 = records[_kafka.NAME], records[_hbase.THRIFT], records[_hbase.THRIFT2]
        assert kafka is not None and thrift is not None and thrift2 is not None  # checked above
        alive = {n: r for n, r in records.items() if r is not None and is_ours(r)}
        first = ("127.0.0.1", thrift.ports[Port.HBASE_THRIFT.key])
        second = alive.get(_hbase.THRIFT_B)
        tls = alive.get(_hbase.THRIFT_TLS)
        tls2 = alive.get(_hbase.THRIFT2_TLS)
        return Endpoints(
            kafka_bootstrap=f"127.0.0.1:{kafka.ports[Port.KAFKA.key]}",
            hbase_thrift=first,
            hbase_thrift2=("127.0.0.1", thrift2.ports[Port.HBASE_THRIFT2.key]),
            hbase_thrift_gateways=(first, *([("127.0.0.1", second.ports[Port.HBASE_THRIFT_B.key])]
                                            if second else [])),
            hbase_thrift_tls=(_hbase.TLS_HOST, tls.ports[Port.HBASE_THRIFT_TLS.key]) if tls else None,
            hbase_thrift_tls_ca=str(_hbase.tls_ca(self.paths.data("hbase"))) if tls or tls2 else None,
            hbase_thrift2_tls=(_hbase.TLS_HOST, tls2.ports[Port.HBASE_THRIFT2_TLS.key]) if tls2 else None,
            kafka_security=str(_kafka.security_manifest(self.paths.data("kafka"))),
            kafka_cluster_bootstrap=_kafka_cluster.KafkaCluster(
                self.paths.home, cache=self.paths.cache, environ=self._environ).running_bootstrap(),
            hdfs=_hdfs.Hdfs(self.paths.home, cache=self.paths.cache, environ=self._environ).endpoints(),
        )

    # ------------------------------------------------------------------ down
    def down(self) -> list[str]:
        """Stop our processes (SIGTERM, then SIGKILL after a bounded wait).

        Idempotent; returns the names of the processes that were running.
        """
        with stack_lock(self.paths.run):
            # The optional Kerberized servers and KDC (`kerberos up` / `kdc up`), the
            # 3-node Kafka cluster (`cluster up`) and the HDFS (`hdfs up`) of this home go
            # down with the stack, the KDC with the others (they only renew from it).
            stopped = stop_recorded(self.paths.run, [*_PROCESSES, *_hbase_kerberos.NAMES, _kafka_kerberos.NAME,
                                                     _kdc.NAME, *_kafka_cluster.NAMES, *_hdfs.NAMES],
                                    grace_by_name=_STOP_GRACE_S)
        for record in stopped:
            log.info("stopped %s (pid %d)", record.name, record.pid)
        return [r.name for r in stopped]

    # ------------------------------------------------------------------ up
    def up(self, *, all_gateways: bool = False) -> Endpoints:
        """Start what is not running, verify everything serves, return the endpoints.

        Starts Kafka, the HBase master, Thrift1 and Thrift2 (what the demo uses); with
        ``all_gateways`` also the second Thrift1 gateway and the TLS Thrift1 and Thrift2 ones, beside a running
        HBase without restarting it. Idempotent. Raises ``DevstackError`` (after stopping
        whatever this call started) when a prerequisite is missing or a server fails to
        come up.
        """
        self.paths.ensure()
        wanted = [*_DEFAULT, *([_GATEWAYS] if all_gateways else [])]
        with stack_lock(self.paths.run):
            records = self._records()
            healthy = {c for c, names in _COMPONENTS.items()
                       if all(self._serving(records[n]) for n in names)}
            self._check_requested_ports(records, healthy & set(wanted))
            to_start = [c for c in wanted if c not in healthy or (c == _GATEWAYS and "hbase" not in healthy)]
            # A master that restarts takes its gateways along (they would serve the old one).
            to_stop = [c for c in _COMPONENTS if c in to_start or (c == _GATEWAYS and "hbase" in to_start)]
            names = [n for c in to_stop for n in _COMPONENTS[c]]
            if any(records[n] is not None for c in to_start for n in _COMPONENTS[c]):
                log.info("restarting %s (not all processes serve)", ", ".join(to_start))
            if _GATEWAYS in to_stop and _GATEWAYS not in to_start and any(
                    records[n] is not None for n in _COMPONENTS[_GATEWAYS]):
                log.info("stopping the extra gateways with their HBase (`up --all` starts them again)")
            stop_recorded(self.paths.run, names, grace_by_name=_STOP_GRACE_S)
            if to_start:
                self._start_choosing_ports(to_start)
            else:
                self._recheck(wanted)
        endpoints = self.endpoints()
        if endpoints is None:
            raise DevstackError("a server died right after start",
                                fix="run `python -m sparkbarrier.devstack status` and read its log")
        return endpoints

    def _serving(self, record: ProcessRecord | None) -> bool:
        """Ours, alive, and serving every port this version of the stack gives it (a
        process started by an older version, with fewer listeners, is restarted)."""
        expected = {p.key for p in _PROCESS_PORTS.get(record.name, ())} if record else set()
        return (record is not None and is_ours(record) and expected <= set(record.ports)
                and all(port_accepts(p) for p in record.ports.values()))

    def _check_requested_ports(self, records: Mapping[str, ProcessRecord | None],
                               healthy: set[str]) -> None:
        for component in healthy:
            for name in _COMPONENTS[component]:
                record = records[name]
                if record is not None:  # healthy implies a record
                    check_requested_ports(name, record, _PROCESS_PORTS[name], self._port_requests,
                                          "python -m sparkbarrier.devstack down")

    def _recheck(self, components: list[str]) -> None:
        """A real round trip through each already running ``components``' servers."""
        endpoints = self.endpoints()
        if endpoints is None:
            return
        deadline = time.monotonic() + _RECHECK_S
        if "kafka" in components:
            _kafka.probe(endpoints.kafka_bootstrap, deadline=deadline)
            if endpoints.kafka_security:
                _kafka_security.probe(Path(endpoints.kafka_security), deadline=deadline)
        if "hbase" in components:
            _hbase.probe(*endpoints.hbase_thrift, deadline=deadline)
            _hbase.probe_thrift2(*endpoints.hbase_thrift2, deadline=deadline)
        if _GATEWAYS in components:
            for gateway in endpoints.hbase_thrift_gateways[1:]:
                _hbase.probe(*gateway, deadline=deadline)
            if endpoints.hbase_thrift_tls is not None:
                _hbase.probe_tls(endpoints.hbase_thrift_tls[1], _hbase.tls_ca(self.paths.data("hbase")),
                                 deadline=deadline)
            if endpoints.hbase_thrift2_tls is not None:
                _hbase.probe_thrift2_tls(endpoints.hbase_thrift2_tls[1], _hbase.tls_ca(self.paths.data("hbase")),
                                         deadline=deadline)
        log.info("already running and healthy: %s", ", ".join(components))

    def _start_choosing_ports(self, components: list[str]) -> None:
        """:meth:`_start`, again on fresh ports when a server found one of its ports taken.

        A free port is chosen, released, and bound by the server seconds later; on a busy
        machine (a test worker's Spark and Kafka clients beside it) a client socket can take
        it meanwhile, and the server exits with "Address already in use". ``_start`` stops
        whatever it started before it raises, so choosing the ports again is a clean retry.
        A port requested explicitly stays what was requested (``choose_ports``), so its
        failure repeats and is raised.
        """
        for attempt in range(1, _BIND_TRIES + 1):
            try:
                self._start(components)
                return
            except DevstackError as err:
                if attempt == _BIND_TRIES or not _port_was_taken(err):
                    raise
                log.warning("%s; a port chosen for it was taken before it bound it: choosing ports again "
                            "(try %d of %d)", err.cause, attempt + 1, _BIND_TRIES)

    def _start(self, components: list[str]) -> None:
        java = find_java(self._environ)
        classpaths = {c: resolve_classpath("hbase" if c == _GATEWAYS else c, self.paths, java)
                      for c in components}
        wanted = {p: self._port_requests[p] for c in components
                  for n in _COMPONENTS[c] for p in _PROCESS_PORTS[n]}
        ports = choose_ports(wanted)
        started = _Started()
        deadline = time.monotonic() + self._start_timeout_s
        markers = {n: marker_for(n, self.paths.home) for n in _PROCESSES}
        gateways: dict[str, list[str]] = {}  # the Thrift servers to start, by name
        try:
            if "hbase" in components:
                cmds = _hbase.prepare(java, classpaths["hbase"], markers=markers,
                                      data_dir=self.paths.data("hbase"), ports=ports)
                self._spawn(started, _hbase.MASTER, cmds.pop(_hbase.MASTER), ports)
                gateways.update(cmds)
            if "kafka" in components:
                log_path = self._fresh_log(_kafka.NAME)
                cmd = _kafka.prepare(
                    java, classpaths["kafka"], marker=markers[_kafka.NAME],
                    data_dir=self.paths.data("kafka"), ports=ports, log_path=log_path)
                self._spawn(started, _kafka.NAME, cmd, ports, truncate=False)
                self._wait_port(started, _kafka.NAME, ports[Port.KAFKA], deadline)
                _kafka.probe(f"127.0.0.1:{ports[Port.KAFKA]}",
                             deadline=min(deadline, time.monotonic() + 90),
                             check=self._watch(started, _kafka.NAME))
                _kafka_security.acls(f"127.0.0.1:{ports[Port.KAFKA]}")
                _kafka_security.probe(_kafka.security_manifest(self.paths.data("kafka")),
                                      deadline=min(deadline, time.monotonic() + 60))
                log.info("kafka serves on 127.0.0.1:%d (secured: SASL_SSL %d, mTLS %d)",
                         ports[Port.KAFKA], ports[Port.KAFKA_SASL_SSL], ports[Port.KAFKA_MTLS])
            if "hbase" in components:
                self._wait_port(started, _hbase.MASTER, ports[Port.HBASE_ZOOKEEPER], deadline)
            if _GATEWAYS in components:  # after prepare, which wipes the data dir
                gateways.update(_hbase.prepare_gateways(
                    java, classpaths[_GATEWAYS], markers=markers, data_dir=self.paths.data("hbase"),
                    ports=ports))
            self._start_gateways(started, gateways, ports, deadline)
        except BaseException:
            self._abort(started)
            raise

    def _start_gateways(self, started: _Started, cmds: Mapping[str, list[str]],
                        ports: Mapping[Port, int], deadline: float) -> None:
        """The gateways boot side by side (JVM start-up dominates), then are probed in
        turn: Thrift1 with a data round trip, Thrift2 with an admin call, TLS Thrift1 by listing
        tables over HTTPS, TLS Thrift2 with the admin call over HTTPS."""
        for name, cmd in cmds.items():
            self._spawn(started, name, cmd, ports)
        for name in cmds:
            self._wait_port(started, name, ports[_PROCESS_PORTS[name][0]], deadline)
        watch = self._watch(started, *started.procs)
        for name in cmds:
            port = ports[_PROCESS_PORTS[name][0]]
            if name == _hbase.THRIFT2:
                _hbase.probe_thrift2("127.0.0.1", port, deadline=deadline, check=watch)
            elif name == _hbase.THRIFT_TLS:
                _hbase.probe_tls(port, _hbase.tls_ca(self.paths.data("hbase")), deadline=deadline, check=watch)
            elif name == _hbase.THRIFT2_TLS:
                _hbase.probe_thrift2_tls(port, _hbase.tls_ca(self.paths.data("hbase")), deadline=deadline,
                                         check=watch)
            else:
                _hbase.probe("127.0.0.1", port, deadline=deadline, check=watch)
            tls = name in (_hbase.THRIFT_TLS, _hbase.THRIFT2_TLS)
            log.info("%s serves on %s:%d", name, _hbase.TLS_HOST if tls else "127.0.0.1", port)

    def _fresh_log(self, name: str) -> Path:
        path = self.paths.logs / f"{name}.log"
        path.write_bytes(b"")
        return path

    def _spawn(self, started: _Started, name: str, cmd: list[str],
               ports: Mapping[Port, int], *, truncate: bool = True) -> None:
        log_path = self._fresh_log(name) if truncate else self.paths.logs / f"{name}.log"
        log.info("starting %s (log: %s)", name, log_path)
        proc = spawn(cmd, log_path=log_path, cwd=self.paths.data(name.split("-")[0]),
                     env=self._environ)
        record = ProcessRecord(
            name=name, pid=proc.pid, marker=cmd[1], log=str(log_path),
            ports={p.key: ports[p] for p in _PROCESS_PORTS[name]}, started_at=time.time())
        record.save(self.paths.run)
        started.records.append(record)
        started.procs[name] = proc

    def _wait_port(self, started: _Started, name: str, port: int, deadline: float) -> None:
        wait_for_port(port, deadline=deadline, proc=started.procs[name], name=name,
                      log_path=self.paths.logs / f"{name}.log")

    def _watch(self, started: _Started, *names: str) -> Callable[[], None]:
        """A check for the probes: raises if one of ``names`` exited meanwhile."""
        def check() -> None:
            for name in names:
                proc = started.procs[name]
                if proc.poll() is not None:
                    raise died(name, proc.returncode, self.paths.logs / f"{name}.log")
        return check

    def _abort(self, started: _Started) -> None:
        if not started.records:
            return
        log.info("start failed; stopping %s", ", ".join(r.name for r in started.records))
        stop_processes(started.records, grace_s=15.0, grace_by_name=_STOP_GRACE_S)
        for proc in started.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for record in started.records:
            ProcessRecord.remove(self.paths.run, record.name)
