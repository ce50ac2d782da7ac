"""The devstack's secured listeners, checked with kafka-python directly (the source's
own mapping has its tests in tests/connectors/kafka/test_secured_source.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.errors import KafkaError

pytestmark = [pytest.mark.kafka]


@pytest.fixture(scope="module")
def manifest(servers) -> dict:  # noqa: ANN001
    from sparkbarrier.devstack import Devstack

    path = os.environ.get("SPARKBARRIER_KAFKA_SECURITY") or \
        Devstack().up().env()["SPARKBARRIER_KAFKA_SECURITY"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    return json.loads(Path(path).read_text())


def _scram(m: dict, user: str, password: str, **extra) -> dict:
    return {"bootstrap_servers": m["sasl_ssl"], "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
            "sasl_plain_password": password, "ssl_cafile": m["ca"]["pem"], **extra}


def test_manifest_names_every_listener_store_and_user(manifest) -> None:
    assert {"sasl_ssl", "ssl", "sasl_ssl_wrong_host", "plaintext"} <= set(manifest)
    assert set(manifest["users"]) == {"admin", "reader", "nogroup", "norights"}
    for group in ("ca", "other_ca", "client"):
        for key, path in manifest[group].items():
            if key != "cn":
                assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_scram_login_works_and_a_wrong_password_does_not(manifest) -> None:
    ok = KafkaConsumer(**_scram(manifest, "reader", manifest["users"]["reader"]))
    try:
        ok.topics()
    finally:
        ok.close()
    with pytest.raises(KafkaError):
        KafkaConsumer(**_scram(manifest, "reader", "wrong-password", bootstrap_timeout_ms=3000))


def test_mtls_connects_with_the_client_certificate_and_its_cn_is_the_principal(
        manifest, kafka_bootstrap: str) -> None:
    import uuid

    plain = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    tag = uuid.uuid4().hex[:8]
    visible, hidden = f"{manifest['topic_prefix']}mtls_{tag}", f"other_mtls_{tag}"
    try:
        plain.create_topics({visible: {"num_partitions": 1, "replication_factor": 1},
                             hidden: {"num_partitions": 1, "replication_factor": 1}},
                            wait_for_metadata=True)
    finally:
        plain.close()
    consumer = KafkaConsumer(bootstrap_servers=manifest["ssl"], security_protocol="SSL",
                             ssl_cafile=manifest["ca"]["pem"],
                             ssl_certfile=manifest["client"]["cert_pem"],
                             ssl_keyfile=manifest["client"]["key_pem"])
    try:
        topics = consumer.topics()
    finally:
        consumer.close()
    assert visible in topics and hidden not in topics
