"""``barrier-kafka``: a Kafka source that commits group offsets only for completed batches.

Register it with :func:`register` (or rely on the ``pyspark_barrier_kafka`` shim,
which Spark discovers by itself), then ``spark.readStream.format("barrier-kafka")``.

Besides the source, this package reads back the data it leaves behind: the consumer
group's offsets with their checkpoint metadata (:func:`group_status`,
:func:`committed_offsets`) and the ``barrier-kafka`` offsets in Spark's checkpoint
directory (:func:`checkpoint_log_status`). Internals (the offset wire format, option
specs) stay in the private modules.
"""

from __future__ import annotations

import typing as _typing

from .._checkpoint_log import CheckpointLogStatus, SparkBatch, checkpoint_log_status
from ._client_config import client_settings
from ._group import CommittedOffset, GroupStatus, PartitionStatus, committed_offsets, group_status
from ._jvm_commits import KafkaOffsetCommits, commit_kafka_offsets
from ._options import KafkaSourceOptions, kafka_options_table
from ._positions import TopicPartition
from ._reader_choice import parse_source_options
from ._source import BarrierKafkaDataSource, source_schema

if _typing.TYPE_CHECKING:  # annotations only (a plain import would be a public-looking name)
    from pyspark.sql import SparkSession


__all__ = [
    "BarrierKafkaDataSource",
    "CheckpointLogStatus",
    "CommittedOffset",
    "GroupStatus",
    "KafkaOffsetCommits",
    "KafkaSourceOptions",
    "PartitionStatus",
    "SparkBatch",
    "TopicPartition",
    "checkpoint_log_status",
    "client_settings",
    "commit_kafka_offsets",
    "committed_offsets",
    "group_status",
    "kafka_options_table",
    "parse_source_options",
    "register",
    "source_schema",
]


def register(spark: SparkSession) -> None:
    """Register ``barrier-kafka`` with ``spark`` (idempotent)."""
    spark.dataSource.register(BarrierKafkaDataSource)
