"""Shared fixtures: real Kafka and HBase endpoints, a SparkSession, unique names.

Endpoints are chosen once per session, in this order:
  (a) ``SPARKBARRIER_KAFKA_BOOTSTRAP`` / ``SPARKBARRIER_HBASE_THRIFT`` set → use them;
  (b) ``SPARKBARRIER_BACKEND=testcontainers`` → testcontainers (Kafka module; generic
      HBase container), only when asked: the image is unpinned and serves no Thrift2;
  (c) the project's devstack (``python -m sparkbarrier.devstack up``), the default, with
      or without a Docker engine, so ``./dev test`` runs the same servers everywhere.
The HBase Thrift2 endpoint (``hbase_thrift2``) is ``SPARKBARRIER_HBASE_THRIFT2`` if set,
else the devstack's. The devstack's second Thrift1 gateway and its TLS one start only
for the tests that ask for them (``every_gateway``); where the backend has none (testcontainers), a test that needs it
fails naming the variable: a missing server is a failure, never a skip.
The pytest header says which one was used. Servers start lazily: pure unit tests never
wait for them.

The 3-node Kafka cluster of the failover tests (``kafka_cluster``) is always the
devstack's, whatever the backend: its tests kill and restart brokers. So is the HDFS
that holds checkpoints (``hdfs``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from sparkbarrier._endpoints import (
    HBASE_ENV,
    HBASE_GATEWAYS_ENV,
    HBASE_THRIFT2_ENV,
    HBASE_THRIFT2_TLS_ENV,
    HBASE_TLS_CA_ENV,
    HBASE_TLS_ENV,
    KAFKA_ENV,
    parse_hostport,
)
from sparkbarrier._exceptions import ConfigError

import server_groups
import spark_class_archive
from server_groups import stop_when_unused as _stop_when_unused

HBASE_IMAGE = os.environ.get("SPARKBARRIER_HBASE_IMAGE", "dajobe/hbase:latest")
KAFKA_IMAGE = os.environ.get("SPARKBARRIER_KAFKA_IMAGE", "apache/kafka:4.1.0")


def _docker_reachable() -> bool:
    try:
        import docker  # shipped with testcontainers
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=3)
        return bool(client.ping())
    except Exception:  # any failure means "no engine here": fall through to the devstack
        return False


def _choose_backend() -> str:
    if os.environ.get(KAFKA_ENV) and os.environ.get(HBASE_ENV):
        return "env"
    backend = os.environ.get("SPARKBARRIER_BACKEND", "devstack")
    if backend not in ("env", "testcontainers", "devstack"):
        raise pytest.UsageError(f"SPARKBARRIER_BACKEND={backend!r}: use devstack (default), "
                                "testcontainers or env")
    if backend == "testcontainers" and not _docker_reachable():
        raise pytest.UsageError("SPARKBARRIER_BACKEND=testcontainers but no Docker engine answers")
    return backend


_BACKEND = _choose_backend()

# Every Spark driver the tests start (the session's, each fault pipeline's, the examples',
# the demo's, a Spark Connect server's) inherits this through spark-submit: the client
# compiler only, and one GC thread. Why: the suite's drivers live seconds to minutes on
# two cores, where C2's compile threads never pay back; measured 2026-11-27, a driver's
# start and five small aggregations took 17.0 s of JVM CPU with the defaults and 8.4-8.8 s
# with these (wall 11 s -> 7.7 s). Tests only: benchmarks/ run Spark's defaults.
_TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _add_spark_submit_opts(opts: str) -> None:
    current = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if opts not in current:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{current} {opts}".strip()


_add_spark_submit_opts(_TEST_JVM_OPTS)
_class_archive_checked = False


def _use_class_archive() -> None:
    """Before the first Spark driver of this process: the drivers map a class archive
    (``spark_class_archive``; built once per virtualenv, in the background from the start
    of a run that has Spark tests)."""
    global _class_archive_checked
    if _class_archive_checked:
        return
    _class_archive_checked = True
    flags = spark_class_archive.driver_flags(_TEST_JVM_OPTS)
    if flags:
        _add_spark_submit_opts(flags)


def pytest_report_header(config: pytest.Config) -> list[str]:
    detail = {
        "env": f"{KAFKA_ENV}={os.environ.get(KAFKA_ENV)} {HBASE_ENV}={os.environ.get(HBASE_ENV)} "
               f"{HBASE_THRIFT2_ENV}={os.environ.get(HBASE_THRIFT2_ENV)}",
        "testcontainers": f"SPARKBARRIER_BACKEND=testcontainers: {KAFKA_IMAGE}, {HBASE_IMAGE}",
        "devstack": "the default: python -m sparkbarrier.devstack",
    }[_BACKEND]
    return [f"sparkbarrier backend: {_BACKEND} ({detail})"]


@dataclass(frozen=True)
class Servers:
    kafka_bootstrap: str
    hbase_thrift: tuple[str, int]
    hbase_thrift2: tuple[str, int] | None = None  # None: no Thrift2 server available
    # The running Thrift1 gateways and the TLS one; every one of them: fixture every_gateway.
    hbase_gateways: tuple[tuple[str, int], ...] = ()
    hbase_tls: tuple[str, int] | None = None  # a Thrift1 gateway over HTTPS, and its CA file
    hbase_tls_ca: str | None = None
    hbase_tls2: tuple[str, int] | None = None  # a Thrift2 gateway over HTTPS (CA: hbase_tls_ca)


def pytest_configure(config: pytest.Config) -> None:
    server_groups.configure_xdist(config)
    # The controller (or the only process): build the Spark class archive while the
    # first groups start their servers; not for a run that deselects the Spark tests.
    if not hasattr(config, "workerinput") and "not spark" not in (config.option.markexpr or ""):
        config._class_archive_build = spark_class_archive.build_in_background(_TEST_JVM_OPTS)  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    build = getattr(config, "_class_archive_build", None)
    if build is not None and build.poll() is None:  # the run ended first (say, -x)
        try:
            os.killpg(build.pid, signal.SIGKILL)  # the builder and the Spark job it runs
        except ProcessLookupError:
            pass
        build.wait()


# Session servers that stop after the last test using them, and which worker runs
# what (``server_groups``). tryfirst: xdist's worker reads the xdist_group marks in its
# own hook of the same name, which would otherwise run before this one.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    server_groups.worker_groups(items)  # reorders: the last user of a server is known after
    server_groups.note_users(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # At the test body, not its setup: the servers its fixtures start come up meanwhile.
    if item.get_closest_marker("spark"):
        _use_class_archive()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    server_groups.stop_after(item)


def _split_hostport(value: str, env: str) -> tuple[str, int]:
    try:
        return parse_hostport(value, env)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    thrift2_env = os.environ.get(HBASE_THRIFT2_ENV)
    thrift2 = _split_hostport(thrift2_env, HBASE_THRIFT2_ENV) if thrift2_env else None
    if _BACKEND == "env":
        _split_hostport(os.environ[KAFKA_ENV], KAFKA_ENV)
        gateways = tuple(_split_hostport(g, HBASE_GATEWAYS_ENV)
                         for g in os.environ.get(HBASE_GATEWAYS_ENV, "").split(",") if g.strip())
        tls = os.environ.get(HBASE_TLS_ENV)
        tls2 = os.environ.get(HBASE_THRIFT2_TLS_ENV)
        yield Servers(os.environ[KAFKA_ENV], _split_hostport(os.environ[HBASE_ENV], HBASE_ENV),
                      thrift2, gateways, _split_hostport(tls, HBASE_TLS_ENV) if tls else None,
                      os.environ.get(HBASE_TLS_CA_ENV),
                      _split_hostport(tls2, HBASE_THRIFT2_TLS_ENV) if tls2 else None)
    elif _BACKEND == "testcontainers":
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer(KAFKA_IMAGE).with_kraft() as kafka, DockerContainer(
            HBASE_IMAGE
        ).with_exposed_ports(9090) as hbase:
            wait_for_logs(hbase, "Starting Thrift", timeout=180)
            yield Servers(
                kafka.get_bootstrap_server(),
                (hbase.get_container_host_ip(), int(hbase.get_exposed_port(9090))),
                thrift2,  # the image runs Thrift1 only: None unless the variable names one
            )
    else:
        from sparkbarrier.devstack import Devstack

        endpoints = Devstack().up()
        # Left running on purpose: the next run reuses it (``devstack down`` stops it).
        yield Servers(endpoints.kafka_bootstrap, tuple(endpoints.hbase_thrift),
                      thrift2 or tuple(endpoints.hbase_thrift2), tuple(endpoints.hbase_thrift_gateways),
                      endpoints.hbase_thrift_tls, endpoints.hbase_thrift_tls_ca, endpoints.hbase_thrift2_tls)


@pytest.fixture(scope="session")
def every_gateway(servers: Servers) -> Servers:
    """``servers`` with every HBase gateway: ``hbase_gateways`` lists two plain Thrift1
    gateways and ``hbase_tls`` names the TLS one.

    The devstack starts these two only on demand (the demo uses neither): here, the first
    time a test asks, beside the running HBase, and returns once both serve. Left running
    like the rest of the shared stack (idle, and another session may use them). Other
    backends: what their variables name.
    """
    if _BACKEND != "devstack":
        return servers
    from sparkbarrier.devstack import Devstack

    endpoints = Devstack().up(all_gateways=True)
    return replace(servers, hbase_gateways=tuple(endpoints.hbase_thrift_gateways),
                   hbase_tls=endpoints.hbase_thrift_tls, hbase_tls_ca=endpoints.hbase_thrift_tls_ca,
                   hbase_tls2=endpoints.hbase_thrift2_tls)


@pytest.fixture(scope="session")
def kafka_bootstrap(servers: Servers) -> str:
    return servers.kafka_bootstrap


@pytest.fixture(scope="session")
def hbase_thrift(servers: Servers) -> tuple[str, int]:
    return servers.hbase_thrift


@pytest.fixture(scope="session")
def hbase_thrift2(servers: Servers) -> tuple[str, int]:
    """The HBase Thrift2 server; fails the test where the backend has none."""
    if servers.hbase_thrift2 is None:
        pytest.fail(f"no HBase Thrift2 server: set {HBASE_THRIFT2_ENV}=host:port "
                    "or use the devstack (the default backend)")
    return servers.hbase_thrift2


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[object]:
    """The devstack's 3-node KRaft cluster (``devstack/_kafka_cluster.py``): RF 3, min ISR 2,
    brokers a test may ``kill``, ``stop``, ``start`` and ``restart``; yields the
    ``KafkaCluster``.

    Started once per session, and only when a test asks for it; a cluster that cannot
    start fails the test, never skips it. Always the devstack (Docker and the endpoint
    variables do not apply). Stopped at the end if this session started it (three idle
    brokers cost ~5 % of a 2-core machine); one started by ``devstack cluster up`` is
    left running. Before each test that uses it, ``_kafka_cluster_healthy`` starts any
    node an earlier test left down and waits until every partition is fully in sync.
    """
    from sparkbarrier.devstack import DevstackError
    from sparkbarrier.devstack._kafka_cluster import KafkaCluster

    cluster = KafkaCluster()
    started_here = not cluster.status().running
    try:
        cluster.up()
    except DevstackError as exc:
        tail = f"\n--- last lines of {exc.log_path} ---\n{exc.log_tail}" if exc.log_tail else ""
        pytest.fail(f"the devstack's 3-node Kafka cluster did not start: {exc}{tail}", pytrace=False)
    def stop() -> None:
        cluster.close()
        if started_here:
            cluster.down()

    stop_once = _stop_when_unused("kafka_cluster", stop)
    try:
        yield cluster
    finally:
        stop_once()


@pytest.fixture(autouse=True)
def _kafka_cluster_healthy(request: pytest.FixtureRequest) -> None:
    """Each test that uses ``kafka_cluster`` starts on a healthy cluster, even after a
    test that failed with a broker down (tests that use no cluster pay nothing)."""
    if "kafka_cluster" in request.fixturenames:
        request.getfixturevalue("kafka_cluster").heal()


@pytest.fixture(scope="session")
def hdfs() -> Iterator[object]:
    """The devstack's HDFS (``devstack/_hdfs.py``): a NameNode and a DataNode on 127.0.0.1,
    WebHDFS on, permissions off, replication 1. Yields its ``HdfsEndpoints``: ``.uri``
    (``hdfs://127.0.0.1:<rpc port>``, for Spark's ``checkpointLocation``) and ``.webhdfs``
    (``http://127.0.0.1:<http port>``, what ``SPARKBARRIER_WEBHDFS`` names).

    Started once per session, and only when a test asks for it; one that cannot start
    fails the test, never skips it. Always the devstack, whatever the backend. Stopped
    at the end if this session started it (its data stays: the next start takes ~5 s);
    one started by ``devstack hdfs up`` is left running. Tests share it: each writes
    under a path of its own (``unique_name``).
    """
    from sparkbarrier.devstack import DevstackError
    from sparkbarrier.devstack._hdfs import Hdfs

    cluster = Hdfs()
    started_here = not cluster.status().running
    try:
        endpoints = cluster.up()
    except DevstackError as exc:
        tail = f"\n--- last lines of {exc.log_path} ---\n{exc.log_tail}" if exc.log_tail else ""
        pytest.fail(f"the devstack's HDFS did not start: {exc}{tail}", pytrace=False)
    stop_once = _stop_when_unused("hdfs", cluster.down if started_here else lambda: None)
    try:
        yield endpoints
    finally:
        stop_once()


# Kerberos (issue 19): the session's private KDC and Kerberized servers live in
# KERBEROS_HOME. Its krb5.conf and a private ticket cache are named here, before Spark
# starts, so Python workers inherit them (they are written when the ``kdc`` fixture
# starts the KDC; MIT Kerberos reads KRB5_CONFIG afresh for every context). The user's
# own /etc/krb5.conf and ticket cache are never touched.
KERBEROS_HOME = Path(tempfile.gettempdir()) / f"sparkbarrier-tests-kerberos-{os.getpid()}"
os.environ["KRB5_CONFIG"] = str(KERBEROS_HOME / "data" / "kdc" / "krb5.conf")
os.environ["KRB5CCNAME"] = f"FILE:{KERBEROS_HOME / 'session.ccache'}"
os.environ.pop("KRB5_CLIENT_KTNAME", None)


@pytest.fixture(scope="session")
def kdc() -> Iterator[object]:
    """The session's private MIT KDC (``devstack/_kdc.py``); yields its ``KdcManifest``.

    Kerberized servers (fixtures that depend on this one) share ``KERBEROS_HOME`` and
    stop before it; the whole home is removed at the end.
    """
    from sparkbarrier.devstack import Kdc

    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKBARRIER_DEVSTACK_")}
    kdc = Kdc(KERBEROS_HOME, environ=env)

    def stop() -> None:
        kdc.down()
        shutil.rmtree(KERBEROS_HOME, ignore_errors=True)

    stop_once = _stop_when_unused("kdc", stop)
    try:
        manifest = kdc.up()
        assert manifest.krb5_conf == os.environ["KRB5_CONFIG"], (manifest.krb5_conf, os.environ["KRB5_CONFIG"])
        yield manifest
    finally:
        stop_once()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    # Workers must run this interpreter, or they fail to import sparkbarrier.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Everything stays on loopback: never bind or connect to the machine's other addresses.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars
    from pyspark.sql import SparkSession

    _use_class_archive()
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sparkbarrier-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "2g")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        # Spark's own format("kafka"), for tests of commit_kafka_offsets and barrier-hbase
        # behind the JVM source (local jars: no resolution cost per session).
        .config("spark.jars", jvm_kafka_jars())
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_name("orders")`` → a name no other test uses (valid topic and table name)."""
    test = _UNSAFE.sub("_", request.node.name)[:40].strip("_")

    def make(prefix: str) -> str:
        return f"{_UNSAFE.sub('_', prefix)}_{test}_{uuid.uuid4().hex[:8]}"

    return make


def _kerberos_env() -> dict[str, str]:
    """The environment of the Kerberized servers: no other stack's home or ports, but the
    shared download cache (so no Maven run)."""
    keep = ("SPARKBARRIER_DEVSTACK_CACHE", "SPARKBARRIER_DEVSTACK_MAVEN_REPO",
            "SPARKBARRIER_DEVSTACK_MAVEN_SETTINGS")
    return {k: v for k, v in os.environ.items() if not k.startswith("SPARKBARRIER_DEVSTACK_") or k in keep}


@pytest.fixture(scope="session")
def kerberos_hbase(kdc) -> Iterator[object]:
    """A Kerberos-secured HBase (``devstack/_hbase_kerberos.py``) in ``KERBEROS_HOME``; yields
    its ``KerberosHBaseEndpoints`` (Thrift1 at qop auth, auth-int and auth-conf, Thrift2 at
    auth, all on host ``localhost``). Stopped at session end, before the KDC."""
    from sparkbarrier.devstack._hbase_kerberos import KerberosHBase

    hbase = KerberosHBase(KERBEROS_HOME, kdc, environ=_kerberos_env())
    stop_once = _stop_when_unused("kerberos_hbase", hbase.down)
    try:
        yield hbase.up()
    finally:
        stop_once()


@pytest.fixture(scope="session")
def kerberos_kafka(kdc) -> Iterator[object]:  # noqa: ANN001 -- the session's KdcManifest
    """A Kerberized Kafka broker (``devstack/_kafka_kerberos.py``) in ``KERBEROS_HOME``:
    a PLAINTEXT listener for setup and a SASL_PLAINTEXT/GSSAPI one on ``localhost``;
    yields its ``KerberosKafkaEndpoints`` and stops it before the KDC goes."""
    from sparkbarrier.devstack._kafka_kerberos import KerberosKafka

    broker = KerberosKafka(KERBEROS_HOME, kdc, environ=_kerberos_env())
    stop_once = _stop_when_unused("kerberos_kafka", broker.down)
    try:
        yield broker.up()
    finally:
        stop_once()
