"""barrier-kafka over SASL/GSSAPI against a real MIT KDC and a real Kerberized broker.

Fixtures ``kdc`` and ``kerberos_kafka`` (tests/conftest.py) start both in the session's
``KERBEROS_HOME``; ``KRB5_CONFIG`` and ``KRB5CCNAME`` (a private session cache) were
set before Spark started, so the Python workers share them. Options are written
exactly as for Spark's ``format("kafka")``. Setup and checks (topics, producing, the
group's committed offsets) go through the broker's PLAINTEXT listener.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_testkit import KafkaTool, start

from sparkbarrier import ConfigError
from sparkbarrier.connectors.kafka import parse_source_options
from sparkbarrier.connectors.kafka.client._client_config import ConsumerClient

pytestmark = [pytest.mark.kafka]

JAAS = "kafka.sasl.jaas.config"
_START_S = 60  # a refused login must fail well within this, not after a bootstrap timeout


def _keytab_jaas(principal: str, keytab: str) -> str:
    return ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="{principal}";')


def gssapi(kerberos_kafka: Any, kdc: Any, role: str = "client", **extra: str) -> dict[str, str]:
    """The options a Spark user writes for a keytab login as ``role``."""
    principal, keytab = kdc.keytab(role)
    return {"kafka.bootstrap.servers": kerberos_kafka.sasl_plaintext,
            "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "GSSAPI",
            "kafka.sasl.kerberos.service.name": "kafka", JAAS: _keytab_jaas(principal, keytab),
            **extra}


@pytest.fixture
def plain(kerberos_kafka: Any):  # noqa: ANN201 -- the broker's PLAINTEXT side, for setup
    tool = KafkaTool(kerberos_kafka.plaintext)
    yield tool
    tool.close()


def _names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"krb_t_{tag}", f"krb_g_{tag}"


def _run(spark: Any, options: dict[str, str], ckpt: str) -> list[bytes]:
    query, got = start(spark, options, ckpt, available_now=True)
    try:
        assert query.awaitTermination(180), "query did not finish in 180 s"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    return got.values()


def _start_error(spark: Any, options: dict[str, str], ckpt: str) -> tuple[str, float]:
    """The error text of a query that must fail at start, and how long it took."""
    began = time.monotonic()
    try:
        query, _ = start(spark, options, ckpt, available_now=True)
    except Exception as exc:  # noqa: BLE001 -- load()/start() raised: that is the answer
        return str(exc), time.monotonic() - began
    try:
        try:  # awaitTermination raises the query's error once it failed
            assert query.awaitTermination(_START_S), f"query still runs after {_START_S} s"
        except Exception as exc:  # noqa: BLE001 -- StreamingQueryException: the answer
            return str(exc), time.monotonic() - began
        raise AssertionError("query finished without the expected error")
    finally:
        query.stop()


def _ccache() -> Path:
    return Path(os.environ["KRB5CCNAME"].removeprefix("FILE:"))


@pytest.mark.spark
def test_gssapi_read_plans_reads_once_and_commits_with_the_client_keytab(
        spark, kdc, kerberos_kafka, plain: KafkaTool, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO)
    topic, group = _names()
    plain.create_topic(topic)
    values = plain.produce(topic, 40)
    options = {**gssapi(kerberos_kafka, kdc), "subscribe": topic, "kafka.group.id": group,
               "startingOffsets": "earliest", "maxOffsetsPerTrigger": "15"}
    # auto picks kafka-python: the wheel's librdkafka has no GSSAPI
    assert parse_source_options(options).consumer_client is ConsumerClient.KAFKA_PYTHON
    ckpt = tmp_path / "ckpt"
    got = _run(spark, options, str(ckpt))
    assert sorted(got) == sorted(values) and len(got) == len(set(got))
    assert plain.group_offsets(group) == {(topic, 0): 20, (topic, 1): 20}
    # Nothing secret or login-shaped in the checkpoint, the group's metadata or the logs.
    _, keytab = kdc.keytab("client")
    key_bytes = Path(keytab).read_bytes()
    stored = b"".join(p.read_bytes() for p in ckpt.rglob("*") if p.is_file())
    metadata = json.dumps({str(k): v for k, v in plain.group_metadata(group).items()})
    assert key_bytes not in stored and key_bytes[-32:] not in stored
    for text in (stored.decode(errors="replace"), metadata, caplog.text):
        assert options[JAAS] not in text and "Krb5LoginModule" not in text
    assert not _ccache().exists(), "the session's default ticket cache was written"


@pytest.mark.spark
@pytest.mark.parametrize("client", ["native", "confluent"])
def test_explicit_librdkafka_client_fails_at_query_start_with_reason_and_fix(
        spark, kdc, kerberos_kafka, tmp_path: Path, client: str) -> None:
    options = {**gssapi(kerberos_kafka, kdc), "subscribe": "krb_never", "kafka.group.id": "g",
               "kafkaConsumer.client": client}
    text, took = _start_error(spark, options, str(tmp_path / "ckpt"))
    assert "kafkaConsumer.client" in text and "built without GSSAPI" in text, text
    assert "auto or kafka-python" in text, text
    assert took < _START_S


@pytest.mark.spark
def test_stale_keytab_fails_at_query_start_in_seconds_naming_the_option(
        spark, kdc, kerberos_kafka, tmp_path: Path) -> None:
    options = {**gssapi(kerberos_kafka, kdc, "stale"), "subscribe": "krb_never",
               "kafka.group.id": "g"}
    text, took = _start_error(spark, options, str(tmp_path / "ckpt"))
    assert "Preauthentication failed" in text and JAAS in text, text
    assert took < 30, f"took {took:.1f} s: a timeout, not a refused login"


def _view_error(options: dict[str, str]) -> ConfigError:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    view = ClusterView(parse_source_options({**options, "subscribe": "krb_never",
                                             "kafka.group.id": "g"}))
    began = time.monotonic()
    try:
        with pytest.raises(ConfigError) as err:
            view.discover()
    finally:
        view.close()
    assert time.monotonic() - began < 10
    return err.value


def test_principal_unknown_to_the_kdc_is_a_clear_error(kdc, kerberos_kafka) -> None:
    err = _view_error(gssapi(kerberos_kafka, kdc, "unknown"))
    assert err.option == JAAS
    assert "does not know the principal sparkbarrier-unknown-client@" in str(err)


def test_broker_host_without_service_principal_names_service_and_host(kdc, kerberos_kafka) -> None:
    by_ip = kerberos_kafka.sasl_plaintext.replace("localhost", "127.0.0.1")
    err = _view_error(gssapi(kerberos_kafka, kdc, **{"kafka.bootstrap.servers": by_ip}))
    assert err.option == "kafka.sasl.kerberos.service.name"
    assert "kafka/127.0.0.1" in str(err) and "host name" in str(err)


def test_two_principals_in_one_process_each_log_in_as_themselves(
        kdc, kerberos_kafka, plain: KafkaTool, caplog) -> None:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    caplog.set_level(logging.DEBUG)  # kafka-python logs its whole configuration at DEBUG
    topic, _ = _names()
    plain.create_topic(topic)
    views = [ClusterView(parse_source_options({**gssapi(kerberos_kafka, kdc, role),
                                               "subscribe": topic, "kafka.group.id": "g"}))
             for role in ("client", "kafka")]
    try:
        for view in views:
            assert {tp.topic for tp in view.discover()} == {topic}
    finally:
        for view in views:
            view.close()
    for role in ("client", "kafka"):
        assert f"Authenticated as {kdc.keytab(role)[0]} to kafka/localhost@" in caplog.text
        keytab = Path(kdc.keytab(role)[1]).read_bytes()
        assert "Krb5LoginModule" not in caplog.text
        assert keytab.hex() not in caplog.text and repr(keytab[-16:])[2:-1] not in caplog.text
    assert not _ccache().exists(), "the session's default ticket cache was written"


def _kdestroy() -> None:
    tool = shutil.which("kdestroy") or "/usr/bin/kdestroy"
    subprocess.run([tool], env=dict(os.environ), check=False, capture_output=True, timeout=30)
    _ccache().unlink(missing_ok=True)


@pytest.mark.spark
def test_ticket_cache_login_after_kinit_then_kdestroy_is_a_clear_error(
        spark, kdc, kerberos_kafka, plain: KafkaTool, tmp_path: Path) -> None:
    from sparkbarrier.devstack import Kdc

    home = Path(os.environ["KRB5_CONFIG"]).parents[2]  # <KERBEROS_HOME>/data/kdc/krb5.conf
    topic, group = _names()
    plain.create_topic(topic)
    values = plain.produce(topic, 10)
    options = {**gssapi(kerberos_kafka, kdc), JAAS: "com.sun.security.auth.module."
               "Krb5LoginModule required useTicketCache=true;", "subscribe": topic,
               "kafka.group.id": group, "startingOffsets": "earliest"}
    kinit = Kdc(home).kinit("client", ccache=_ccache())
    assert kinit.returncode == 0, kinit.stderr
    try:
        assert sorted(_run(spark, options, str(tmp_path / "ckpt"))) == sorted(values)
        assert plain.group_offsets(group) == {(topic, 0): 5, (topic, 1): 5}
    finally:
        _kdestroy()
    err = _view_error(options)
    assert err.option == JAAS
    assert "no valid Kerberos ticket" in str(err) and "run kinit" in str(err)
    assert "keyTab" in str(err)


@pytest.mark.spark
def test_gssapi_over_sasl_ssl_reads_and_commits(spark, kdc, kerberos_kafka, plain: KafkaTool,
                                                tmp_path: Path) -> None:
    topic, group = _names()
    plain.create_topic(topic)
    values = plain.produce(topic, 10)
    options = {**gssapi(kerberos_kafka, kdc), "kafka.security.protocol": "SASL_SSL",
               "kafka.bootstrap.servers": kerberos_kafka.sasl_ssl,
               "kafka.ssl.truststore.location": kerberos_kafka.ca_pem,
               "kafka.ssl.truststore.type": "PEM", "subscribe": topic,
               "kafka.group.id": group, "startingOffsets": "earliest"}
    assert sorted(_run(spark, options, str(tmp_path / "ckpt"))) == sorted(values)
    assert plain.group_offsets(group) == {(topic, 0): 5, (topic, 1): 5}


def _kinit(kdc: Any, *args: str) -> None:
    principal, keytab = kdc.keytab("client")
    tool = shutil.which("kinit") or "/usr/bin/kinit"
    done = subprocess.run([tool, *args, "-k", "-t", keytab, principal], env=dict(os.environ),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr


def test_expired_ticket_without_keytab_is_a_clear_error(kdc, kerberos_kafka) -> None:
    from polling import wait_for

    options = {**gssapi(kerberos_kafka, kdc), JAAS: "com.sun.security.auth.module."
               "Krb5LoginModule required useTicketCache=true;"}
    _kinit(kdc, "-l", "2s")
    klist = shutil.which("klist") or "/usr/bin/klist"
    try:  # klist -s: exit status 1 once the cache holds no valid ticket
        wait_for(lambda: subprocess.run([klist, "-s"], env=dict(os.environ), timeout=30,
                                        check=False).returncode != 0, 30, "the ticket to expire")
        err = _view_error(options)
    finally:
        _kdestroy()
    assert err.option == JAAS
    assert "no valid Kerberos ticket" in str(err) and "run kinit" in str(err), str(err)


def test_ticket_cache_first_then_the_keytab_as_in_java(kdc, kerberos_kafka, plain) -> None:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    principal, keytab = kdc.keytab("client")
    topic, _ = _names()
    plain.create_topic(topic)
    _kdestroy()  # no ticket: the keytab must step in, and the default cache stay untouched
    options = {**gssapi(kerberos_kafka, kdc), "subscribe": topic, "kafka.group.id": "g",
               JAAS: "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true "
                     f'useKeyTab=true keyTab="{keytab}" principal="{principal}";'}
    view = ClusterView(parse_source_options(options))
    try:
        assert {tp.topic for tp in view.discover()} == {topic}
    finally:
        view.close()
    assert not _ccache().exists()


def test_status_cli_reads_the_group_over_gssapi_and_refuses_a_stale_keytab(
        kdc, kerberos_kafka, plain: KafkaTool, tmp_path: Path, capsys) -> None:
    from sparkbarrier.__main__ import main

    topic, group = _names()
    plain.create_topic(topic)
    plain.produce(topic, 6)
    plain.commit_group(group, {(topic, 0): 2, (topic, 1): 3})
    for role in ("client", "stale"):
        principal, keytab = kdc.keytab(role)
        props = tmp_path / f"{role}.properties"
        props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
                         "sasl.kerberos.service.name=kafka\n"
                         f"sasl.jaas.config={_keytab_jaas(principal, keytab)}\n")
        began = time.monotonic()
        code = main(["status", "--group", group, "--bootstrap", kerberos_kafka.sasl_plaintext,
                     "--command-config", str(props), "--json"])
        out, err = capsys.readouterr()
        assert time.monotonic() - began < 30
        if role == "client":
            assert code == 0, err
            assert {f"{topic}:0": 2, f"{topic}:1": 3}.items() <= \
                {f"{p['topic']}:{p['partition']}": p["committed"]
                 for p in json.loads(out)["group"]["partitions"]}.items(), out
        else:
            assert code == 1 and "Preauthentication failed" in err, err
        assert "Krb5LoginModule" not in out + err


def test_no_kdc_answering_names_the_krb5_conf(kdc, tmp_path: Path) -> None:
    """A krb5.conf whose KDC port is closed: run in a child, whose KRB5_CONFIG is its own."""
    import socket
    import sys

    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    conf = tmp_path / "krb5.conf"
    conf.write_text(Path(kdc.krb5_conf).read_text().replace(kdc.kdc, f"127.0.0.1:{dead}"))
    principal, keytab = kdc.keytab("client")
    code = ("import sys\nfrom sparkbarrier.connectors.kerberos._settings import KerberosSettings\n"
            "from sparkbarrier.connectors.kafka.client._kerberos_check import check_kerberos\n"
            "check_kerberos(KerberosSettings(sys.argv[1], sys.argv[2], 'kafka'), 'localhost:9')\n")
    env = {**os.environ, "KRB5_CONFIG": str(conf), "KRB5CCNAME": f"FILE:{tmp_path / 'cc'}"}
    done = subprocess.run([sys.executable, "-c", code, principal, keytab], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "no KDC answered" in done.stderr and str(conf) in done.stderr, done.stderr


def test_a_keytab_missing_where_a_client_logs_in_names_the_option(tmp_path: Path) -> None:
    """What an executor without the shipped keytab reports (the driver had it)."""
    from sparkbarrier.connectors.kerberos._settings import KerberosSettings
    from sparkbarrier.connectors.kafka.client._kerberos import credentials

    gone = tmp_path / "shipped.keytab"
    with pytest.raises(ConfigError, match="cannot read keyTab .*--files") as err:
        credentials(KerberosSettings("c@R", str(gone), "kafka"))
    assert err.value.option == JAAS


def test_keytab_login_logs_in_again_once_its_ticket_expired(kdc, tmp_path: Path) -> None:
    """Long queries outlive tickets: with a 3 s ticket lifetime (a child with its own
    krb5.conf), a login after expiry gets a fresh ticket from the keytab by itself."""
    import sys

    conf = tmp_path / "krb5.conf"
    conf.write_text(Path(kdc.krb5_conf).read_text().replace("ticket_lifetime = 24h",
                                                            "ticket_lifetime = 3s"))
    principal, keytab = kdc.keytab("client")
    code = """
import sys, time
import gssapi
from sparkbarrier.connectors.kerberos._login import ticket_cache
from sparkbarrier.connectors.kerberos._settings import KerberosSettings
from sparkbarrier.connectors.kafka.client._kerberos import credentials
k = KerberosSettings(sys.argv[1], sys.argv[2], "kafka")
name = gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service)
def login():
    creds = credentials(k)
    gssapi.SecurityContext(name=name, usage="initiate", creds=creds).step()
    return creds.lifetime
first = login()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:   # poll until the first ticket has expired
    try:
        gssapi.Credentials(usage="initiate", store={"ccache": ticket_cache(k)}).lifetime
    except gssapi.exceptions.ExpiredCredentialsError:
        break
    time.sleep(0.2)
else:
    sys.exit("the ticket never expired")
print(first, login())
"""
    env = {**os.environ, "KRB5_CONFIG": str(conf)}
    done = subprocess.run([sys.executable, "-c", code, principal, keytab], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    first, second = (int(x) for x in done.stdout.split())
    assert 0 < first <= 3 and 0 < second <= 3


def test_other_kafka_python_gssapi_users_in_the_process_keep_upstream_behaviour(
        kdc, kerberos_kafka) -> None:
    """Our mechanism replaces kafka-python's GSSAPI class process-wide; without a
    KerberosLogin it must be kafka-python's own (default credentials: the ticket cache)."""
    from kafka.net.sasl import get_sasl_mechanism
    from kafka.net.sasl.gssapi import SaslMechanismGSSAPI

    from sparkbarrier.connectors.kafka.client._kerberos import install_gssapi_mechanism

    install_gssapi_mechanism()
    mechanism = get_sasl_mechanism("GSSAPI")
    assert mechanism is not SaslMechanismGSSAPI and issubclass(mechanism, SaslMechanismGSSAPI)
    _kinit(kdc)
    try:
        plain_user = mechanism(host="localhost", sasl_kerberos_service_name="kafka",
                               sasl_kerberos_name=None, sasl_kerberos_domain_name=None)
        assert plain_user.auth_id == "kafka@localhost"
        assert plain_user.auth_bytes()  # a service ticket from the default ticket cache
    finally:
        _kdestroy()
    with pytest.raises(Exception, match="No Kerberos credentials available"):
        mechanism(host="localhost", sasl_kerberos_service_name="kafka",
                  sasl_kerberos_name=None, sasl_kerberos_domain_name=None)


def test_sasl_ssl_with_an_untrusted_broker_certificate_fails_at_query_start(
        kdc, kerberos_kafka, tmp_path: Path) -> None:
    from sparkbarrier.devstack import _certs

    other = _certs.make_ca(_certs.private_dir(tmp_path / "other"), "other-ca")
    err = _view_error({**gssapi(kerberos_kafka, kdc), "kafka.security.protocol": "SASL_SSL",
                       "kafka.bootstrap.servers": kerberos_kafka.sasl_ssl,
                       "kafka.ssl.truststore.location": str(other.cert_pem),
                       "kafka.ssl.truststore.type": "PEM"})
    assert "TLS handshake" in str(err) and "not signed by a CA in the truststore" in str(err)
    assert err.option == "kafka.ssl.truststore.location"
