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

from ..._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..storage._checkpoint_log import CheckpointLogStatus, SparkBatch, checkpoint_log_status
    from ._options import KafkaSourceOptions, kafka_options_table
    from ._source import BarrierKafkaDataSource, source_schema
    from .client._client_config import client_settings
    from .client._positions import TopicPartition
    from .commits._group import CommittedOffset, GroupStatus, PartitionStatus, committed_offsets, group_status
    from .commits._jvm_commits import KafkaOffsetCommits, commit_kafka_offsets
    from .reader._reader_choice import parse_source_options

# Imported on first use: a Spark worker that unpickles the source's reader imports this
# package, and the executors' librdkafka path needs none of the driver's modules (nor
# kafka-python, ~90 ms of every new worker's start, measured 2026-11-26).
__getattr__, __dir__ = _lazy_exports(__name__, globals(), {
    "CheckpointLogStatus": "..storage._checkpoint_log",
    "SparkBatch": "..storage._checkpoint_log",
    "checkpoint_log_status": "..storage._checkpoint_log",
    "client_settings": ".client._client_config",
    "CommittedOffset": ".commits._group",
    "GroupStatus": ".commits._group",
    "PartitionStatus": ".commits._group",
    "committed_offsets": ".commits._group",
    "group_status": ".commits._group",
    "KafkaOffsetCommits": ".commits._jvm_commits",
    "commit_kafka_offsets": ".commits._jvm_commits",
    "KafkaSourceOptions": "._options",
    "kafka_options_table": "._options",
    "TopicPartition": ".client._positions",
    "parse_source_options": ".reader._reader_choice",
    "BarrierKafkaDataSource": "._source",
    "source_schema": "._source",
})


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
    from ._source import BarrierKafkaDataSource

    spark.dataSource.register(BarrierKafkaDataSource)
