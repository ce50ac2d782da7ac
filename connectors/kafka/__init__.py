"""``barrier-kafka``: a Kafka source that commits group offsets only for completed batches.

Register it with :func:`register` (or rely on the ``pyspark_barrier_kafka`` shim,
which Spark discovers by itself), then ``spark.readStream.format("barrier-kafka")``.
"""

from __future__ import annotations

from typing import Any

from ._offsets import OFFSET_VERSION, SourceOffset
from ._options import SPECS, KafkaSourceOptions, kafka_options_table, parse_source_options
from ._positions import TopicPartition
from ._source import BarrierKafkaDataSource, source_schema

__all__ = [
    "BarrierKafkaDataSource",
    "KafkaSourceOptions",
    "OFFSET_VERSION",
    "SPECS",
    "SourceOffset",
    "TopicPartition",
    "kafka_options_table",
    "parse_source_options",
    "register",
    "source_schema",
]


def register(spark: Any) -> None:
    """Register ``barrier-kafka`` with ``spark`` (idempotent)."""
    spark.dataSource.register(BarrierKafkaDataSource)
