"""The HBase servers of the dev stack: a standalone HMaster and the Thrift1 and Thrift2 gateways.

Standalone mode (``hbase.cluster.distributed=false``) runs master, one regionserver
and an embedded ZooKeeper in one JVM on the local file system; stream capability
enforcement is off because ``file://`` has no hflush/hsync. The Thrift server is a
second JVM with its defaults: thread-pool server, buffered transport, binary
protocol, which is exactly what happybase speaks by default. It closes sockets idle
for 60 s (``hbase.thrift.server.socket.read.timeout``), so clients must reconnect.

The Thrift2 server (``THBaseService``, same jar, same defaults) is a third JVM on its
own port: only Thrift2 can set and read family attributes such as
``KEEP_DELETED_CELLS``, list region boundaries and delete one exact cell version.

Three more gateways start only on request (:func:`prepare_gateways`, after the master
runs): a second plain Thrift1 one, a TLS Thrift1 one and a TLS Thrift2 one (HTTPS, the
same conf dir, CA and certificate: the thrift2 server extends the thrift1 one and
inherits its HTTP server). The demo uses none; the tests of gateway failover and TLS
(and of exactly-once over TLS, which needs Thrift2) do.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from .._exceptions import DevstackError
from ._config import Port
from ._jvm import Java, write_log4j_config
from ._maven import Classpath

__all__ = [
    "MASTER",
    "MASTER_MAIN",
    "MASTER_STOP_GRACE_S",
    "THRIFT",
    "THRIFT2",
    "THRIFT2_MAIN",
    "THRIFT2_TLS",
    "THRIFT_B",
    "THRIFT_MAIN",
    "THRIFT_TLS",
    "prepare",
    "prepare_gateways",
    "probe",
    "probe_thrift2",
    "probe_thrift2_tls",
    "probe_tls",
    "tls_ca",
]

log = logging.getLogger(__name__)

MASTER = "hbase-master"
THRIFT = "hbase-thrift"
MASTER_MAIN = "org.apache.hadoop.hbase.master.HMaster"
THRIFT_MAIN = "org.apache.hadoop.hbase.thrift.ThriftServer"
THRIFT2 = "hbase-thrift2"
# A second Thrift1 gateway of the same HBase (same class, same site file, own port):
# production runs several (often one per RegionServer); the sink spreads over a list.
THRIFT_B = "hbase-thrift-b"
# A Thrift1 gateway with TLS. HBase 2.6 reads hbase.thrift.ssl.enabled only in HTTP mode
# (ThriftServer.setupHTTPServer, Jetty with a key store): the socket server has no TLS.
# Its certificate names DNS:localhost only, so a client reaching it as 127.0.0.1 sees a
# host mismatch (what the hostname-verification test needs).
THRIFT_TLS = "hbase-thrift-tls"
# A Thrift2 gateway with the same TLS conf dir (HTTP mode, key store, certificate):
# thrift2.ThriftServer inherits setupHTTPServer from the thrift1 server.
THRIFT2_TLS = "hbase-thrift2-tls"
TLS_HOST = "localhost"
_TLS_CA = "sparkbarrier-thrift-ca"
THRIFT2_MAIN = "org.apache.hadoop.hbase.thrift2.ThriftServer"
# 1g ran out of heap under the sink benchmark after a long session, 2g after a day of test runs and
# benchmarks on one stack (some hundreds of tables, 2026-11-29); the 10-million-row
# benchmark sets more (``SPARKBARRIER_DEVSTACK_HBASE_HEAP=6g``, read at ``up``).
HEAP_ENV = "SPARKBARRIER_DEVSTACK_HBASE_HEAP"
MASTER_HEAP = "3g"
# Data is wiped on every start, so a graceful flush on ``down`` buys nothing; the
# standalone regionserver otherwise spends ~20 s retrying reports to its stopped master.
MASTER_STOP_GRACE_S = 8.0
THRIFT_HEAP = "512m"

# The module opens HBase's own bin/hbase passes on Java 11+ (add_jdk11_jvm_flags,
# HBASE-28259/28252) plus java.util(.concurrent) from its test flags; without them
# netty and Hadoop fail with InaccessibleObjectException on Java 17.
JAVA17_OPTIONS = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
)
# C1 only, as the HDFS and Kafka-cluster servers: a devstack's servers start often (the
# suite's private stacks) and carry light loads, where C2's compiles never pay back on two
# cores. Measured 2026-11-28 (a scratch stack, twice each): HBase, Kafka and both Thrift
# servers took 37.1/38.2 s of CPU to come up with the default JIT and 19.6/21.0 s with
# C1 only (wall 27.4/27.9 s -> 18.0/19.0 s), and a 12-batch fault pipeline against them
# cost them 9.8/10.3 s against 6.4/7.2 s.
_COMMON_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                   "-Dzookeeper.admin.enableServer=false")


def _site(data_dir: Path, ports: Mapping[Port, int]) -> dict[str, object]:
    return {
        "hbase.cluster.distributed": "false",
        "hbase.rootdir": (data_dir / "root").as_uri(),
        "hbase.tmp.dir": data_dir / "tmp",
        "hbase.zookeeper.quorum": "127.0.0.1",
        "hbase.zookeeper.property.clientPort": ports[Port.HBASE_ZOOKEEPER],
        "hbase.zookeeper.property.dataDir": data_dir / "zookeeper",
        "hbase.unsafe.stream.capability.enforce": "false",
        # Reject cells stamped more than 60 s ahead, as careful production clusters do:
        # every test then proves the sink's timestamps stay near the wall clock.
        "hbase.hregion.keyvalue.timestamp.slop.millisecs": 60_000,
        "hbase.master.hostname": "127.0.0.1",
        "hbase.regionserver.hostname": "127.0.0.1",
        "hbase.master.port": ports[Port.HBASE_MASTER],
        "hbase.regionserver.port": ports[Port.HBASE_REGIONSERVER],
        "hbase.master.info.port": -1,
        "hbase.regionserver.info.port": -1,
        "hbase.thrift.info.port": -1,
        "hbase.regionserver.thrift.port": ports[Port.HBASE_THRIFT],
        "hbase.regionserver.thrift.ipaddress": "127.0.0.1",
        # One regionserver exists: start as soon as it reports (saves the 4.5 s wait).
        "hbase.master.wait.on.regionservers.maxtostart": 1,
    }


def _site_xml(settings: Mapping[str, object]) -> str:
    props = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
        for k, v in settings.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{props}</configuration>\n'


def prepare(
    java: Java,
    classpath: Classpath,
    *,
    markers: Mapping[str, str],
    data_dir: Path,
    ports: Mapping[Port, int],
) -> dict[str, list[str]]:
    """Wipe ``data_dir``, write ``hbase-site.xml``; return ``{MASTER|THRIFT|THRIFT2: cmd}``.

    The conf dir leads the classpath, which is how HBase finds ``hbase-site.xml``.
    """
    shutil.rmtree(data_dir, ignore_errors=True)
    conf = data_dir / "conf"
    conf.mkdir(parents=True)
    (conf / "hbase-site.xml").write_text(_site_xml(_site(data_dir, ports)))
    write_log4j_config(conf)
    return {
        MASTER: _command(java, classpath, conf, marker=markers[MASTER], heap=os.environ.get(HEAP_ENV) or MASTER_HEAP,
                         main=MASTER_MAIN, args=("start",)),
        THRIFT: _gateway(java, classpath, conf, markers[THRIFT], THRIFT_MAIN, ports[Port.HBASE_THRIFT]),
        THRIFT2: _gateway(java, classpath, conf, markers[THRIFT2], THRIFT2_MAIN, ports[Port.HBASE_THRIFT2]),
    }


def prepare_gateways(
    java: Java,
    classpath: Classpath,
    *,
    markers: Mapping[str, str],
    data_dir: Path,
    ports: Mapping[Port, int],
) -> dict[str, list[str]]:
    """``{THRIFT_B|THRIFT_TLS|THRIFT2_TLS: cmd}`` for the HBase that :func:`prepare` set up in ``data_dir``.

    Reads that site file (so the gateways find its ZooKeeper) and makes the TLS gateway's
    certificate (shared by both TLS gateways) afresh; wipes nothing else, so it runs beside a live master.
    """
    conf = data_dir / "conf"
    if not (conf / "hbase-site.xml").is_file():
        raise DevstackError(f"no HBase configuration in {conf} to start the extra gateways with",
                            fix="run `python -m sparkbarrier.devstack up --all`")
    for stale in ("tls", "conf-tls"):
        shutil.rmtree(data_dir / stale, ignore_errors=True)
    tls_conf = _tls_conf(data_dir, conf)
    write_log4j_config(tls_conf)
    return {
        THRIFT_B: _gateway(java, classpath, conf, markers[THRIFT_B], THRIFT_MAIN, ports[Port.HBASE_THRIFT_B]),
        THRIFT_TLS: _gateway(java, classpath, tls_conf, markers[THRIFT_TLS], THRIFT_MAIN,
                             ports[Port.HBASE_THRIFT_TLS]),
        THRIFT2_TLS: _gateway(java, classpath, tls_conf, markers[THRIFT2_TLS], THRIFT2_MAIN,
                              ports[Port.HBASE_THRIFT2_TLS]),
    }


def _gateway(java: Java, classpath: Classpath, conf: Path, marker: str, main: str, port: int) -> list[str]:
    # ``-p`` wins over hbase.regionserver.thrift.port, so all gateways share the site file.
    return _command(java, classpath, conf, marker=marker, heap=THRIFT_HEAP, main=main,
                    args=("-b", "127.0.0.1", "-p", str(port), "--infoport", "-1", "start"))


def _command(java: Java, classpath: Classpath, conf: Path, *, marker: str, heap: str, main: str,
             args: tuple[str, ...]) -> list[str]:
    log4j = conf / "log4j2.properties"
    options = (*JAVA17_OPTIONS, *_COMMON_OPTIONS, f"-Dlog4j2.configurationFile={log4j}")
    return java.command(marker=marker, heap=heap, classpath=classpath.as_arg(conf), main=main,
                        args=args, options=options)


def tls_ca(data_dir: Path) -> Path:
    """The CA (PEM) that signed the TLS gateways' certificate; new on every start."""
    return data_dir / "tls" / f"{_TLS_CA}.pem"


def _tls_conf(data_dir: Path, conf: Path) -> Path:
    """A conf dir for the TLS gateways: the shared site plus HTTP mode, TLS and its key store.

    A file of its own (0600, in a 0700 dir) because the key store password must not
    reach a command line; the other gateways keep the plain socket server.
    """
    from . import _certs

    tls = _certs.private_dir(data_dir / "tls")
    ca = _certs.make_ca(tls, _TLS_CA)
    leaf = _certs.issue(ca, tls, "thrift-tls", common_name=TLS_HOST, usage=_certs.Usage.SERVER, dns=[TLS_HOST])
    password = secrets.token_urlsafe(18)
    store = _certs.write_pkcs12(leaf, tls / "thrift-tls.p12", password)
    site = _site_settings_of(conf) | {
        "hbase.regionserver.thrift.http": "true",
        "hbase.thrift.ssl.enabled": "true",
        "hbase.thrift.ssl.keystore.store": store,
        "hbase.thrift.ssl.keystore.type": "pkcs12",
        "hbase.thrift.ssl.keystore.password": password,
        "hbase.thrift.ssl.keystore.keypassword": password,
    }
    tls_conf = _certs.private_dir(data_dir / "conf-tls")
    site_file = tls_conf / "hbase-site.xml"
    site_file.write_text(_site_xml(site))
    site_file.chmod(0o600)
    return tls_conf


def _site_settings_of(conf: Path) -> dict[str, object]:
    import xml.etree.ElementTree as ET

    root = ET.parse(conf / "hbase-site.xml").getroot()
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.iter("property")}


_PROBE = {"hbase.thrift.timeout": "20000", "hbase.thrift.failover.rounds": "1"}
"""A probe's connection: one try per poll (the poll loop is the retry)."""


def probe_tls(port: int, ca: Path, *, deadline: float, check: Callable[[], None] | None = None) -> None:
    """List tables through the TLS gateway (HTTPS, CA-verified, as ``localhost``) until ``deadline``."""
    from thriftpy2.thrift import TException

    from .._exceptions import SinkError
    from ..connectors.hbase.client._connection import HBaseConnection, connection_options
    from ..connectors.hbase.client._tls import TlsSettings

    opts = connection_options(_PROBE, host=TLS_HOST, port=port, tls=TlsSettings(ca_file=str(ca)))
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        conn = HBaseConnection(opts)
        try:
            conn.call(lambda c: c.tables())
            return
        except (SinkError, TException, OSError) as exc:  # before the deadline: "not yet"
            last = exc
            log.debug("hbase thrift tls probe not yet successful: %r", exc)
            time.sleep(1.0)
        finally:
            conn.close()
    raise DevstackError(
        f"hbase thrift (TLS) at {TLS_HOST}:{port} did not list tables over HTTPS in time "
        f"(last error: {_short(last)})",
        fix="read <home>/logs/hbase-thrift-tls.log; then `python -m sparkbarrier.devstack down` and `up`",
    )


def probe(
    host: str, port: int, *, deadline: float, check: Callable[[], None] | None = None
) -> None:
    """Create a table, write, read and drop it through Thrift, retrying until ``deadline``.
    ``check`` runs before every attempt and may raise to abort (server died).

    Why retry: Thrift accepts connections before ``hbase:meta`` is online, and the
    master answers "PleaseHoldException: initializing" for a while.
    """
    from thriftpy2.thrift import TException

    last: BaseException | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            _roundtrip(host, port)
            return
        except (TException, OSError) as exc:
            last = exc
            log.debug("hbase probe not yet successful: %r", exc)
            time.sleep(1.0)
    raise DevstackError(
        f"hbase thrift at {host}:{port} accepts connections but a create/put/get/drop "
        f"round trip did not succeed in time (last error: {_short(last)})",
        fix="read <home>/logs/hbase-master.log; then `python -m sparkbarrier.devstack down` "
        "and `up`",
    )


def probe_thrift2(
    host: str, port: int, *, deadline: float, check: Callable[[], None] | None = None
) -> None:
    """Ask the Thrift2 server whether ``hbase:meta`` exists, retrying until ``deadline``.

    Why this call: it goes through THBaseService to the master, so a server that
    answers it serves admin calls; the Thrift1 probe has already proven that data
    round trips work, so a cheap read-only call suffices here.
    """
    from thriftpy2.thrift import TException

    from .._exceptions import SinkError

    last: BaseException | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            if _meta_exists(host, port):
                return
            last = OSError("tableExists(hbase:meta) answered false")
        except (TException, OSError, SinkError) as exc:
            last = exc
        log.debug("hbase thrift2 probe not yet successful: %r", last)
        time.sleep(1.0)
    raise DevstackError(
        f"hbase thrift2 at {host}:{port} did not answer tableExists(hbase:meta) in time "
        f"(last error: {_short(last)})",
        fix="read <home>/logs/hbase-thrift2.log; then `python -m sparkbarrier.devstack down` "
        "and `up`",
    )


def probe_thrift2_tls(port: int, ca: Path, *, deadline: float, check: Callable[[], None] | None = None) -> None:
    """Ask the TLS Thrift2 gateway (HTTPS, CA-verified, as ``localhost``) whether ``hbase:meta``
    exists, retrying until ``deadline``."""
    from thriftpy2.thrift import TException

    from .._exceptions import SinkError

    last: BaseException | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            if _meta_exists(TLS_HOST, port, ca=ca):
                return
            last = OSError("tableExists(hbase:meta) answered false")
        except (TException, OSError, SinkError) as exc:  # before the deadline: "not yet"
            last = exc
        log.debug("hbase thrift2 tls probe not yet successful: %r", last)
        time.sleep(1.0)
    raise DevstackError(
        f"hbase thrift2 (TLS) at {TLS_HOST}:{port} did not answer tableExists(hbase:meta) over HTTPS in time "
        f"(last error: {_short(last)})",
        fix="read <home>/logs/hbase-thrift2-tls.log; then `python -m sparkbarrier.devstack down` and `up --all`",
    )


def _meta_exists(host: str, port: int, *, ca: Path | None = None) -> bool:
    # Imported here: the product client is the one IDL subset the project keeps.
    from ..connectors.hbase.client._connection import connection_options
    from ..connectors.hbase.client._thrift2 import Thrift2Admin

    tls = {"hbase.thrift.tls": "true", "hbase.thrift.tls.ca": str(ca)} if ca is not None else {}
    admin = Thrift2Admin(connection_options({**_PROBE, **tls, "hbase.thrift2.host": f"{host}:{port}"}))
    try:
        return admin.table_exists("hbase:meta")
    finally:
        admin.close()


def _roundtrip(host: str, port: int) -> None:
    import happybase
    from thriftpy2.thrift import TException

    table_name = f"sparkbarrier_devstack_probe_{secrets.token_hex(4)}"
    connection = happybase.Connection(host, port, timeout=20000, autoconnect=False)
    connection.open()
    created = False
    try:
        connection.create_table(table_name, {"f": {}})
        created = True
        table = connection.table(table_name)
        table.put(b"row", {b"f:q": b"v"})
        if table.row(b"row") != {b"f:q": b"v"}:
            raise OSError(f"probe row not read back from {table_name}")
    finally:
        if created:
            try:
                connection.delete_table(table_name, disable=True)
            except (TException, OSError) as exc:
                log.warning("could not drop probe table %s: %r", table_name, exc)
        connection.close()


def _short(exc: BaseException | None) -> str:
    text = repr(exc)
    return text if len(text) < 300 else text[:300] + "..."
