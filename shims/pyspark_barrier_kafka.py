"""Spark discovers top-level ``pyspark_*`` modules exposing ``DefaultSource``.

With sparkbarrier installed, ``spark.readStream.format("barrier-kafka")`` works
without an explicit ``register`` call.
"""

from sparkbarrier.connectors.kafka import BarrierKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
