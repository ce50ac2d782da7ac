"""The ``barrier-kafka`` DataSource: name, schema, options contract, reader factory.

Usage::

    df = (spark.readStream.format("barrier-kafka")
          .option("kafka.bootstrap.servers", "broker:9092")
          .option("subscribe", "orders")
          .option("kafka.group.id", "orders-etl")      # receives completed offsets
          .option("startingOffsets", "earliest")
          .load())

Schema: exactly Spark's Kafka source columns ``key binary, value binary, topic string,
partition int, offset long, timestamp timestamp, timestampType int`` (+ ``headers
array<struct<key string, value binary>>`` with ``includeHeaders=true``), and exactly
its rows: any sink gets the records and nothing else. With ``barrierMarkers=true``
the barrier marker columns (``sparkbarrier.barrier.markers``) follow, null on data
rows, and one marker row closes each partition's range of every batch, for code that
aligns on barriers. Checkpointed sinks (``barrier-hbase``) record the Kafka offsets of
every batch either way: from the markers, or from Spark's offset log.

Options are validated here, when the query is defined (``load()``): see
:data:`~sparkbarrier.connectors.kafka._options.SPECS` / ``kafka_options_table()``.
Consumer-group offsets are committed only for batches that completed (see
:mod:`sparkbarrier.connectors.kafka.planner._planner`).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ...barrier.markers import MARKER_DDL
from ._options import KafkaSourceOptions
from .reader._reader_choice import parse_source_options

__all__ = ["BarrierKafkaDataSource", "source_schema"]

_MARKER_TYPES = {"string": StringType(), "int": IntegerType(), "bigint": LongType()}


def _marker_fields() -> list[StructField]:
    fields = []
    for column in MARKER_DDL.split(","):
        name, kind = column.split()
        fields.append(StructField(name, _MARKER_TYPES[kind], True))
    return fields


def source_schema(include_headers: bool, barrier_markers: bool = False) -> StructType:
    """Spark's Kafka columns (+ headers), then the marker columns if asked for; all nullable."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType(), True),
                             StructField("value", BinaryType(), True)])
        fields.append(StructField("headers", ArrayType(header, True), True))
    return StructType(fields + (_marker_fields() if barrier_markers else []))


class BarrierKafkaDataSource(DataSource):
    """Kafka source whose group offsets follow completed micro-batches (streaming only)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed: KafkaSourceOptions = parse_source_options(options)

    @classmethod
    def name(cls) -> str:
        return "barrier-kafka"

    def schema(self) -> StructType:
        return source_schema(self.parsed.include_headers, self.parsed.barrier_markers)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # Imported here: the workers that only look the source up or create it (Spark's
        # planning workers) skip the planner's pyarrow and numpy.
        from .planner._planner import KafkaStreamPlanner

        return KafkaStreamPlanner(self.parsed, schema)
