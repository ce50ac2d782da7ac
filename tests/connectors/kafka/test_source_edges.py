"""barrier-kafka edge cases against a real broker: discovery, transactions, data loss."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka_testkit import KafkaTool, start, stream, wait_for
from pyspark.errors import StreamingQueryException

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def base(kafka: KafkaTool, topic: str, group: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
            "kafka.group.id": group, "startingOffsets": "earliest", **extra}


def run_available_now(spark, options: dict[str, str], path: str):
    query, got = start(spark, options, path, available_now=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    return got


def test_new_partitions_and_pattern_topics_read_from_earliest(
    spark, kafka: KafkaTool, unique_name, tmp_path
) -> None:
    prefix = unique_name("p")
    first = kafka.create_topic(prefix + "_a", partitions=1)
    kafka.produce(first, 5, partitions=1)
    options = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribePattern": prefix + "_.*",
               "kafka.group.id": unique_name("g"), "startingOffsets": "earliest"}
    query, got = start(spark, options, str(tmp_path / "c"), interval="300 milliseconds")
    try:
        wait_for(lambda: len(got.values()) == 5, 60, "first topic read")
        kafka.add_partitions(first, 2)
        kafka.produce(first, 4, partitions=2, start=100)  # 2 land in new partition 1
        second = kafka.create_topic(prefix + "_b", partitions=1)
        kafka.produce(second, 3, partitions=1, start=200)
        wait_for(lambda: len(got.values()) == 12, 90, "new partition and new topic read")
    finally:
        query.stop()
    channels = {(r[2], r[3]) for r in got.all_data()}
    assert channels == {(first, 0), (first, 1), (second, 0)}
    assert len(set(got.values())) == 12


@pytest.mark.parametrize("client", ["native", "confluent", "kafka-python"])
def test_read_committed_skips_aborted_transaction(spark, kafka: KafkaTool, unique_name,
                                                  tmp_path, client: str) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap,
                             transactional_id=unique_name("tx"))
    try:
        producer.init_transactions()
        for outcome, values in (("commit", [b"a", b"b"]), ("abort", [b"x", b"y", b"z"]),
                                ("commit", [b"c"])):
            producer.begin_transaction()
            for value in values:
                producer.send(topic, value=value, partition=0)
            producer.flush()
            producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    finally:
        producer.close()
    options = base(kafka, topic, unique_name("g"), **{"kafka.isolation.level": "read_committed",
                                                      "kafkaConsumer.client": client})
    got = run_available_now(spark, options, str(tmp_path / "c"))
    assert got.values() == [b"a", b"b", b"c"]
    # offsets have gaps (aborted records, commit markers) and the range still ends
    assert [m[12] for b in got.markers.values() for m in b] == [9]


def _delete_below(kafka: KafkaTool, topic: str, offset: int) -> None:
    kafka.admin.delete_records({KafkaTP(topic, 0): offset})


def test_out_of_range_offsets_fail_query_by_default(spark, kafka: KafkaTool, unique_name,
                                                    tmp_path) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    kafka.produce(topic, 20, partitions=1)
    _delete_below(kafka, topic, 10)
    options = base(kafka, topic, unique_name("g"), startingOffsets=f'{{"{topic}": {{"0": 0}}}}')
    query, _ = start(spark, options, str(tmp_path / "c"), available_now=True)
    try:
        with pytest.raises(StreamingQueryException, match=r"DataLossError.*offsets 0\.\.9"):
            query.awaitTermination(120)
    finally:
        query.stop()


def test_out_of_range_offsets_skipped_without_fail_on_data_loss(
    spark, kafka: KafkaTool, unique_name, tmp_path
) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 20, partitions=1)
    _delete_below(kafka, topic, 10)
    options = base(kafka, topic, unique_name("g"), failOnDataLoss="false",
                   startingOffsets=f'{{"{topic}": {{"0": 0}}}}')
    got = run_available_now(spark, options, str(tmp_path / "c"))
    assert got.values() == values[10:]


def test_shim_is_discoverable_like_spark_does_it() -> None:
    # Spark's lookup_data_sources: top-level pyspark_* modules exposing DefaultSource.
    from pkgutil import iter_modules

    import pyspark_barrier_kafka

    assert "pyspark_barrier_kafka" in {m.name for m in iter_modules()}
    assert pyspark_barrier_kafka.DefaultSource.name() == "barrier-kafka"


def test_format_name_resolves_in_spark(spark, kafka: KafkaTool, unique_name) -> None:
    options = base(kafka, kafka.create_topic(unique_name("t")), unique_name("g"))
    reader = spark.readStream.format("barrier-kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    assert "_barrier_kind" not in reader.load().columns  # markers are opt-in
    assert "_barrier_kind" in stream(spark, options).columns  # the test kit turns them on
    assert stream(spark, options).isStreaming


def test_default_options_give_any_sink_exactly_the_records(spark, kafka: KafkaTool, unique_name,
                                                            tmp_path) -> None:
    """Swap format("kafka") for format("barrier-kafka"): same columns, same rows, no marker rows."""
    topic = kafka.create_topic(unique_name("t"), partitions=2)
    values = kafka.produce(topic, 40)
    options = base(kafka, topic, unique_name("g"), maxOffsetsPerTrigger="15")
    reader = spark.readStream.format("barrier-kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    name = unique_name("mem")
    query = (reader.load().writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    rows = spark.sql(f"SELECT * FROM {name}").collect()
    assert spark.table(name).columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                                         "timestampType"]
    assert sorted(r.value for r in rows) == sorted(values)


def test_bad_option_fails_at_load(spark) -> None:
    with pytest.raises(Exception, match="exactly one of 'subscribe'"):
        spark.readStream.format("barrier-kafka").option(
            "kafka.bootstrap.servers", "h:1").option("kafka.group.id", "g").load()


def test_deleted_topic_fails_query_with_data_loss(spark, kafka: KafkaTool, unique_name,
                                                  tmp_path) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    kafka.produce(topic, 5, partitions=1)
    query, got = start(spark, base(kafka, topic, unique_name("g")), str(tmp_path / "c"))
    try:
        wait_for(lambda: len(got.values()) == 5, 60, "records read")
        kafka.admin.delete_topics([topic])
        with pytest.raises(StreamingQueryException, match=r"DataLossError.*disappeared"):
            query.awaitTermination(60)
    finally:
        query.stop()


def test_group_start_without_offsets_and_fallback_error_fails_at_start(
    spark, kafka: KafkaTool, unique_name, tmp_path
) -> None:
    topic = kafka.create_topic(unique_name("t"))
    options = base(kafka, topic, unique_name("g"), startingOffsets="group",
                   **{"startingOffsets.groupFallback": "error"})
    query, _ = start(spark, options, str(tmp_path / "c"), available_now=True)
    try:
        with pytest.raises(StreamingQueryException, match="has no committed offset"):
            query.awaitTermination(60)
    finally:
        query.stop()


def _recreate(kafka: KafkaTool, topic: str) -> None:
    from kafka.errors import TopicAlreadyExistsError

    kafka.admin.delete_topics([topic])

    def created() -> bool:
        try:
            kafka.create_topic(topic, partitions=1)
        except TopicAlreadyExistsError:  # deletion still in progress
            return False
        return True

    wait_for(created, 30, f"{topic} recreated")


@pytest.mark.parametrize("fail", [True, False])
def test_recreated_topic_behind_checkpoint_is_data_loss(spark, kafka: KafkaTool, unique_name,
                                                        tmp_path, fail: bool) -> None:
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    kafka.produce(topic, 10, partitions=1)
    options = base(kafka, topic, unique_name("g"), failOnDataLoss=str(fail).lower())
    ckpt = str(tmp_path / "c")
    assert len(run_available_now(spark, options, ckpt).values()) == 10
    _recreate(kafka, topic)
    kafka.produce(topic, 3, partitions=1, start=100)
    if fail:
        query, _ = start(spark, options, ckpt, available_now=True)
        try:
            with pytest.raises(StreamingQueryException, match=r"DataLossError.*log ends at 3"):
                query.awaitTermination(60)
        finally:
            query.stop()
    else:
        assert run_available_now(spark, options, ckpt).values() == []  # 0..2 skipped, as Spark
        kafka.produce(topic, 2, partitions=1, start=200)
        got3 = run_available_now(spark, options, ckpt)
        assert got3.values() == [b"200", b"201"]


@pytest.mark.timeout(60)
def test_discovery_describes_the_selected_topics_each_call(kafka: KafkaTool, unique_name) -> None:
    """The planner's per-batch discovery asks for the subscribed or assigned topics only
    (not every topic of the cluster) and still sees new topics and partitions;
    a missing topic or partition is absent, not an error."""
    from sparkbarrier.connectors.kafka import parse_source_options
    from sparkbarrier.connectors.kafka.planner._cluster import ClusterView
    from sparkbarrier.connectors.kafka.planner._tries import refresh_topics
    from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP

    prefix = unique_name("d")
    first, later = prefix + "_a", prefix + "_b"
    kafka.create_topic(first, partitions=1)
    views = {
        "subscribe": ClusterView(parse_source_options(
            {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": f"{first},{later}",
             "commitOffsets": "false"})),
        "assign": ClusterView(parse_source_options(
            {"kafka.bootstrap.servers": kafka.bootstrap,
             "assign": f'{{"{first}": [0, 1], "{later}": [0]}}', "commitOffsets": "false"})),
        "pattern": ClusterView(parse_source_options(
            {"kafka.bootstrap.servers": kafka.bootstrap,
             "subscribePattern": prefix + "_.*|__consumer_offsets", "commitOffsets": "false"})),
    }
    try:
        # the installed kafka-python takes the targeted refresh (not the every-topic fallback)
        assert refresh_topics(views["subscribe"]._client(), [first], 5000)
        for view in views.values():
            assert view.discover() == {TP(first, 0)}
        kafka.add_partitions(first, 2)
        kafka.create_topic(later, partitions=1)
        grown = {TP(first, 0), TP(first, 1), TP(later, 0)}
        for name, view in views.items():  # a new topic reaches every broker's cache in ms
            wait_for(lambda v=view: v.discover() == grown, 30, f"{name} sees the new partitions")
    finally:
        for view in views.values():
            view.close()
