"""barrier-kafka against the devstack's secured broker: SASL_SSL (SCRAM-SHA-512), mTLS, ACLs.

Options are written exactly as for Spark's ``format("kafka")``. Each case runs the whole
path: driver planning (kafka-python), reading on every executor client (native,
confluent, kafka-python) and group commits. The broker's ACLs (see the devstack):
``reader`` reads ``secure-*`` topics and uses ``secure-*`` groups, ``nogroup`` reads the
topics only, ``norights`` may do nothing.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_testkit import KafkaTool, start

from sparkbarrier import ConfigError
from sparkbarrier.connectors.kafka import parse_source_options

pytestmark = [pytest.mark.kafka]

SECURITY_ENV = "SPARKBARRIER_KAFKA_SECURITY"
CLIENTS = ["native", "confluent", "kafka-python"]


@pytest.fixture(scope="module")
def manifest(servers) -> dict[str, Any]:  # noqa: ANN001 -- the session's servers
    path = os.environ.get(SECURITY_ENV)
    if not path:
        from sparkbarrier.devstack import Devstack

        path = Devstack().up().env()[SECURITY_ENV]
    return json.loads(Path(path).read_text())


def _jaas(user: str, password: str) -> str:
    return ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";')


def scram_jks(m: dict[str, Any], user: str = "reader", password: str | None = None,
              endpoint: str = "sasl_ssl") -> dict[str, str]:
    """SASL_SSL + SCRAM-SHA-512 + JKS truststore, written exactly as for Spark's source."""
    return {"kafka.bootstrap.servers": m[endpoint], "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": _jaas(user, password or m["users"][user]),
            "kafka.ssl.truststore.location": m["ca"]["jks"],
            "kafka.ssl.truststore.password": m["store_password"]}


def mtls_pkcs12(m: dict[str, Any]) -> dict[str, str]:
    return {"kafka.bootstrap.servers": m["ssl"], "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.location": m["ca"]["pkcs12"],
            "kafka.ssl.truststore.type": "PKCS12",
            "kafka.ssl.truststore.password": m["store_password"],
            "kafka.ssl.keystore.location": m["client"]["pkcs12"],
            "kafka.ssl.keystore.type": "PKCS12",
            "kafka.ssl.keystore.password": m["store_password"]}


def pem_kafka_python_spelling(m: dict[str, Any]) -> dict[str, str]:
    return {"kafka.bootstrap.servers": m["sasl_ssl"], "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.plain.username": "reader",
            "kafka.sasl.plain.password": m["users"]["reader"],
            "kafka.ssl.cafile": m["ca"]["pem"]}


CASES = {"scram_jks": scram_jks, "mtls_pkcs12": mtls_pkcs12,
         "pem_kafka_python_spelling": pem_kafka_python_spelling}


def _secrets(m: dict[str, Any]) -> list[str]:
    return [m["store_password"], *m["users"].values()]


@pytest.fixture
def plain(kafka_bootstrap: str):  # noqa: ANN201 -- the super user's PLAINTEXT tool
    tool = KafkaTool(kafka_bootstrap)
    yield tool
    tool.close()


def _names(m: dict[str, Any]) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"{m['topic_prefix']}t_{tag}", f"{m['group_prefix']}g_{tag}"


def _run(spark, options: dict[str, str], ckpt: str) -> list[bytes]:  # noqa: ANN001
    query, got = start(spark, options, ckpt, available_now=True)
    try:
        assert query.awaitTermination(120), "query did not finish in 120 s"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    return got.values()


@pytest.mark.spark
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_secured_read_plans_reads_and_commits_on_every_client(
        spark, manifest, plain: KafkaTool, tmp_path: Path, case: str, client: str) -> None:
    topic, group = _names(manifest)
    plain.create_topic(topic)
    values = plain.produce(topic, 40)
    options = {**CASES[case](manifest), "subscribe": topic, "kafka.group.id": group,
               "startingOffsets": "earliest", "kafkaConsumer.client": client}
    ckpt = tmp_path / "ckpt"
    assert sorted(_run(spark, options, str(ckpt))) == sorted(values)
    assert plain.group_offsets(group) == {(topic, 0): 20, (topic, 1): 20}
    # No secret in Spark's checkpoint (offset log, metadata) nor in the group's metadata.
    stored = "".join(p.read_text(errors="replace") for p in ckpt.rglob("*") if p.is_file())
    stored += json.dumps({str(k): v for k, v in plain.group_metadata(group).items()})
    for secret in _secrets(manifest):
        assert secret not in stored


def test_wrong_password_fails_at_query_start_naming_the_option(manifest, caplog) -> None:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    caplog.set_level(logging.DEBUG)
    wrong = "not-the-password-4821"
    options = parse_source_options({**scram_jks(manifest, password=wrong),
                                    "subscribe": "secure-x", "kafka.group.id": "secure-g"})
    view = ClusterView(options)
    with pytest.raises(ConfigError, match="refused the login of user 'reader'") as err:
        view.discover()
    view.close()
    assert err.value.option == "kafka.sasl.jaas.config"
    assert "uthentication" in str(err.value)  # the broker's reason is quoted
    assert wrong not in str(err.value) and wrong not in caplog.text
    # librdkafka's own lines (one per failed attempt) stay at DEBUG: the error says it once.
    rdkafka = [r for r in caplog.records if r.name.endswith("._preflight")]
    assert rdkafka and {r.levelname for r in rdkafka} == {"DEBUG"}


@pytest.mark.parametrize("case", ["other_ca", "wrong_host"])
def test_untrusted_or_misnamed_certificate_is_rejected(manifest, case: str) -> None:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    if case == "other_ca":
        raw = {**scram_jks(manifest), "kafka.ssl.truststore.location": manifest["other_ca"]["jks"]}
        option = "kafka.ssl.truststore.location"
    else:
        raw = scram_jks(manifest, endpoint="sasl_ssl_wrong_host")
        option = "kafka.ssl.endpoint.identification.algorithm"
    view = ClusterView(parse_source_options({**raw, "subscribe": "secure-x",
                                             "kafka.group.id": "secure-g"}))
    with pytest.raises(ConfigError, match="TLS handshake") as err:
        view.discover()
    view.close()
    assert err.value.option == option


def test_hostname_check_off_as_in_java_accepts_the_misnamed_certificate(manifest, plain) -> None:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    topic, _ = _names(manifest)
    plain.create_topic(topic)
    raw = {**scram_jks(manifest, endpoint="sasl_ssl_wrong_host"),
           "kafka.ssl.endpoint.identification.algorithm": "", "subscribe": topic,
           "kafka.group.id": "secure-g"}
    view = ClusterView(parse_source_options(raw))
    try:
        assert {tp.topic for tp in view.discover()} == {topic}
    finally:
        view.close()


def test_no_right_on_the_topic_fails_at_query_start(manifest, plain) -> None:
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView

    topic, group = _names(manifest)
    plain.create_topic(topic)
    view = ClusterView(parse_source_options({**scram_jks(manifest, "norights"),
                                             "subscribe": topic, "kafka.group.id": group}))
    with pytest.raises(ConfigError, match=f"may not read topic '{topic}'") as err:
        view.discover()
    view.close()
    assert err.value.option == "subscribe"


@pytest.mark.spark
def test_without_group_rights_records_flow_once_and_the_failed_commit_is_reported(
        spark, manifest, plain: KafkaTool, tmp_path: Path, caplog, capsys) -> None:
    from sparkbarrier.__main__ import main
    from sparkbarrier.connectors.kafka import TopicPartition
    from sparkbarrier.connectors.kafka.commits._offset_committer import OffsetCommitter
    from sparkbarrier.connectors.kafka._metrics import SourceMetrics

    topic, group = _names(manifest)
    plain.create_topic(topic)
    values = plain.produce(topic, 40)
    options = {**scram_jks(manifest, "nogroup"), "subscribe": topic, "kafka.group.id": group,
               "startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"}
    ckpt = tmp_path / "ckpt"
    got = _run(spark, options, str(ckpt))
    assert sorted(got) == sorted(values) and len(set(got)) == len(got)  # every record once
    assert plain.group_offsets(group) == {}  # Spark's checkpoint decided, the group could not
    # The committer as the driver runs it: the broker's reason logged, the failure counted.
    caplog.set_level(logging.WARNING)
    metrics = SourceMetrics()
    committer = OffsetCommitter(parse_source_options(options).admin_configs(), group, metrics)
    try:
        assert committer.commit(1, 0, {TopicPartition(topic, 0): 5}) is False
    finally:
        committer.close()
    assert "committing checkpoint 1" in caplog.text and "uthorization" in caplog.text
    assert metrics.snapshot()["commits_failed"] == 1
    # status, with Kafka's --command-config, shows the group behind Spark's checkpoint.
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                     "required \\\n  username=\"reader\" \\\n"
                     f"  password=\"{manifest['users']['reader']}\";\n"
                     f"ssl.truststore.location={manifest['ca']['jks']}\n"
                     f"ssl.truststore.password={manifest['store_password']}\n")
    assert main(["status", "--group", group, "--bootstrap", manifest["sasl_ssl"],
                 "--command-config", str(props), "--checkpoint-location", str(ckpt)]) == 0
    out = capsys.readouterr()
    assert f"group {group} is behind Spark's checkpoint" in out.out
    for secret in _secrets(manifest):
        assert secret not in out.out + out.err + caplog.text


@pytest.mark.spark
def test_no_secret_in_explain(spark, manifest, capsys) -> None:
    """Spark redacts options whose key or value matches spark.redaction.regex (password)."""
    from kafka_testkit import stream

    df = stream(spark, {**scram_jks(manifest), "subscribe": "secure-x", "kafka.group.id": "g"})
    df.explain(True)
    plan = capsys.readouterr().out
    assert "kafka.sasl.jaas.config" in plan  # the option is there, its value is not
    for secret in _secrets(manifest):
        assert secret not in plan


@pytest.mark.spark
def test_wrong_password_stops_the_query_at_start_with_the_reason(spark, manifest, tmp_path) -> None:
    """Through Spark: the query fails before its first batch, in seconds (not after the
    lookup retries), naming the option; the password is in no part of the error."""
    import time

    wrong = "not-the-password-5533"
    options = {**scram_jks(manifest, password=wrong), "subscribe": "secure-x",
               "kafka.group.id": "secure-g"}
    t0 = time.monotonic()
    query, got = start(spark, options, str(tmp_path / "ckpt"), available_now=True)
    from pyspark.errors import StreamingQueryException

    try:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(90)
        error = str(failed.value)
    finally:
        query.stop()
    assert time.monotonic() - t0 < 60
    assert "refused the login" in error and "kafka.sasl.jaas.config" in error
    assert wrong not in error and got.all_data() == []
