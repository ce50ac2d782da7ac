"""The Kerberized Kafka broker (``devstack/_kafka_kerberos.py``): start, reuse, ownership.

Runs on the session's broker (fixture ``kerberos_kafka``); logging in and reading
through it is covered by tests/connectors/kafka/test_kerberos_source.py.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def _broker(kdc):  # noqa: ANN001, ANN202 -- the session's KdcManifest
    from sparkbarrier.devstack._kafka_kerberos import KerberosKafka

    home = Path(os.environ["KRB5_CONFIG"]).parents[2]  # <KERBEROS_HOME>/data/kdc/krb5.conf
    return KerberosKafka(home, kdc)


def test_up_again_reuses_the_running_broker(kdc, kerberos_kafka) -> None:
    from sparkbarrier.devstack._process import ProcessRecord, is_ours

    broker = _broker(kdc)
    record = ProcessRecord.load(broker.paths.run, "kafka-kerberos")
    assert record is not None and is_ours(record)
    assert record.marker == f"-Dsparkbarrier.devstack=kafka-kerberos@{broker.paths.home}"
    assert broker.up() == kerberos_kafka == broker.endpoints()
    again = ProcessRecord.load(broker.paths.run, "kafka-kerberos")
    assert again is not None and again.pid == record.pid


def test_listeners_are_advertised_as_localhost_for_kerberos(kerberos_kafka) -> None:
    assert kerberos_kafka.sasl_plaintext.startswith("localhost:")
    assert kerberos_kafka.sasl_ssl.startswith("localhost:")
    assert kerberos_kafka.plaintext.startswith("127.0.0.1:")
    assert kerberos_kafka.service_name == "kafka"


def test_store_password_and_key_material_stay_private(kdc, kerberos_kafka) -> None:
    data = _broker(kdc).data
    assert stat.S_IMODE((data / "server.properties").stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "tls").stat().st_mode) == 0o700
