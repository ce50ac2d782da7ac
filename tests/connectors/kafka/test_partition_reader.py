"""The executor's range reader on every client, called directly against the real broker.

No Spark here: ``read_range`` is what a Spark task runs, so these tests pin the range
contract (exact offsets, batch bound, marker, gaps, data loss, no progress, secrets)
for ``kafkaConsumer.client`` = native, confluent and kafka-python side by side, quickly.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa
import pytest
from kafka import KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka_testkit import KafkaTool
from pyspark.sql.pandas.types import to_arrow_schema

from sparkbarrier import DataLossError, SourceError
from sparkbarrier.connectors.kafka import parse_source_options, source_schema
from sparkbarrier.connectors.kafka.reader._partition_reader import KafkaRangePartition, read_range

pytestmark = [pytest.mark.kafka]

CLIENTS = ["native", "confluent", "kafka-python"]


def read(kafka: KafkaTool, topic: str, start: int, end: int, client: str, headers: bool = False,
         **extra: str) -> tuple[list[pa.RecordBatch], list[dict]]:
    """Run one task's read, marker rows on; returns (data batches, marker rows)."""
    options = parse_source_options({"kafka.bootstrap.servers": kafka.bootstrap,
                                    "subscribe": topic, "commitOffsets": "false",
                                    "kafkaConsumer.client": client, "barrierMarkers": "true",
                                    "includeHeaders": str(headers).lower(), **extra})
    schema = to_arrow_schema(source_schema(headers, barrier_markers=True), timezone="UTC")
    part = KafkaRangePartition(topic, 0, start, end, checkpoint_id=3, timestamp_ms=1_000)
    batches = list(read_range(options, part, schema))
    data = [b for b in batches if b.column("_barrier_kind").null_count == b.num_rows]
    markers = [row for b in batches if b not in data for row in b.to_pylist()]
    return data, markers


@pytest.mark.parametrize("client", CLIENTS)
def test_reads_exactly_the_range_in_bounded_batches_then_the_marker(
    kafka: KafkaTool, unique_name, client: str
) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 50, partitions=1)
    data, markers = read(kafka, topic, 10, 40, client, arrowBatchSize="7")
    assert all(b.num_rows <= 7 for b in data)
    table = pa.Table.from_batches(data)
    assert table.column("offset").to_pylist() == list(range(10, 40))
    assert table.column("value").to_pylist() == values[10:40]
    assert table.column("key").to_pylist() == [b"k%d" % i for i in range(10, 40)]
    assert set(table.column("topic").to_pylist()) == {topic}
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("timestampType").to_pylist()) == {0}
    assert [(m["_barrier_channel"], m["_barrier_next_offset"], m["_barrier_checkpoint_id"])
            for m in markers] == [(f"{topic}:0", 40, 3)]


def test_every_client_returns_the_same_rows(kafka: KafkaTool, unique_name) -> None:
    """Null keys, tombstones, empty values, headers with null values, timestamps: equal."""
    from confluent_kafka import Producer

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(200):
        producer.produce(topic, partition=0, key=None if i % 3 == 0 else b"k%d" % i,
                         value=None if i % 7 == 0 else b"v" * (i % 5),
                         headers=[("h", None), ("n", b"%d" % i)] if i % 4 == 0 else None,
                         timestamp=1_700_000_000_000 + i)
    producer.flush()
    tables = {client: pa.Table.from_batches(read(kafka, topic, 0, 200, client, headers=True,
                                                 arrowBatchSize="64")[0])
              for client in CLIENTS}
    expected = tables.pop("kafka-python")
    assert expected.num_rows == 200 and expected.column("key").null_count == 67
    for client, table in tables.items():
        assert table.equals(expected), client


def test_auto_falls_back_to_confluent_when_the_module_is_missing(
    kafka: KafkaTool, unique_name, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    from sparkbarrier.connectors.kafka.reader import _native_reader

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 5, partitions=1)
    monkeypatch.setattr(_native_reader, "available", lambda: "it is not built (test)")
    caplog.set_level(logging.WARNING)
    data, _ = read(kafka, topic, 0, 5, "auto")
    assert pa.Table.from_batches(data).column("value").to_pylist() == values
    assert "reads with confluent-kafka because it is not built (test)" in caplog.text


@pytest.mark.parametrize("client", CLIENTS)
def test_headers_column_on_both_clients(kafka: KafkaTool, unique_name, client: str) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    from confluent_kafka import Producer  # kafka-python cannot send a null header value

    prod = Producer({"bootstrap.servers": kafka.bootstrap})
    prod.produce(topic, value=b"v", partition=0, headers=[("h1", b"a"), ("h2", b""), ("h3", None)])
    prod.produce(topic, value=b"w", partition=0)
    assert prod.flush(30) == 0
    data, _ = read(kafka, topic, 0, 2, client, headers=True)
    rows = pa.Table.from_batches(data).column("headers").to_pylist()
    assert [[(h["key"], h["value"]) for h in r] for r in rows] == [
        [("h1", b"a"), ("h2", b""), ("h3", None)], []]


@pytest.mark.parametrize("client", CLIENTS)
def test_range_ending_in_aborted_records_and_markers_ends_on_position(
    kafka: KafkaTool, unique_name, client: str
) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, transactional_id=unique_name("x"))
    try:
        producer.init_transactions()
        for outcome, values in (("commit", [b"a"]), ("abort", [b"x", b"y"])):
            producer.begin_transaction()
            for value in values:
                producer.send(topic, value=value, partition=0)
            producer.flush()
            producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    finally:
        producer.close()
    # a0 commit1 x2 y3 abort4: the last record the reader sees is at 0, the range ends at 5
    started = time.monotonic()
    data, markers = read(kafka, topic, 0, 5, client,
                         **{"kafka.isolation.level": "read_committed",
                            "kafkaConsumer.pollTimeoutMs": "20000"})
    assert pa.Table.from_batches(data).column("value").to_pylist() == [b"a"]
    assert [m["_barrier_next_offset"] for m in markers] == [5]
    assert time.monotonic() - started < 15  # ended on the position, not on the timeout


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("fail", [True, False])
def test_offsets_below_earliest_are_data_loss(kafka: KafkaTool, unique_name, client: str,
                                              fail: bool) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 20, partitions=1)
    kafka.admin.delete_records({KafkaTP(topic, 0): 10})
    if fail:
        with pytest.raises(DataLossError, match=r"offsets 5\.\.9 .*failOnDataLoss=false"):
            read(kafka, topic, 5, 15, client)
    else:
        data, markers = read(kafka, topic, 5, 15, client, failOnDataLoss="false")
        assert pa.Table.from_batches(data).column("value").to_pylist() == values[10:15]
        assert [m["_barrier_next_offset"] for m in markers] == [15]


@pytest.mark.parametrize("client", CLIENTS)
def test_missing_topic_is_data_loss(kafka: KafkaTool, unique_name, client: str) -> None:
    with pytest.raises(DataLossError, match="no longer exists"):
        read(kafka, unique_name("never_created"), 0, 5, client,
             **{"kafka.request.timeout.ms": "5000"})


@pytest.mark.parametrize("client", CLIENTS)
def test_no_progress_fails_after_poll_timeout(kafka: KafkaTool, unique_name, client: str) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    kafka.produce(topic, 3, partitions=1)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"no progress .* at offset 3 .*pollTimeoutMs"):
        read(kafka, topic, 0, 10, client, **{"kafkaConsumer.pollTimeoutMs": "1500"})
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("client", ["native", "confluent"])
def test_librdkafka_client_errors_and_logs_carry_no_secret(
    kafka: KafkaTool, unique_name, caplog: pytest.LogCaptureFixture, client: str
) -> None:
    """SASL against the plaintext listener fails; the password must not show anywhere."""
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    kafka.produce(topic, 1, partitions=1)
    secret = "hunter2-" + unique_name("s")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SourceError) as err:
        read(kafka, topic, 0, 1, client,
             **{"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                          f'required username="u" password="{secret}";',
                "kafka.request.timeout.ms": "3000", "kafkaConsumer.pollTimeoutMs": "3000"})
    assert secret not in str(err.value) and secret not in caplog.text


def _raw_log(kafka: KafkaTool, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record the broker still returns: the oracle."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    tp = KafkaTP(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out: list[tuple[int, bytes]] = []
    while consumer.position(tp) < end:
        out += [(r.offset, r.value) for r in consumer.poll(timeout_ms=500).get(tp, ())]
    consumer.close()
    return out


@pytest.fixture(scope="module")
def compacted_topic(kafka_bootstrap: str) -> tuple[str, int]:
    """A compacted topic whose log really has gaps; returns (topic, log end).

    The broker's cleaner runs every 15 s by default; we roll segments fast and poll
    (bounded) until compaction removed records, so the test does not depend on timing.
    """
    import uuid

    from kafka.admin import NewTopic
    from polling import wait_for

    kafka = KafkaTool(kafka_bootstrap)
    topic = f"compacted_{uuid.uuid4().hex[:8]}"
    kafka.admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "0"})])
    prod = kafka.producer()
    for round_ in range(4):
        for k in range(5):
            prod.send(topic, key=b"k%d" % k, value=b"%d-%d" % (k, round_), partition=0)
    prod.flush()

    def compacted() -> bool:
        # an append after segment.ms rolls the segment, so the cleaner may compact it
        prod.send(topic, key=b"roll", value=b"r", partition=0)
        prod.flush()
        return len(_raw_log(kafka, topic)) < 20

    wait_for(compacted, 90, "the log cleaner to compact the topic")
    end = max(o for o, _ in _raw_log(kafka, topic)) + 1
    kafka.close()
    return topic, end


@pytest.mark.parametrize("client", CLIENTS)
def test_compacted_topic_with_offset_gaps_reads_what_the_broker_keeps(
    kafka: KafkaTool, compacted_topic: tuple[str, int], client: str
) -> None:
    topic, end = compacted_topic
    kept = [(o, v) for o, v in _raw_log(kafka, topic) if o < end]
    assert len(kept) < end  # there are gaps
    data, markers = read(kafka, topic, 0, end, client, arrowBatchSize="3")
    table = pa.Table.from_batches(data)
    assert list(zip(table.column("offset").to_pylist(), table.column("value").to_pylist())) == kept
    assert [m["_barrier_next_offset"] for m in markers] == [end]


@pytest.mark.parametrize("client", CLIENTS)
def test_without_markers_a_range_is_its_records_only(kafka: KafkaTool, unique_name, client: str) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 20, partitions=1)
    options = parse_source_options({"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
                                    "commitOffsets": "false", "kafkaConsumer.client": client})
    schema = to_arrow_schema(source_schema(False), timezone="UTC")
    part = KafkaRangePartition(topic, 0, 0, 20, checkpoint_id=3, timestamp_ms=1_000)
    table = pa.Table.from_batches(list(read_range(options, part, schema)), schema=schema)
    assert table.column("value").to_pylist() == values and table.num_rows == 20
    assert not any(n.startswith("_barrier_") for n in table.schema.names)
