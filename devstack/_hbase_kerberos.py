"""A Kerberos-secured HBase with SASL/GSSAPI Thrift gateways, for the Kerberos tests (issue 19).

Started in a given home with a running KDC's :class:`~._kdc.KdcManifest`; separate from
the plain stack (own processes, own ports, own data) so tests of the plain sink never
depend on a KDC. What runs, each a JVM on the devstack's HBase classpath:

* ``krb-hbase-master``: standalone master + regionserver + ZooKeeper, logged in as
  ``hbase/localhost`` from the KDC's ``hbase`` keytab; RPC between master and
  regionserver authenticated with Kerberos (``hbase.security.authentication``);
  the embedded ZooKeeper stays unauthenticated (``zookeeper.sasl.client=false``).
* ``krb-hbase-thrift``: Thrift1 gateway, qop ``auth`` (authentication only).
* ``krb-hbase-thrift-conf``: Thrift1 gateway, qop ``auth-conf`` (every frame sealed).
* ``krb-hbase-thrift-int``: Thrift1 gateway, qop ``auth-int`` (every frame signed).
* ``krb-hbase-thrift2``: Thrift2 gateway, qop ``auth``.

The settings are the ones docs/kerberos-devstack.md found by hand. Host names are
``localhost``: a Kerberos client derives the gateway's service principal
(``hbase/localhost``) from the host it connects to. Ports are free ones, chosen per
start. ``up`` returns once a SASL client (the product's own) has listed tables through
every Thrift1 gateway and asked the Thrift2 one whether ``hbase:meta`` exists; ``down``
stops exactly the processes whose pid records and markers are this home's.
Heaps are small (the tests write little) because the machine is shared.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._exceptions import DevstackError
from . import _hbase
from ._config import Paths, Port
from ._jvm import find_java, write_log4j_config
from ._kdc import KdcManifest
from ._maven import resolve_classpath
from ._process import (
    ProcessRecord,
    _free_port,
    died,
    is_ours,
    marker_for,
    spawn,
    stack_lock,
    stop_processes,
    stop_recorded,
    wait_for_port,
)

if TYPE_CHECKING:  # the connectors import the clients: only when a probe runs
    from ..connectors.hbase.client._sasl import KerberosSettings

__all__ = ["MASTER", "THRIFT", "THRIFT2", "THRIFT_CONF", "THRIFT_INT", "KerberosHBase", "KerberosHBaseEndpoints"]

log = logging.getLogger(__name__)

HOST = "localhost"
MASTER = "krb-hbase-master"
THRIFT = "krb-hbase-thrift"
THRIFT_CONF = "krb-hbase-thrift-conf"
THRIFT_INT = "krb-hbase-thrift-int"
THRIFT2 = "krb-hbase-thrift2"
_GATEWAYS = {THRIFT: ("auth", _hbase.THRIFT_MAIN), THRIFT_CONF: ("auth-conf", _hbase.THRIFT_MAIN),
             THRIFT_INT: ("auth-int", _hbase.THRIFT_MAIN), THRIFT2: ("auth", _hbase.THRIFT2_MAIN)}
NAMES = _NAMES = (MASTER, *_GATEWAYS)  # NAMES: what `devstack down` stops too
_GRACE_BY_NAME = {MASTER: _hbase.MASTER_STOP_GRACE_S}
MASTER_HEAP = "768m"
THRIFT_HEAP = "192m"
_COMPONENT = "krb-hbase"


@dataclass(frozen=True)
class KerberosHBaseEndpoints:
    """Where the Kerberized gateways listen (host ``localhost``) and as whom they run."""

    thrift: tuple[str, int]  # qop auth
    thrift_conf: tuple[str, int]  # qop auth-conf
    thrift_int: tuple[str, int]  # qop auth-int
    thrift2: tuple[str, int]  # qop auth
    service_principal: str  # hbase/localhost@REALM


def _kerberos_site(data_dir: Path, ports: Mapping[Port, int], manifest: KdcManifest, qop: str) -> dict[str, object]:
    principal, keytab = manifest.keytab("hbase")
    return _hbase._site(data_dir, ports) | {
        "hbase.security.authentication": "kerberos",
        "hadoop.security.authentication": "kerberos",
        "hbase.master.hostname": HOST,
        "hbase.regionserver.hostname": HOST,
        "hbase.master.kerberos.principal": principal,
        "hbase.master.keytab.file": keytab,
        "hbase.regionserver.kerberos.principal": principal,
        "hbase.regionserver.keytab.file": keytab,
        "hbase.thrift.kerberos.principal": principal,
        "hbase.thrift.keytab.file": keytab,
        "hbase.thrift.security.qop": qop,
        "zookeeper.sasl.client": "false",
    }


def _core_site() -> str:
    return _hbase._site_xml({"hadoop.security.authentication": "kerberos"})


class KerberosHBase:
    """The Kerberized HBase of one home. ``up``/``down`` are idempotent and lock the home."""

    def __init__(self, home: str | os.PathLike[str], manifest: KdcManifest, *,
                 environ: Mapping[str, str] | None = None, start_timeout_s: float = 240.0) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, None, self._environ)
        self.manifest = manifest
        self._start_timeout_s = start_timeout_s

    @property
    def data(self) -> Path:
        return self.paths.data(_COMPONENT)

    def _records(self) -> dict[str, ProcessRecord]:
        out = {}
        for name in _NAMES:
            record = ProcessRecord.load(self.paths.run, name)
            if record is not None:
                out[name] = record
        return out

    def endpoints(self) -> KerberosHBaseEndpoints | None:
        """The running instance's endpoints, or None unless every process is ours and alive."""
        records = self._records()
        if set(records) != set(_NAMES) or not all(is_ours(r) for r in records.values()):
            return None
        port = {n: records[n].ports["thrift"] for n in _GATEWAYS}
        return KerberosHBaseEndpoints(
            thrift=(HOST, port[THRIFT]), thrift_conf=(HOST, port[THRIFT_CONF]), thrift_int=(HOST, port[THRIFT_INT]),
            thrift2=(HOST, port[THRIFT2]), service_principal=self.manifest.keytab("hbase")[0])

    def down(self) -> list[str]:
        """Stop this home's Kerberized HBase; returns the names that were running."""
        with stack_lock(self.paths.run):
            stopped = stop_recorded(self.paths.run, _NAMES, grace_s=10.0, grace_by_name=_GRACE_BY_NAME)
        return [r.name for r in stopped]

    def up(self) -> KerberosHBaseEndpoints:
        """Start (unless already running) and wait until every gateway serves a SASL client."""
        self.paths.ensure()
        with stack_lock(self.paths.run):
            endpoints = self.endpoints()
            if endpoints is None:
                stop_recorded(self.paths.run, _NAMES, grace_s=10.0, grace_by_name=_GRACE_BY_NAME)
                endpoints = self._start()
            else:
                log.info("kerberized hbase already running")
        return endpoints

    # ------------------------------------------------------------------ start
    def _start(self) -> KerberosHBaseEndpoints:
        java = find_java(self._environ)
        classpath = resolve_classpath("hbase", self.paths, java)
        taken: set[int] = set()

        def free() -> int:
            port = _free_port(taken)
            taken.add(port)
            return port

        ports = {Port.HBASE_ZOOKEEPER: free(), Port.HBASE_MASTER: free(), Port.HBASE_REGIONSERVER: free(),
                 Port.HBASE_THRIFT: free()}
        gateway_ports = {name: free() for name in _GATEWAYS}
        data = self.data
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        jvm_options = (*_hbase.JAVA17_OPTIONS, *_hbase._COMMON_OPTIONS,
                       f"-Djava.security.krb5.conf={self.manifest.krb5_conf}",
                       "-Dsun.security.krb5.disableReferrals=true")
        # The JVMs never read a ticket cache (keytab logins); keep them off the user's anyway.
        env = dict(self._environ) | {"KRB5_CONFIG": self.manifest.krb5_conf,
                                     "KRB5CCNAME": f"FILE:{data / 'jvm.ccache'}"}
        cmds: dict[str, list[str]] = {}
        for name, qop in [(MASTER, "auth"), *((n, q) for n, (q, _) in _GATEWAYS.items())]:
            conf = data / f"conf-{name}"
            conf.mkdir()
            (conf / "hbase-site.xml").write_text(
                _hbase._site_xml(_kerberos_site(data, ports, self.manifest, qop)))
            (conf / "core-site.xml").write_text(_core_site())
            log4j = write_log4j_config(conf)
            options = (*jvm_options, f"-Dlog4j2.configurationFile={log4j}")
            marker = marker_for(name, self.paths.home)
            if name == MASTER:
                cmds[name] = java.command(marker=marker, heap=MASTER_HEAP, classpath=classpath.as_arg(conf),
                                          main=_hbase.MASTER_MAIN, args=("start",), options=options)
            else:
                args = ("-b", "127.0.0.1", "-p", str(gateway_ports[name]), "--infoport", "-1", "start")
                cmds[name] = java.command(marker=marker, heap=THRIFT_HEAP, classpath=classpath.as_arg(conf),
                                          main=_GATEWAYS[name][1], args=args, options=options)
        procs: dict[str, object] = {}
        records: list[ProcessRecord] = []
        deadline = time.monotonic() + self._start_timeout_s
        try:
            def start(name: str, record_ports: dict[str, int]) -> None:
                log_path = self.paths.logs / f"{name}.log"
                log_path.write_bytes(b"")
                proc = spawn(cmds[name], log_path=log_path, cwd=data, env=env)
                record = ProcessRecord(name=name, pid=proc.pid, marker=cmds[name][1], log=str(log_path),
                                       ports=record_ports, started_at=time.time())
                record.save(self.paths.run)
                records.append(record)
                procs[name] = proc

            start(MASTER, {p.key: v for p, v in ports.items() if p is not Port.HBASE_THRIFT})
            wait_for_port(ports[Port.HBASE_ZOOKEEPER], deadline=deadline, proc=procs[MASTER],  # type: ignore[arg-type]
                          name=MASTER, log_path=self.paths.logs / f"{MASTER}.log")
            for name in _GATEWAYS:
                start(name, {"thrift": gateway_ports[name]})
            for name in _GATEWAYS:
                wait_for_port(gateway_ports[name], deadline=deadline, proc=procs[name],  # type: ignore[arg-type]
                              name=name, log_path=self.paths.logs / f"{name}.log")
            endpoints = KerberosHBaseEndpoints(
                thrift=(HOST, gateway_ports[THRIFT]), thrift_conf=(HOST, gateway_ports[THRIFT_CONF]),
                thrift_int=(HOST, gateway_ports[THRIFT_INT]), thrift2=(HOST, gateway_ports[THRIFT2]),
                service_principal=self.manifest.keytab("hbase")[0])

            def check() -> None:
                for name, proc in procs.items():
                    if proc.poll() is not None:  # type: ignore[attr-defined]
                        raise died(name, proc.returncode, self.paths.logs / f"{name}.log")  # type: ignore[attr-defined]

            self._probe(endpoints, deadline, check)
            log.info("kerberized hbase serves: thrift %s, thrift (auth-conf) %s, thrift (auth-int) %s, thrift2 %s",
                     endpoints.thrift, endpoints.thrift_conf, endpoints.thrift_int, endpoints.thrift2)
            return endpoints
        except BaseException:
            stop_processes(records, grace_s=10.0, grace_by_name=_GRACE_BY_NAME)
            for record in records:
                ProcessRecord.remove(self.paths.run, record.name)
            raise

    def _probe(self, endpoints: KerberosHBaseEndpoints, deadline: float, check: object) -> None:
        """Poll until a SASL client (the client keytab) lists tables on every Thrift1 gateway
        and the Thrift2 one answers; the master says "initializing" for a while first."""
        from ..connectors.hbase.client._sasl import KerberosSettings

        principal, keytab = self.manifest.keytab("client")
        settings = KerberosSettings(principal=principal, keytab=keytab)
        # The client library finds the KDC through KRB5_CONFIG, read afresh per login; point
        # it at this home's KDC while probing (the caller's may name another one), then restore.
        saved = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = self.manifest.krb5_conf
        try:
            self._poll(endpoints, settings, deadline, check)
        finally:
            if saved is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = saved

    def _poll(self, endpoints: KerberosHBaseEndpoints, settings: KerberosSettings, deadline: float,
              check: object) -> None:
        from thriftpy2.thrift import TException

        from .._exceptions import SinkError
        from ..connectors.hbase.client._connection import HBaseConnection, connection_options
        from ..connectors.hbase.client._sasl import KerberosError
        from ..connectors.hbase.client._thrift2 import Thrift2Admin

        once = {"hbase.thrift.timeout": "20000", "hbase.thrift.failover.rounds": "1"}  # the poll loop retries

        pending = [endpoints.thrift, endpoints.thrift_conf, endpoints.thrift_int]
        last: BaseException | None = None
        while time.monotonic() < deadline:
            check()  # type: ignore[operator]
            try:
                while pending:
                    host, port = pending[0]
                    conn = HBaseConnection(connection_options(once, host=host, port=port, kerberos=settings))
                    try:
                        conn.call(lambda c: c.tables())
                    finally:
                        conn.close()
                    pending.pop(0)
                thrift2 = "%s:%d" % endpoints.thrift2
                admin = Thrift2Admin(connection_options({**once, "hbase.thrift2.host": thrift2}, kerberos=settings))
                try:
                    if admin.table_exists("hbase:meta"):
                        return
                finally:
                    admin.close()
            except KerberosError:
                raise  # a refused login does not heal: the KDC or the site files are wrong
            except (SinkError, TException, OSError) as exc:
                last = exc
                log.debug("kerberized hbase probe not yet successful: %r", exc)
            time.sleep(1.0)
        raise DevstackError(
            f"the Kerberized HBase gateways did not serve a SASL client in time (last error: {_hbase._short(last)})",
            fix=f"read {self.paths.logs}/krb-hbase-*.log")
