"""Executor consumers kept in a Python worker between tasks (``reader/_consumer_pool.py``).

The pool's rules on a stand-in consumer (no server), then the compiled reader against
the devstack's Kafka: a pooled consumer reads any later range exactly, in any order; a
read that failed never returns its consumer; a changed option never reaches an old one;
the earliest-offset check still runs on every range.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from kafka import TopicPartition as KafkaTP
from kafka_testkit import KafkaTool
from pyspark.sql.pandas.types import to_arrow_schema

from sparkbarrier import DataLossError, SourceError
from sparkbarrier.connectors.kafka import parse_source_options, source_schema
from sparkbarrier.connectors.kafka.reader._consumer_pool import ConsumerPool
from sparkbarrier.connectors.kafka.reader._partition_reader import KafkaRangePartition, read_range


class _Consumer:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


def test_a_consumer_comes_back_only_for_its_own_key_most_recent_first() -> None:
    pool: ConsumerPool[_Consumer] = ConsumerPool()
    a1, a2, b = _Consumer("a1"), _Consumer("a2"), _Consumer("b")
    pool.give("a", a1)
    pool.give("b", b)
    pool.give("a", a2)
    assert pool.take("c") is None
    assert pool.take("a") is a2 and pool.take("a") is a1 and pool.take("a") is None
    assert pool.take("b") is b and (pool.hits, pool.misses) == (3, 2)
    assert not any(c.closed for c in (a1, a2, b))


def test_beyond_capacity_and_after_the_idle_time_the_oldest_are_closed() -> None:
    pool: ConsumerPool[_Consumer] = ConsumerPool(capacity=2)
    first, second, third = _Consumer("1"), _Consumer("2"), _Consumer("3")
    for c in (first, second, third):
        pool.give(c.name, c)
    assert first.closed and not second.closed and len(pool) == 2
    stale: ConsumerPool[_Consumer] = ConsumerPool(idle_s=0.0)
    old = _Consumer("old")
    stale.give("k", old)
    assert stale.take("k") is None and old.closed
    pool.close()
    assert second.closed and third.closed and len(pool) == 0


def test_a_consumer_the_check_rejects_is_closed_and_the_next_one_handed_out() -> None:
    """Issue 44: a consumer whose broker died while it idled is never handed out."""
    pool: ConsumerPool[_Consumer] = ConsumerPool()
    healthy, stale = _Consumer("healthy"), _Consumer("stale")
    pool.give("a", healthy)
    pool.give("a", stale)  # the most recent: asked first
    assert pool.take("a", lambda c: c.name != "stale") is healthy
    assert stale.closed and not healthy.closed and len(pool) == 0
    assert (pool.hits, pool.misses, pool.rejected) == (1, 0, 1)
    pool.give("a", healthy)
    assert pool.take("a", lambda c: False) is None and healthy.closed
    assert (pool.misses, pool.rejected) == (1, 2)


@pytest.mark.parametrize(("events", "trouble"), [
    ([], None),
    ([("log", 7, "METADATA: Topic t partition count is 4")], None),
    ([("log", 6, "FAIL: 127.0.0.1:9092/1: Disconnected (after 5012ms in state UP)")],
     "FAIL: 127.0.0.1:9092/1: Disconnected (after 5012ms in state UP)"),
    ([("log", 3, "BROKERFAIL: 127.0.0.1:9092/1: failed: err: Local: Broker transport failure")],
     "BROKERFAIL: 127.0.0.1:9092/1: failed: err: Local: Broker transport failure"),
    ([("error", -187, "1/1 brokers are down")], "1/1 brokers are down"),
    ([("log", 4, "12 client events dropped")], "12 client events dropped"),
])
def test_a_pooled_consumer_is_unusable_after_a_broker_connection_failed_while_it_idled(
        events: list[tuple[str, int, str]], trouble: str | None) -> None:
    from sparkbarrier.connectors.kafka.reader._native_reader import _idle_trouble

    assert _idle_trouble(events) == trouble


# ----------------------------------------------------------------------------- real Kafka
@pytest.fixture
def pool():
    from sparkbarrier.connectors.kafka.reader._native_reader import POOL

    POOL.close()
    POOL.hits = POOL.misses = 0
    yield POOL
    POOL.close()


def _read(kafka: KafkaTool, topic: str, start: int, end: int, **extra: str) -> list[bytes]:
    options = parse_source_options({"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
                                    "commitOffsets": "false", "kafkaConsumer.client": "native", **extra})
    schema = to_arrow_schema(source_schema(False), timezone="UTC")
    batches = list(read_range(options, KafkaRangePartition(topic, 0, start, end, checkpoint_id=1,
                                                           timestamp_ms=0), schema))
    return pa.Table.from_batches(batches, schema=schema).column("value").to_pylist() if batches else []



@pytest.mark.kafka
def test_a_pooled_consumer_reads_every_later_range_exactly_in_any_order(
        kafka: KafkaTool, unique_name, pool) -> None:
    topic = kafka.create_topic(unique_name("pool"), partitions=1)
    values = kafka.produce(topic, 300, partitions=1)
    ranges = [(0, 100), (100, 150), (250, 300), (20, 30), (150, 250)]
    for start, end in ranges:
        assert _read(kafka, topic, start, end) == values[start:end], (start, end)
    assert (pool.misses, pool.hits, len(pool)) == (1, len(ranges) - 1, 1)


@pytest.mark.kafka
def test_a_changed_option_gets_its_own_consumer(kafka: KafkaTool, unique_name, pool) -> None:
    topic = kafka.create_topic(unique_name("pool"), partitions=1)
    values = kafka.produce(topic, 20, partitions=1)
    assert _read(kafka, topic, 0, 10) == values[:10]
    assert _read(kafka, topic, 10, 20, **{"kafka.client.id": "other"}) == values[10:]
    assert (pool.misses, pool.hits, len(pool)) == (2, 0, 2)


@pytest.mark.kafka
def test_a_failed_read_closes_its_consumer_and_the_loss_check_runs_on_every_range(
        kafka: KafkaTool, unique_name, pool) -> None:
    topic = kafka.create_topic(unique_name("pool"), partitions=1)
    values = kafka.produce(topic, 20, partitions=1)
    assert _read(kafka, topic, 0, 5) == values[:5] and len(pool) == 1
    with pytest.raises(SourceError, match="no progress"):
        _read(kafka, topic, 15, 30, **{"kafkaConsumer.pollTimeoutMs": "1000"})
    assert len(pool) == 0 and pool.hits == 1  # taken, failed, closed: not given back
    assert _read(kafka, topic, 5, 10) == values[5:10] and len(pool) == 1
    kafka.admin.delete_records({KafkaTP(topic, 0): 12})
    with pytest.raises(DataLossError, match=r"offsets 10\.\.11"):
        _read(kafka, topic, 10, 15)
    assert len(pool) == 0
    assert _read(kafka, topic, 12, 20) == values[12:]


@pytest.mark.kafka
def test_a_cache_timeout_of_zero_closes_the_consumer_when_the_task_ends(
        kafka: KafkaTool, unique_name, pool) -> None:
    topic = kafka.create_topic(unique_name("pool"), partitions=1)
    values = kafka.produce(topic, 10, partitions=1)
    assert _read(kafka, topic, 0, 10, **{"kafkaConsumer.cacheTimeoutMs": "0"}) == values
    assert len(pool) == 0
