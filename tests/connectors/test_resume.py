"""``starting_offsets_from_sink`` against real HBase (and Kafka for partition filling).

It reaches the cluster the way the query did: HBase through the sink's ``hbase.*``
options (here also the devstack's TLS gateway and a Kerberized HBase), Kafka through
Spark's ``kafka.*`` option names (here also the devstack's SASL_SSL listener with
SCRAM and a JKS truststore, written exactly as for ``format("kafka")``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hbase_clients import thrift1
from kafka import KafkaAdminClient

from sparkbarrier import ConfigError, KerberosError, SinkError
from sparkbarrier.connectors import starting_offsets_from_sink
from sparkbarrier.connectors.hbase.sink._commit_table import (
    COMMIT_COLUMN,
    CommitRecord,
    ensure_commit_table,
    put_cell,
)
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(120)]


def _write(conn: HBaseConnection, commit_table: str, sink_id: str, offsets: dict[str, int]) -> None:
    try:
        ensure_commit_table(conn, commit_table)
        record = CommitRecord(sink_id=sink_id, table="t", seq=1, query_id="q", batch_id=4,
                              ts_lo=1_700_000_000_000, ts_hi=1_700_000_000_009,
                              read_bound=1_700_000_000_009, offsets=offsets)
        put_cell(conn, commit_table, sink_id, COMMIT_COLUMN, record.to_bytes())
    finally:
        conn.close()


def _commit(thrift: tuple[str, int], commit_table: str, sink_id: str, offsets: dict[str, int]) -> None:
    _write(thrift1(*thrift), commit_table, sink_id, offsets)


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()


def test_offsets_come_back_as_starting_offsets_json(hbase_thrift, unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "s1", {"orders:1": 7, "orders:0": 5, "refunds:0": 0})
    got = starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table)
    assert json.loads(got) == {"orders": {"0": 5, "1": 7}, "refunds": {"0": 0}}
    # The sink's own option map says the same (the positional host, port is a shorthand of it).
    options = {"hbase.thrift.host": f"{hbase_thrift[0]}:{hbase_thrift[1]}"}
    assert starting_offsets_from_sink(sink_id="s1", options=options, commit_table=table) == got
    # The query's whole sink map works as it is: sink.id and commit.table come from it, the
    # keys that only say how to write are passed over.
    sink_map = {**options, "sink.id": "s1", "commit.table": table, "table": "t", "rowkey": "id",
                "op.column": "op", "create.table": "true", "checkpointLocation": "/ckpt"}
    assert starting_offsets_from_sink(options=sink_map) == got


def test_commit_without_source_offsets_is_a_clear_error(hbase_thrift, unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "s1", {})
    with pytest.raises(SinkError, match="without source offsets.*keep_markers") as info:
        starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table)
    # Behind Spark's format("kafka") the offsets come from the checkpoint's offset log on the
    # driver: the error names what lets it read an hdfs:// checkpoint.
    assert "offset log" in str(info.value)
    assert "SPARKBARRIER_WEBHDFS" in str(info.value) and "HADOOP_CONF_DIR" in str(info.value)


def test_sink_without_commit_is_a_clear_error(hbase_thrift, unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "other", {"t:0": 1})
    with pytest.raises(SinkError, match="committed nothing"):
        starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table)


@pytest.mark.kafka
def test_partitions_never_committed_start_at_earliest(hbase_thrift, kafka_bootstrap, unique_name) -> None:
    topic, table = unique_name("resume"), unique_name("commits")
    _create_topic(kafka_bootstrap, topic, 3)
    _commit(hbase_thrift, table, "s1", {f"{topic}:1": 9})
    got = starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table,
                                     bootstrap_servers=kafka_bootstrap)
    assert json.loads(got) == {topic: {"0": -2, "1": 9, "2": -2}}
    same = starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table,
                                      kafka_options={"kafka.bootstrap.servers": kafka_bootstrap})
    assert same == got


@pytest.mark.parametrize("kafka_options, named", [
    ({"subscribe": "t", "kafka.bootstrap.servers": "b:9092"}, "subscribe"),
    ({"kafka.security.protocol": "SASL_SSL"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "SSL",
      "kafka.sasl.jaas.config": "x"}, "kafka.sasl.jaas.config"),
    ({"kafka.bootstrap.servers": "b:9092", "kafka.ssl.truststore.location": "/x.jks",
      "kafka.ssl.truststore.password": "p"}, "kafka.ssl.truststore.location"),
])
def test_a_bad_kafka_option_is_refused_naming_it_before_any_connection(kafka_options: dict[str, str],
                                                                         named: str) -> None:
    with pytest.raises(ConfigError) as info:
        starting_offsets_from_sink("127.0.0.1", 1, "s1", kafka_options=kafka_options)
    assert info.value.option == named


def test_the_bootstrap_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="given twice") as info:
        starting_offsets_from_sink("127.0.0.1", 1, "s1", bootstrap_servers="a:9092",
                                   kafka_options={"kafka.bootstrap.servers": "b:9092"})
    assert info.value.option == "kafka.bootstrap.servers"


# ----------------------------------------------------------------------------- TLS + SASL_SSL
@pytest.fixture(scope="module")
def tls_gateway(every_gateway: Any) -> tuple[str, int, str]:
    """``(host, port, CA file)`` of the devstack's TLS Thrift1 gateway (Thrift over HTTPS)."""
    servers = every_gateway
    assert servers.hbase_tls is not None and servers.hbase_tls_ca, "no TLS gateway (SPARKBARRIER_HBASE_THRIFT_TLS)"
    return (*servers.hbase_tls, servers.hbase_tls_ca)


@pytest.fixture(scope="module")
def kafka_security(servers: Any) -> dict[str, Any]:
    """The devstack's secured Kafka listeners (SASL_SSL with SCRAM users, ACLs on ``secure-*``)."""
    path = os.environ.get("SPARKBARRIER_KAFKA_SECURITY")
    if not path:
        from sparkbarrier.devstack import Devstack

        path = Devstack().up().env()["SPARKBARRIER_KAFKA_SECURITY"]
    return json.loads(Path(path).read_text())


def _tls_options(tls_gateway: tuple[str, int, str]) -> dict[str, str]:
    host, port, ca = tls_gateway
    return {"hbase.thrift.host": f"{host}:{port}", "hbase.thrift.tls": "true", "hbase.thrift.tls.ca": ca}


@pytest.mark.kafka
def test_resume_from_a_tls_gateway_and_a_sasl_ssl_kafka_with_spark_option_names(
        hbase_thrift, kafka_bootstrap, tls_gateway, kafka_security, unique_name) -> None:
    m = kafka_security
    topic, table = f"{m['topic_prefix']}resume_{uuid.uuid4().hex[:8]}", unique_name("commits")
    _create_topic(kafka_bootstrap, topic, 3)  # as the super user, on the PLAINTEXT listener
    _commit(hbase_thrift, table, "s1", {f"{topic}:2": 11})
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="reader" password="{m["users"]["reader"]}";')
    kafka = {"kafka.bootstrap.servers": m["sasl_ssl"], "kafka.security.protocol": "SASL_SSL",
             "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": jaas,
             "kafka.ssl.truststore.location": m["ca"]["jks"],
             "kafka.ssl.truststore.password": m["store_password"]}
    got = starting_offsets_from_sink(sink_id="s1", options=_tls_options(tls_gateway), commit_table=table,
                                     kafka_options=kafka)
    assert json.loads(got) == {topic: {"0": -2, "1": -2, "2": 11}}


def test_resume_through_tls_without_the_ca_fails_naming_the_tls_options(tls_gateway, hbase_thrift,
                                                                         unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "s1", {"t:0": 1})
    host, port, _ = tls_gateway
    # TLS on, the system trust store: the devstack's own CA is not in it; not retried.
    options = {"hbase.thrift.host": f"{host}:{port}", "hbase.thrift.tls": "true"}
    with pytest.raises(SinkError, match="certificate verify failed") as info:
        starting_offsets_from_sink(sink_id="s1", options=options, commit_table=table)
    assert "hbase.thrift.tls.ca" in str(info.value)


def test_a_missing_ca_file_is_a_config_error_naming_the_option_at_once(tls_gateway, tmp_path: Path) -> None:
    options = {**_tls_options(tls_gateway), "hbase.thrift.tls.ca": str(tmp_path / "gone.pem"),
               "hbase.thrift.failover.rounds": "3", "hbase.thrift.failover.backoff": "1000"}
    started = time.monotonic()
    with pytest.raises(ConfigError, match="cannot read the CA file") as info:
        starting_offsets_from_sink(sink_id="s1", options=options)
    assert info.value.option == "hbase.thrift.tls.ca"
    assert time.monotonic() - started < 1, "a missing file is the same on every gateway: not retried"


# ----------------------------------------------------------------------------- Kerberos
def _kerberos_options(kdc: Any, gateway: tuple[str, int]) -> dict[str, str]:
    principal, keytab = kdc.keytab("client")
    return {"hbase.thrift.host": "%s:%d" % gateway, "hbase.thrift.authentication": "kerberos",
            "hbase.thrift.kerberos.client.principal": principal, "hbase.thrift.kerberos.client.keytab": keytab,
            "hbase.thrift.timeout": "30000"}


@pytest.mark.slow
@pytest.mark.timeout(600)  # the first Kerberos test of a session starts the KDC and the HBase
def test_resume_from_a_kerberized_hbase(kdc, kerberos_hbase, unique_name) -> None:
    table = unique_name("commits")
    options = _kerberos_options(kdc, kerberos_hbase.thrift_conf)  # qop auth-conf: every frame sealed
    _write(HBaseConnection(connection_options(options)), table, "s1", {"orders:0": 3, "orders:1": 8})
    got = starting_offsets_from_sink(sink_id="s1", options=options, commit_table=table)
    assert json.loads(got) == {"orders": {"0": 3, "1": 8}}
    # The keyword shorthands and the option map meet in one parse, as for the readers.
    principal, keytab = kdc.keytab("client")
    shorthand = starting_offsets_from_sink(*kerberos_hbase.thrift_conf, "s1", commit_table=table,
                                           options={"hbase.thrift.authentication": "kerberos",
                                                    "hbase.thrift.kerberos.client.principal": principal,
                                                    "hbase.thrift.kerberos.client.keytab": keytab})
    assert shorthand == got


def test_a_keytab_this_machine_cannot_read_names_the_keytab_option_at_once(tmp_path: Path) -> None:
    """No KDC needed: the keytab is checked before any gateway is tried (these are all down)."""
    options = {"hbase.thrift.host": "127.0.0.1:1,127.0.0.1:2", "hbase.thrift.authentication": "kerberos",
               "hbase.thrift.kerberos.client.principal": "etl@EXAMPLE.COM",
               "hbase.thrift.kerberos.client.keytab": str(tmp_path / "gone.keytab")}
    started = time.monotonic()
    with pytest.raises(KerberosError) as info:
        starting_offsets_from_sink(sink_id="s1", options=options)
    assert info.value.option == "hbase.thrift.kerberos.client.keytab" and "--files" in str(info.value)
    assert "cannot reach" not in str(info.value) and time.monotonic() - started < 1


def test_an_unknown_hbase_option_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match="hbase.thrift.kerberos.client.keytabs") as info:
        starting_offsets_from_sink("localhost", 1, "s1", options={"hbase.thrift.kerberos.client.keytabs": "/k"})
    assert info.value.option == "hbase.thrift.kerberos.client.keytabs"


def test_a_typo_in_the_sink_map_is_refused_and_its_ids_must_agree() -> None:
    with pytest.raises(ConfigError, match="'rowkeys'") as info:
        starting_offsets_from_sink(options={"hbase.thrift.host": "localhost:1", "sink.id": "s1", "rowkeys": "id"})
    assert info.value.option == "rowkeys"
    with pytest.raises(ConfigError, match="given twice") as info:
        starting_offsets_from_sink(sink_id="s2", options={"hbase.thrift.host": "localhost:1", "sink.id": "s1"})
    assert info.value.option == "sink.id"
