"""Spark's security option names -> every client's settings: unit tests, no broker.

The stores are real (made by ``tls_stores``); the conversion is checked by reading its
output back, and every error by the option it names and the secret it must not show.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from tls_stores import PASSWORD, Stores, make_stores

from sparkbarrier import ConfigError
from sparkbarrier.connectors.kafka import parse_source_options

BASE = {"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t", "kafka.group.id": "g"}
SECRET = "pw-of-alice-7431"
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         f'username="alice" password="{SECRET}";')


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return make_stores(tmp_path_factory.mktemp("stores"))


def _spark(stores: Stores, **extra: str) -> dict[str, str]:
    return {**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": SCRAM, **extra}


def _subjects(path: str) -> list[str]:
    return [c.subject.rfc4514_string() for c in
            x509.load_pem_x509_certificates(Path(path).read_bytes())]


def _private(path: str) -> bool:
    return stat.S_IMODE(os.stat(path).st_mode) == 0o600 and \
        stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700


@pytest.mark.parametrize("kind", ["JKS", "PKCS12", "PEM"])
def test_spark_truststore_of_every_type_becomes_the_same_ca_for_all_clients(stores, kind) -> None:
    location = {"JKS": stores.ca_jks, "PKCS12": stores.ca_p12, "PEM": stores.ca_pem}[kind]
    o = parse_source_options(_spark(stores, **{
        "kafka.ssl.truststore.location": str(location), "kafka.ssl.truststore.type": kind,
        "kafka.ssl.truststore.password": PASSWORD}))
    py, rd = o.consumer_configs(), o.librdkafka_settings()
    assert py["ssl_cafile"] == rd["ssl.ca.location"]
    assert _subjects(py["ssl_cafile"]) == ["CN=unit-ca"]
    if kind != "PEM":
        assert _private(py["ssl_cafile"])
    assert py["sasl_plain_username"] == rd["sasl.username"] == "alice"
    assert py["sasl_plain_password"] == rd["sasl.password"] == SECRET
    assert py["sasl_mechanism"] == rd["sasl.mechanism"] == "SCRAM-SHA-512"
    assert py["security_protocol"] == rd["security.protocol"] == "SASL_SSL"
    assert py["ssl_check_hostname"] is True
    assert rd["ssl.endpoint.identification.algorithm"] == "https"
    assert SECRET not in repr(o) and PASSWORD not in repr(o)


def test_truststore_type_defaults_to_jks_as_in_java(stores) -> None:
    o = parse_source_options(_spark(stores, **{
        "kafka.ssl.truststore.location": str(stores.ca_jks),
        "kafka.ssl.truststore.password": PASSWORD}))
    assert _subjects(o.consumer_configs()["ssl_cafile"]) == ["CN=unit-ca"]


@pytest.mark.parametrize("kind", ["PKCS12", "JKS"])
def test_keystore_gives_mtls_material_with_an_encrypted_private_key(stores, kind) -> None:
    location = stores.client_p12 if kind == "PKCS12" else stores.client_jks
    o = parse_source_options({**BASE, "kafka.security.protocol": "SSL",
                              "kafka.ssl.truststore.location": str(stores.ca_p12),
                              "kafka.ssl.truststore.type": "PKCS12",
                              "kafka.ssl.truststore.password": PASSWORD,
                              "kafka.ssl.keystore.location": str(location),
                              "kafka.ssl.keystore.type": kind,
                              "kafka.ssl.keystore.password": PASSWORD,
                              "kafka.ssl.key.password": PASSWORD})
    py, rd = o.consumer_configs(), o.librdkafka_settings()
    assert _subjects(py["ssl_certfile"])[0] == "CN=reader"
    key = Path(py["ssl_keyfile"]).read_bytes()
    assert b"ENCRYPTED PRIVATE KEY" in key and _private(py["ssl_keyfile"])
    assert py["ssl_password"] == rd["ssl.key.password"] != PASSWORD
    assert rd["ssl.certificate.location"] == py["ssl_certfile"]
    assert "sasl.username" not in rd and "sasl_mechanism" not in py


def test_stores_are_converted_once_per_process(stores) -> None:
    raw = _spark(stores, **{"kafka.ssl.truststore.location": str(stores.ca_jks),
                            "kafka.ssl.truststore.password": PASSWORD})
    first = parse_source_options(raw).consumer_configs()["ssl_cafile"]
    assert parse_source_options(raw).consumer_configs()["ssl_cafile"] == first


@pytest.mark.parametrize("kind,location", [("JKS", "ca_jks"), ("PKCS12", "ca_p12")])
def test_wrong_store_password_fails_at_query_start_naming_the_option(stores, kind, location) -> None:
    wrong = "not-the-password-99"
    with pytest.raises(ConfigError) as err:
        parse_source_options(_spark(stores, **{
            "kafka.ssl.truststore.location": str(getattr(stores, location)),
            "kafka.ssl.truststore.type": kind, "kafka.ssl.truststore.password": wrong}))
    assert err.value.option == "kafka.ssl.truststore.password"
    assert wrong not in str(err.value) and SECRET not in str(err.value)


def test_missing_store_file_names_the_option_and_how_to_ship_it(stores, tmp_path) -> None:
    with pytest.raises(ConfigError, match="--files") as err:
        parse_source_options(_spark(stores, **{
            "kafka.ssl.truststore.location": str(tmp_path / "nope.jks"),
            "kafka.ssl.truststore.password": PASSWORD}))
    assert err.value.option == "kafka.ssl.truststore.location"


def test_empty_identification_algorithm_turns_hostname_checks_off_as_in_java(stores) -> None:
    o = parse_source_options(_spark(stores, **{
        "kafka.ssl.truststore.location": str(stores.ca_pem), "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.endpoint.identification.algorithm": ""}))
    assert o.consumer_configs()["ssl_check_hostname"] is False
    assert o.librdkafka_settings()["ssl.endpoint.identification.algorithm"] == "none"
    with pytest.raises(ConfigError, match="https"):
        parse_source_options(_spark(stores, **{
            "kafka.ssl.endpoint.identification.algorithm": "ldap"}))


def test_kafka_python_spellings_keep_working(stores) -> None:
    o = parse_source_options({**BASE, "kafka.security.protocol": "SASL_SSL",
                              "kafka.sasl.mechanism": "PLAIN",
                              "kafka.sasl.plain.username": "bob",
                              "kafka.sasl.plain.password": SECRET,
                              "kafka.ssl.cafile": str(stores.ca_pem),
                              "kafka.ssl.certfile": str(stores.client_pem),
                              "kafka.ssl.keyfile": str(stores.client_pem),
                              "kafka.ssl.password": PASSWORD,
                              "kafka.ssl.check.hostname": "false"})
    rd = o.librdkafka_settings()
    assert rd["ssl.ca.location"] == str(stores.ca_pem)
    assert rd["ssl.certificate.location"] == rd["ssl.key.location"] == str(stores.client_pem)
    assert rd["ssl.key.password"] == PASSWORD
    assert rd["ssl.endpoint.identification.algorithm"] == "none"
    assert (rd["sasl.username"], rd["sasl.password"]) == ("bob", SECRET)


@pytest.mark.parametrize("extra,option,words", [
    ({"kafka.sasl.mechanism": "GSSAPI"}, "kafka.sasl.jaas.config",
     "ScramLoginModule, but kafka.sasl.mechanism=GSSAPI needs .*Krb5LoginModule"),
    ({"kafka.sasl.mechanism": "OAUTHBEARER"}, "kafka.sasl.mechanism", "OAUTHBEARER"),
    ({"kafka.sasl.mechanism": None, "kafka.sasl.jaas.config": None}, "kafka.sasl.jaas.config",
     "Java's default is GSSAPI"),
    ({"kafka.sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required '
      'useKeyTab=true keyTab="/k" principal="p@R";'}, "kafka.sasl.jaas.config",
     "names Krb5LoginModule, but kafka.sasl.mechanism=SCRAM-SHA-512"),
    ({"kafka.sasl.kerberos.service.name": "kafka"}, "kafka.sasl.kerberos.service.name",
     "Kerberos setting, but kafka.sasl.mechanism is SCRAM-SHA-512"),
    ({"kafka.sasl.mechanism": "PLAIN"}, "kafka.sasl.jaas.config", "PlainLoginModule"),
    ({"kafka.sasl.jaas.config": f"broken {SECRET}"}, "kafka.sasl.jaas.config", "JAAS line"),
    ({"kafka.sasl.jaas.config": None}, "kafka.sasl.jaas.config", "credentials"),
    ({"kafka.security.protocol": "SSL"}, "kafka.sasl.mechanism", "does not use SASL"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.ssl.truststore.location": "/x"},
     "kafka.ssl.truststore.location", "does not use TLS"),
    ({"kafka.security.protocol": "TLS"}, "kafka.security.protocol", "SASL_SSL"),
    ({"kafka.ssl.protocol": "TLSv1.1"}, "kafka.ssl.protocol", "TLS 1.2 or 1.3"),
    ({"kafka.ssl.truststore.location": "/x", "kafka.ssl.truststore.type": "BKS"},
     "kafka.ssl.truststore.type", "JKS, PKCS12 or PEM"),
    ({"kafka.ssl.truststore.location": "/x"}, "kafka.ssl.truststore.password", "required"),
    ({"kafka.ssl.truststore.location": "/x", "kafka.ssl.cafile": "/y"}, "kafka.ssl.cafile",
     "not both"),
])
def test_security_mistakes_fail_at_query_start_naming_option_never_the_secret(
        stores, extra, option, words, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    raw = {k: v for k, v in {**_spark(stores), **extra}.items() if v is not None}
    with pytest.raises(ConfigError, match=words) as err:
        parse_source_options(raw)
    assert err.value.option == option
    assert SECRET not in str(err.value) and SECRET not in caplog.text
    assert "remove it" not in str(err.value)


def test_java_tls_defaults_are_accepted(stores) -> None:
    parse_source_options(_spark(stores, **{
        "kafka.ssl.truststore.location": str(stores.ca_pem), "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.protocol": "TLSv1.3", "kafka.ssl.enabled.protocols": "TLSv1.2, TLSv1.3",
        "kafka.ssl.keymanager.algorithm": "SunX509", "kafka.ssl.trustmanager.algorithm": "PKIX"}))


def test_inline_pem_truststore(stores) -> None:
    o = parse_source_options(_spark(stores, **{
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": stores.ca_pem.read_text()}))
    assert _subjects(o.librdkafka_settings()["ssl.ca.location"]) == ["CN=unit-ca"]
