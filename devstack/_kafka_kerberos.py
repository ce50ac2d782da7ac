"""A Kerberized Kafka broker for tests: SASL_PLAINTEXT with GSSAPI, beside a PLAINTEXT side.

Why a second broker and not more listeners on the stack's broker: the Kerberized one
needs the KDC (optional, per test session, in its own home) and its JVM must be
started with ``-Djava.security.krb5.conf``; the shared stack's broker must keep
starting without either. It reuses the stack's Kafka classpath, JVM options and
process records, so ``down`` finds only its own JVM by marker like every other one.

Listeners (free ports, chosen at every start):

* ``PLAINTEXT://127.0.0.1:<p>`` -- for setup (topics, producing, reading group offsets)
  and as the inter-broker and controller side, so the broker never logs in to itself;
* ``SASL_PLAINTEXT://localhost:<p>`` -- GSSAPI only, service principal
  ``kafka/localhost``. Advertised as ``localhost``, not ``127.0.0.1``: Kerberos
  clients derive the service principal from the host name they connect to, and the
  KDC knows ``kafka/localhost`` only (docs/kerberos-devstack.md, probe c);
* ``SASL_SSL://localhost:<p>`` -- the same login over TLS; the server certificate
  (CN and subjectAltName ``localhost``, ``127.0.0.1``) is signed by a CA made at every
  start (``ca_pem`` in the endpoints; ``_certs``, as the stack's secured listeners).

No authorizer: every authenticated principal may do everything (the tests are about
logging in, not ACLs). ``up`` returns when a GSSAPI login with the client keytab
works; ``down`` stops the JVM; both are idempotent.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import DevstackError
from . import _certs, _kafka
from ._config import Paths
from ._jvm import find_java, write_log4j_config
from ._kdc import KdcManifest
from ._maven import resolve_classpath
from ._process import (
    ProcessRecord,
    died,
    free_ports,
    is_ours,
    log_tail,
    marker_for,
    port_accepts,
    spawn,
    stack_lock,
    stop_processes,
    stop_recorded,
    wait_for_port,
)

__all__ = ["NAME", "KerberosKafka", "KerberosKafkaEndpoints"]

log = logging.getLogger(__name__)

NAME = "kafka-kerberos"
SERVICE = "kafka"
_STOP_GRACE_S = 20.0


@dataclass(frozen=True)
class KerberosKafkaEndpoints:
    """Where the Kerberized broker listens; ``sasl_plaintext`` uses host ``localhost``."""

    plaintext: str  # "127.0.0.1:<port>"
    sasl_plaintext: str  # "localhost:<port>"
    sasl_ssl: str  # "localhost:<port>"
    ca_pem: str  # the CA of the SASL_SSL listener's certificate
    service_name: str = SERVICE


def _tls(data: Path) -> tuple[Path, Path, str]:
    """A fresh CA and server key store for the SASL_SSL listener: (ca.pem, server.p12,
    its random password)."""
    tls = _certs.private_dir(data / "tls")
    ca = _certs.make_ca(tls, "ca")
    server = _certs.issue(ca, tls, "server", common_name="localhost",
                          usage=_certs.Usage.SERVER, dns=["localhost"], ips=["127.0.0.1"])
    password = secrets.token_urlsafe(18)
    return ca.cert_pem, _certs.write_pkcs12(server, tls / "server.p12", password), password


def _server_properties(data: Path, kdc: KdcManifest, plain: int, controller: int,
                       sasl: int, ssl: int, keystore: Path, password: str) -> str:
    principal, keytab = kdc.keytab("kafka")
    jaas = ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="{principal}";')
    settings = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},"
                     f"SASL_PLAINTEXT://localhost:{sasl},SASL_SSL://localhost:{ssl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},"
                                f"SASL_PLAINTEXT://localhost:{sasl},SASL_SSL://localhost:{ssl}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": SERVICE,
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.gssapi.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.ssl.keystore.location": keystore,
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.password": password,
        "listener.name.sasl_ssl.ssl.key.password": password,
        "log.dirs": data / "logs",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 4,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


class KerberosKafka:
    """Handle on the Kerberized broker of the stack in ``home``, logging in with ``kdc``."""

    def __init__(self, home: str | os.PathLike[str], kdc: KdcManifest, *,
                 environ: Mapping[str, str] | None = None,
                 start_timeout_s: float = 120.0) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, None, self._environ)
        self._kdc = kdc
        self._start_timeout_s = start_timeout_s

    @property
    def data(self) -> Path:
        return self.paths.data(NAME)

    def _record(self) -> ProcessRecord | None:
        return ProcessRecord.load(self.paths.run, NAME)

    def endpoints(self) -> KerberosKafkaEndpoints | None:
        """The running broker's endpoints, or None when it does not run."""
        record = self._record()
        if record is None or not is_ours(record):
            return None
        return KerberosKafkaEndpoints(plaintext=f"127.0.0.1:{record.ports['plaintext']}",
                                      sasl_plaintext=f"localhost:{record.ports['sasl']}",
                                      sasl_ssl=f"localhost:{record.ports['sasl_ssl']}",
                                      ca_pem=str(self.data / "tls" / "ca.pem"))

    def down(self) -> bool:
        """Stop the broker; idempotent. True if it was running."""
        with stack_lock(self.paths.run):
            return bool(stop_recorded(self.paths.run, [NAME], grace_s=_STOP_GRACE_S))

    def up(self) -> KerberosKafkaEndpoints:
        """Start the broker unless it already serves; return its endpoints once a GSSAPI
        login with the client keytab works. Raises ``DevstackError`` (after stopping what
        it started) when it does not come up in time."""
        self.paths.ensure()
        with stack_lock(self.paths.run):
            record = self._record()
            if record is not None and is_ours(record) and all(
                    port_accepts(p) for p in record.ports.values()):
                found = self.endpoints()
                assert found is not None
                return found
            stop_recorded(self.paths.run, [NAME], grace_s=_STOP_GRACE_S)
            return self._start()

    def _start(self) -> KerberosKafkaEndpoints:
        java = find_java(self._environ)
        classpath = resolve_classpath("kafka", self.paths, java)
        plain, controller, sasl, ssl = free_ports(4)
        data = self.data
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        ca_pem, keystore, password = _tls(data)
        config = data / "server.properties"
        _certs.write_private(config, _server_properties(data, self._kdc, plain, controller, sasl, ssl,
                                                        keystore, password))  # a store password
        log4j = write_log4j_config(data)
        options = (*_kafka._JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}",
                   f"-Djava.security.krb5.conf={self._kdc.krb5_conf}",
                   "-Dsun.security.krb5.disableReferrals=true")
        log_path = self.paths.logs / f"{NAME}.log"
        log_path.write_bytes(b"")
        fmt = java.command(marker=f"-Dsparkbarrier.devstack.tool={NAME}-storage-format",
                           heap="256m", classpath=classpath.as_arg(), main=_kafka.STORAGE_TOOL,
                           args=("format", "-t", _kafka._cluster_id(), "-c", str(config),
                                 "--ignore-formatted"), options=options)
        with open(log_path, "ab") as out:
            result = subprocess.run(fmt, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=120, check=False)
        if result.returncode != 0:
            raise DevstackError(f"{NAME}: storage format failed (exit {result.returncode})",
                                fix=f"read {log_path}", log_path=str(log_path),
                                log_tail=log_tail(log_path))
        marker = marker_for(NAME, self.paths.home)
        cmd = java.command(marker=marker, heap="512m", classpath=classpath.as_arg(),
                           main=_kafka.KAFKA_MAIN, args=(str(config),), options=options)
        env = {**self._environ, "KRB5_CONFIG": self._kdc.krb5_conf}
        proc = spawn(cmd, log_path=log_path, cwd=data, env=env)
        record = ProcessRecord(name=NAME, pid=proc.pid, marker=marker, log=str(log_path),
                               ports={"plaintext": plain, "controller": controller,
                                      "sasl": sasl, "sasl_ssl": ssl}, started_at=time.time())
        record.save(self.paths.run)
        endpoints = KerberosKafkaEndpoints(plaintext=f"127.0.0.1:{plain}",
                                           sasl_plaintext=f"localhost:{sasl}",
                                           sasl_ssl=f"localhost:{ssl}", ca_pem=str(ca_pem))
        deadline = time.monotonic() + self._start_timeout_s
        try:
            for port in (plain, sasl, ssl):
                wait_for_port(port, deadline=deadline, proc=proc, name=NAME, log_path=log_path)
            self._probe(endpoints, deadline, proc, log_path)
            # PLAINTEXT round trip with a group commit, as the stack's broker: creates
            # __consumer_offsets now, so a test's first group commit does not race it.
            def alive() -> None:
                if proc.poll() is not None:
                    raise died(NAME, proc.returncode, log_path)

            _kafka.probe(endpoints.plaintext, deadline=deadline, check=alive)
        except BaseException:
            stop_processes([record], grace_s=_STOP_GRACE_S)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            ProcessRecord.remove(self.paths.run, NAME)
            raise
        log.info("%s serves GSSAPI on %s", NAME, endpoints.sasl_plaintext)
        return endpoints

    def _probe(self, endpoints: KerberosKafkaEndpoints, deadline: float,
               proc: subprocess.Popen[bytes], log_path: Path) -> None:
        """Poll until a kafka-python GSSAPI login with the client keytab lists topics.

        Runs in a child interpreter with ``KRB5_CLIENT_KTNAME`` and a private
        ``KRB5CCNAME``: this process's own Kerberos environment stays untouched.
        """
        principal, keytab = self._kdc.keytab("client")
        script = (
            "import sys\nfrom kafka import KafkaConsumer\n"
            "c = KafkaConsumer(bootstrap_servers=sys.argv[1], security_protocol='SASL_PLAINTEXT',"
            " sasl_mechanism='GSSAPI', sasl_kerberos_service_name=sys.argv[2],"
            " request_timeout_ms=11000)\n"
            "c.topics(); c.close()\n")
        env = {**self._environ, "KRB5_CONFIG": self._kdc.krb5_conf,
               "KRB5_CLIENT_KTNAME": keytab, "KRB5CCNAME": f"FILE:{self.data / 'probe.ccache'}"}
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise died(NAME, proc.returncode, log_path)
            try:
                result = subprocess.run(
                    [sys.executable, "-c", script,
                     endpoints.sasl_plaintext, SERVICE], env=env, stdin=subprocess.DEVNULL,
                    capture_output=True, text=True, timeout=60, check=False)
            except subprocess.TimeoutExpired:
                last = "login probe hung for 60 s"
                continue
            if result.returncode == 0:
                return
            last = (result.stderr.strip().splitlines() or [""])[-1]
            time.sleep(0.5)
        raise DevstackError(f"{NAME}: a GSSAPI login as {principal} did not succeed in time "
                            f"(last error: {last})", fix=f"read {log_path}",
                            log_path=str(log_path), log_tail=log_tail(log_path))
