"""Spark discovers top-level ``pyspark_*`` modules exposing ``DefaultSource``.

With sparkbarrier installed, ``df.writeStream.format("barrier-hbase")`` and
``spark.read.format("barrier-hbase")`` work without an explicit ``register`` call.
"""

from sparkbarrier.connectors.hbase import BarrierHBaseDataSource as DefaultSource

__all__ = ["DefaultSource"]
