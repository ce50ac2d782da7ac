"""Test kit for barrier-kafka integration tests: topics, producing, queries, polling."""

from __future__ import annotations

from collections.abc import Callable
import threading
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka import TopicPartition as KafkaTP
from pyspark.sql import DataFrame, SparkSession

from sparkbarrier.connectors.kafka import committed_offsets, register
from polling import wait_for  # noqa: F401  (re-exported for the tests)


class KafkaTool:
    """Create topics, produce numbered records, read group offsets -- for tests."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        self._producer: KafkaProducer | None = None

    def producer(self) -> KafkaProducer:
        if self._producer is None:
            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        return self._producer

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions; a fresh producer sees them."""
        self.admin.create_partitions({topic: total})
        if self._producer is not None:
            self._producer.close()
        self._producer = None
        wait_for(lambda: len(self.producer().partitions_for(topic) or ()) == total, 30,
                 f"{total} partitions of {topic}")

    def create_topic(self, name: str, partitions: int = 2, configs: dict[str, str] | None = None) -> str:
        spec: dict[str, object] = {"num_partitions": partitions, "replication_factor": 1}
        if configs:
            spec["configs"] = configs
        self.admin.create_topics({name: spec}, wait_for_metadata=True)
        return name

    def produce(self, topic: str, count: int, partitions: int = 2, start: int = 0,
                timestamp_ms: int | None = None) -> list[bytes]:
        """Values ``b"<start+i>"``, round-robin over partitions; returns the values."""
        values = [str(start + i).encode() for i in range(count)]
        prod = self.producer()
        for i, value in enumerate(values):
            prod.send(topic, value=value, key=b"k%d" % i, partition=i % partitions,
                      timestamp_ms=timestamp_ms)
        prod.flush()
        return values

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        found = committed_offsets(self.admin, group)
        return {(tp.topic, tp.partition): c.offset for tp, c in found.items()}

    def group_metadata(self, group: str) -> dict[tuple[str, int], str]:
        found = self.admin.list_group_offsets({group: None}).get(group, {})
        return {(tp.topic, tp.partition): m.metadata for tp, m in found.items() if m is not None}

    def commit_group(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        from kafka.structs import OffsetAndMetadata

        self.admin.alter_group_offsets(group, {KafkaTP(t, p): OffsetAndMetadata(o, "", -1)
                                               for (t, p), o in offsets.items()})

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
        self.admin.close()


@dataclass
class Collected:
    """Rows per batch id (data rows and marker rows apart)."""

    data: dict[int, list[tuple]] = field(default_factory=dict)
    markers: dict[int, list[tuple]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def all_data(self) -> list[tuple]:
        with self.lock:
            return [row for b in sorted(self.data) for row in self.data[b]]

    def values(self) -> list[bytes]:
        return [row[1] for row in self.all_data()]


def stream(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """The source with marker rows on (these tests look at them) unless the options say otherwise."""
    register(spark)
    reader = spark.readStream.format("barrier-kafka")
    for key, value in {"barrierMarkers": "true", **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def start(spark: SparkSession, options: dict[str, str], checkpoint: str, *,
          available_now: bool = False, interval: str = "300 milliseconds",
          on_batch: Callable[[int, list[tuple]], None] | None = None,
          collected: Collected | None = None) -> tuple[Any, Collected]:
    """Start a foreachBatch query; returns (query, collected)."""
    out = collected or Collected()

    def handle(batch: DataFrame, batch_id: int) -> None:
        kind = batch.columns.index("_barrier_kind")
        rows = [tuple(r) for r in batch.collect()]
        data = [r for r in rows if r[kind] is None]
        marks = [r for r in rows if r[kind] is not None]
        if on_batch is not None:
            on_batch(batch_id, rows)
        with out.lock:
            out.data[batch_id] = data
            out.markers[batch_id] = marks

    writer = stream(spark, options).writeStream.foreachBatch(handle).option(
        "checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(
        processingTime=interval)
    return writer.start(), out
