"""Kafka → Spark → HBase exactly once with both hops on Kerberos (issue 19).

A real MIT KDC (``kdc``), a Kafka broker whose clients log in with SASL/GSSAPI
(``kerberos_kafka``) and a Kerberos-secured HBase whose Thrift gateways take SASL/GSSAPI
(``kerberos_hbase``), all started once per session by the project's own devstack code.
``barrier-kafka`` reads with the client's keytab (the options a Spark user writes for
``format("kafka")``), ``barrier-hbase`` writes with the same keytab through two gateways
of different QOPs. Setup and checks of Kafka go through the broker's PLAINTEXT listener;
HBase is checked through Kerberos (it has no other door).

Exactly once is checked the hard way: after the first run Spark forgets that it
committed its last batch and replays it, then more events arrive and a second run reads
them; the plain scan and the committed view must equal the events applied once, in
Kafka order, and the group's offsets must end at the topic's end with barrier-kafka's
commit metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from sparkbarrier.connectors import starting_offsets_from_sink
from sparkbarrier.connectors.hbase import KerberosSettings
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options

pytestmark = [pytest.mark.kafka, pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow]

PARTITIONS = 2
KEYS = 12
COMMITS = "sparkbarrier_commits_krb_pipeline"


def _events(start: int, count: int) -> list[tuple[int, dict[str, Any]]]:
    """``count`` keyed events (partition, json): upserts, and every fifth one a delete."""
    out = []
    for i in range(start, start + count):
        key = i % KEYS
        op = "delete" if i % 5 == 4 else "upsert"
        out.append((key % PARTITIONS, {"id": f"k{key:02d}", "v": f"v{i}", "op": op}))
    return out


def _apply(events: list[tuple[int, dict[str, Any]]]) -> dict[str, str]:
    """The table the events describe, applied once in order (one key lives in one partition)."""
    state: dict[str, str] = {}
    for _, event in events:
        if event["op"] == "delete":
            state.pop(event["id"], None)
        else:
            state[event["id"]] = event["v"]
    return state


def _produce(bootstrap: str, topic: str, events: list[tuple[int, dict[str, Any]]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition, event in events:
            producer.send(topic, key=event["id"].encode(), value=json.dumps(event).encode(),
                          partition=partition)
        producer.flush(timeout=60)
    finally:
        producer.close()


def _group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, str]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        out = {}
        for p in range(PARTITIONS):
            committed = consumer.committed(TopicPartition(topic, p), metadata=True)
            if committed is not None:
                out[p] = (committed.offset, committed.metadata)
        return out
    finally:
        consumer.close()


def _run(spark: Any, source: dict[str, str], sink: dict[str, str], ckpt: Path) -> list[int]:
    """One AvailableNow run of barrier-kafka → from_json → barrier-hbase; the batch ids it ran."""
    from pyspark.sql import functions as F

    raw = spark.readStream.format("barrier-kafka").options(**source).load()
    rows = raw.select(F.from_json(F.col("value").cast("string"), "id string, v string, op string")
                      .alias("j")).select("j.id", "j.v", "j.op")
    query = (rows.writeStream.format("barrier-hbase").options(**sink)
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(240), "the pipeline did not finish in 240 s"
        assert query.exception() is None, query.exception()
        return [p["batchId"] for p in query.recentProgress]
    finally:
        query.stop()


def test_pipeline_is_exactly_once_with_both_hops_on_kerberos(
        spark: Any, kdc: Any, kerberos_kafka: Any, kerberos_hbase: Any,
        unique_name: Callable[[str], str], tmp_path: Path) -> None:
    topic, group, table = unique_name("krbt"), unique_name("krbg"), unique_name("krbtab")
    admin = KafkaAdminClient(bootstrap_servers=kerberos_kafka.plaintext)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    first, second = _events(0, 120), _events(120, 80)
    _produce(kerberos_kafka.plaintext, topic, first)

    principal, keytab = kdc.keytab("client")
    source = {
        "kafka.bootstrap.servers": kerberos_kafka.sasl_plaintext,
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "GSSAPI",
        "kafka.sasl.kerberos.service.name": kerberos_kafka.service_name,
        "kafka.sasl.jaas.config": ("com.sun.security.auth.module.Krb5LoginModule required "
                                   f'useKeyTab=true keyTab="{keytab}" principal="{principal}";'),
        "subscribe": topic, "kafka.group.id": group, "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "50",
    }
    host = "localhost"
    sink = {
        "hbase.thrift.host": f"{host}:{kerberos_hbase.thrift[1]},{host}:{kerberos_hbase.thrift_conf[1]}",
        "hbase.thrift2.host": f"{host}:{kerberos_hbase.thrift2[1]}",
        "hbase.thrift.authentication": "kerberos",
        "hbase.thrift.kerberos.client.principal": principal,
        "hbase.thrift.kerberos.client.keytab": keytab,
        "table": table, "commit.table": COMMITS, "sink.id": table, "create.table": "true",
        "rowkey": "id", "op.column": "op", "hbase.thrift.timeout": "30000",
    }
    ckpt = tmp_path / "ckpt"

    batches = _run(spark, source, sink, ckpt)
    assert len(batches) >= 3, f"expected several checkpoints, got batches {batches}"
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    # Spark forgets it committed its last batch: the restart replays it, which must not write twice.
    for name in (str(last), f".{last}.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    _produce(kerberos_kafka.plaintext, topic, second)
    _run(spark, source, sink, ckpt)

    expected = _apply(first + second)
    conn = HBaseConnection(connection_options({"hbase.thrift.timeout": "30000"}, host=host,
                                              port=kerberos_hbase.thrift_conf[1],
                                              kerberos=KerberosSettings(principal=principal, keytab=keytab)))
    try:
        plain = dict(conn.call(lambda c: list(c.table(table).scan())))
        versions = {row: conn.call(lambda c, row=row: c.table(table).cells(row, b"d:v", versions=100))
                    for row in plain}
    finally:
        conn.close()
    assert {k.decode(): cells[b"d:v"].decode() for k, cells in plain.items()} == expected
    # A replayed batch rewrites identical cells: no key has more versions than writes it received.
    writes = {}
    for _, event in first + second:
        writes[event["id"]] = writes.get(event["id"], 0) + (event["op"] == "upsert")
    assert all(len(v) <= writes[k.decode()] for k, v in versions.items()), versions

    read = {k: v for k, v in sink.items() if k not in ("create.table", "rowkey", "op.column")}
    committed = spark.read.format("barrier-hbase").options(**read).load().collect()
    assert {r.id: r.v for r in committed} == expected

    offsets = _group_offsets(kerberos_kafka.plaintext, group, topic)
    ends = {p: sum(1 for q, _ in first + second if q == p) for p in range(PARTITIONS)}
    assert {p: o for p, (o, _) in offsets.items()} == ends

    # Resume reaches both Kerberized hops with the query's own options: HBase through the
    # sink's map, Kafka through Spark's names (GSSAPI, keytab in the JAAS line).
    kafka_options = {k: v for k, v in source.items() if k.startswith("kafka.") and k != "kafka.group.id"}
    resumed = starting_offsets_from_sink(sink_id=table, options=read, commit_table=COMMITS,
                                         kafka_options=kafka_options, topics=[topic])
    assert json.loads(resumed) == {topic: {str(p): end for p, end in ends.items()}}
    for _, metadata in offsets.values():
        meta = json.loads(metadata)
        assert meta["src"] == "barrier-kafka" and meta["checkpointId"] >= 1, meta
        assert keytab not in metadata and "Krb5LoginModule" not in metadata
