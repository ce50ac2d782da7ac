"""GSSAPI options as Spark users write them -> one Kerberos login: unit tests, no KDC.

Every mistake fails at query start (``parse_source_options``) naming the option; the
client choice for GSSAPI is made there too.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sparkbarrier import ConfigError
from sparkbarrier.connectors.kafka import parse_source_options
from sparkbarrier.connectors.kafka.client._client_config import ConsumerClient
from sparkbarrier.connectors.kerberos._settings import KerberosSettings
from sparkbarrier.connectors.kafka.client._kerberos import KerberosLogin, librdkafka_gssapi

BASE = {"kafka.bootstrap.servers": "broker1.example:9092", "subscribe": "t",
        "kafka.group.id": "g"}
JAAS = "kafka.sasl.jaas.config"
SERVICE = "kafka.sasl.kerberos.service.name"


@pytest.fixture
def keytab(tmp_path: Path) -> str:
    """A file with a keytab's header (its keys are never read by option parsing)."""
    path = tmp_path / "client.keytab"
    path.write_bytes(b"\x05\x02" + b"\x00" * 30)
    return str(path)


def _krb5(line: str) -> str:
    return f"com.sun.security.auth.module.Krb5LoginModule required {line};"


def _gssapi(keytab: str, **extra: str | None) -> dict[str, str]:
    raw = {**BASE, "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "GSSAPI",
           SERVICE: "kafka",
           JAAS: _krb5(f'useKeyTab=true storeKey=true keyTab="{keytab}" '
                       f'principal="client@EXAMPLE.COM"'), **extra}
    return {k: v for k, v in raw.items() if v is not None}


def test_keytab_login_as_spark_users_write_it(keytab: str) -> None:
    o = parse_source_options(_gssapi(keytab))
    assert o.security.kerberos == KerberosSettings(service="kafka", principal="client@EXAMPLE.COM",
                                                   keytab=keytab)
    py = o.consumer_configs()
    assert py["security_protocol"] == "SASL_PLAINTEXT" and py["sasl_mechanism"] == "GSSAPI"
    assert py["sasl_kerberos_service_name"] == "kafka"
    assert isinstance(py["sasl_kerberos_name"], KerberosLogin)
    assert "sasl_plain_password" not in py


def test_auto_reads_gssapi_with_kafka_python_and_says_why_once(keytab: str, caplog) -> None:
    from sparkbarrier.connectors.kafka.reader import _reader_choice

    _reader_choice._tell_gssapi_choice.cache_clear()
    caplog.set_level(logging.INFO, logger=_reader_choice.__name__)
    for _ in range(2):
        o = parse_source_options(_gssapi(keytab))
        assert o.consumer_client is ConsumerClient.KAFKA_PYTHON
        assert o.librdkafka_configs == {}
    lines = [r.getMessage() for r in caplog.records if "reads with kafka-python" in r.getMessage()]
    assert len(lines) == 1 and "built without GSSAPI" in lines[0]
    explicit = parse_source_options(_gssapi(keytab, **{"kafkaConsumer.client": "kafka-python"}))
    assert explicit.consumer_client is ConsumerClient.KAFKA_PYTHON


@pytest.mark.parametrize("client", ["native", "confluent"])
def test_explicit_librdkafka_client_with_gssapi_fails_at_query_start(keytab: str,
                                                                     client: str) -> None:
    with pytest.raises(ConfigError, match="kafka.sasl.mechanism=GSSAPI and .*librdkafka .*"
                                          "kafkaConsumer.client=auto or kafka-python") as err:
        parse_source_options(_gssapi(keytab, **{"kafkaConsumer.client": client}))
    assert err.value.option == "kafkaConsumer.client"


def test_this_librdkafka_reports_no_gssapi_by_version() -> None:
    import confluent_kafka

    reason = librdkafka_gssapi()
    assert f"librdkafka {confluent_kafka.libversion()[0]}" in reason
    assert "built without GSSAPI" in reason


def test_service_name_may_come_from_the_jaas_line_as_in_java(keytab: str) -> None:
    o = parse_source_options(_gssapi(keytab, **{SERVICE: None, JAAS: _krb5(
        f'useKeyTab=true keyTab="{keytab}" principal="c@R" serviceName="kafka2"')}))
    assert o.security.kerberos.service == "kafka2"


def test_ticket_cache_login_needs_no_keytab(tmp_path: Path) -> None:
    o = parse_source_options(_gssapi("x", **{JAAS: _krb5("useTicketCache=true")}))
    assert o.security.kerberos == KerberosSettings(service="kafka", use_ticket_cache=True)


def test_escaped_quotes_in_a_keytab_path_are_unescaped(tmp_path: Path) -> None:
    odd = tmp_path / 'a"b.keytab'
    odd.write_bytes(b"\x05\x02")
    o = parse_source_options(_gssapi("x", **{JAAS: _krb5(
        'useKeyTab=true keyTab="' + str(odd).replace('"', '\\"') + '" principal="c@R"')}))
    assert o.security.kerberos.keytab == str(odd)


@pytest.mark.parametrize("extra,option,words", [
    ({SERVICE: None}, SERVICE, "required with GSSAPI"),
    ({JAAS: None}, JAAS, "Krb5LoginModule required useKeyTab=true"),
    ({JAAS: _krb5('useKeyTab=true principal="c@R"')}, JAAS, "needs keyTab="),
    ({JAAS: _krb5('useKeyTab=true keyTab="{kt}"')}, JAAS, "principal="),
    ({JAAS: _krb5('keyTab="{kt}" principal="c@R"')}, JAAS, "not useKeyTab=true"),
    ({JAAS: _krb5('principal="c@R"')}, JAAS, "prompt for a password"),
    ({JAAS: _krb5('useTicketCache=yes')}, JAAS, "true or false"),
    ({JAAS: _krb5('ticketCache="/tmp/c" useKeyTab=true keyTab="{kt}" principal="c@R"')}, JAAS,
     "not useTicketCache=true"),
    ({JAAS: _krb5('useTicketCache=true useFirstPass=true')}, JAAS, "password login"),
    ({JAAS: _krb5('useTicketCache=true keytab="{kt}"')}, JAAS, "no option 'keytab'"),
    ({JAAS: _krb5('useTicketCache=true isInitiator=false')}, JAAS, "isInitiator=false"),
    ({JAAS: _krb5('useKeyTab=true keyTab="/nonexistent/k.keytab" principal="c@R"')}, JAAS,
     "cannot read keyTab '/nonexistent/k.keytab'.*--files"),
    ({"kafka.sasl.kerberos.kinit.cmd": "kinit -R"}, "kafka.sasl.kerberos.kinit.cmd", "without kinit"),
    ({"kafka.sasl.kerberos.name": "kafka@h"}, "kafka.sasl.kerberos.name",
     "kafka.sasl.kerberos.service.name"),
    ({"kafka.sasl.mechanism": None, JAAS: None}, JAAS, "Java's default is GSSAPI"),
    ({"kafka.sasl.mechanism": None, JAAS: 'org.apache.kafka.common.security.scram.'
      'ScramLoginModule required username="u" password="p";'}, JAAS,
     "mechanism=GSSAPI \\(unset: Java's default; set kafka.sasl.mechanism\\)"),
    ({JAAS: "Krb5LoginModule"}, JAAS, 'required useKeyTab=true keyTab="..." principal="..."'),
])
def test_kerberos_mistakes_fail_at_query_start_naming_the_option(
        keytab: str, extra: dict[str, str | None], option: str, words: str) -> None:
    extra = {k: (v.replace("{kt}", keytab) if v else v) for k, v in extra.items()}
    with pytest.raises(ConfigError, match=words) as err:
        parse_source_options(_gssapi(keytab, **extra))
    assert err.value.option == option


def test_a_file_that_is_no_keytab_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "not-a-keytab"
    other.write_text("[libdefaults]\n")
    with pytest.raises(ConfigError, match="is not a Kerberos keytab") as err:
        parse_source_options(_gssapi(str(other)))
    assert err.value.option == JAAS


def test_relogin_tuning_is_accepted_with_gssapi_only(keytab: str) -> None:
    knob = "kafka.sasl.kerberos.ticket.renew.window.factor"
    parse_source_options(_gssapi(keytab, **{knob: "0.8"}))
    with pytest.raises(ConfigError, match="Kerberos setting") as err:
        parse_source_options({**BASE, "kafka.security.protocol": "SASL_PLAINTEXT",
                              "kafka.sasl.mechanism": "PLAIN", knob: "0.8",
                              JAAS: 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                    'required username="u" password="p";'})
    assert err.value.option == knob


def test_jaas_line_never_reaches_the_safe_options_or_a_repr(keytab: str) -> None:
    o = parse_source_options(_gssapi(keytab))
    assert o.safe_options[JAAS] == "***"
    assert "Krb5LoginModule" not in repr(o)


def test_client_settings_survive_pickling_to_another_process(keytab: str) -> None:
    """A fresh interpreter that unpickles the settings gets the mechanism registered."""
    import pickle
    import subprocess
    import sys

    settings = parse_source_options(_gssapi(keytab)).consumer_configs()
    code = ("import pickle, sys\n"
            "s = pickle.loads(sys.stdin.buffer.read())\n"
            "from kafka.net.sasl import get_sasl_mechanism\n"
            "print(get_sasl_mechanism('GSSAPI').__name__, s['sasl_kerberos_name'].kerberos.principal)\n")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(settings),
                          capture_output=True, timeout=60, check=True)
    assert done.stdout.decode().split() == ["_QueryGSSAPI", "client@EXAMPLE.COM"]
