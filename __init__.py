"""sparkbarrier: Flink-grade checkpoint semantics for PySpark Structured Streaming."""

from __future__ import annotations

import typing as _typing
from pkgutil import extend_path as _extend_path

from ._exceptions import (
    ConfigError,
    CorruptStateError,
    DataLossError,
    FencedError,
    FileSystemError,
    FlushError,
    KerberosError,
    ProtocolError,
    SinkError,
    SourceError,
    SparkBarrierError,
    StateCompatibilityError,
)
from ._lazy import lazy_exports as _lazy_exports

# Annotations only (the checkpointed adapter imports pyspark), and the lazy names below
# for the type checker: ``__getattr__`` is typed ``object``.
if _typing.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

    from .barrier import CheckpointedSink
    from .connectors.hbase import SinkStatus, hbase_batch_writer, sink_status
    from .connectors.kafka import (
        CheckpointLogStatus,
        GroupStatus,
        PartitionStatus,
        checkpoint_log_status,
        commit_kafka_offsets,
        group_status,
    )
    from .connectors.resume import starting_offsets_from_sink

__version__ = "0.1.0"

# The test and dev machinery is a second distribution, sparkbarrier-devstack, that adds the
# subpackage ``sparkbarrier.devstack``. Installed into the same site-packages it lands in
# this folder; an editable install (./dev's strict mode links each distribution's files
# under its own build/ folder) puts it in another sys.path entry, which this adds.
__path__ = _extend_path(__path__, __name__)

# The status readers live with the data they read (consumer group and Spark's offset
# log: connectors.kafka; commit table: connectors.hbase). Re-exported lazily, because
# those packages import pyspark and the client libraries, and ``import sparkbarrier``
# (which the pure protocol core triggers) must not.
_LAZY = {
    "CheckpointLogStatus": "kafka",
    "GroupStatus": "kafka",
    "PartitionStatus": "kafka",
    "checkpoint_log_status": "kafka",
    "commit_kafka_offsets": "kafka",
    "group_status": "kafka",
    "SinkStatus": "hbase",
    "hbase_batch_writer": "hbase",
    "sink_status": "hbase",
    "starting_offsets_from_sink": "resume",
}


__getattr__, __dir__ = _lazy_exports(__name__, globals(),
                                     {name: f".connectors.{package}" for name, package in _LAZY.items()})


def register(spark: SparkSession) -> None:
    """Register ``barrier-kafka`` and ``barrier-hbase`` with ``spark`` explicitly.

    Not needed after ``pip install`` (Spark finds the ``pyspark_barrier_*`` modules on
    its own); useful where auto-registration is off or the package was added late, and
    in a session whose queries also run Python UDFs or Python sinks registered from
    Python: Spark keys its Python worker daemons by a function's interpreter and
    environment, and a source it found on its own carries another environment than
    anything registered from Python, so such a query starts a second daemon (measured
    0.6-1.0 s more on its first batch, and the daemon's memory for the session's life).
    Imported lazily so the protocol core stays importable without pyspark.
    """
    from .connectors.hbase import register as register_hbase
    from .connectors.kafka import register as register_kafka

    register_kafka(spark)
    register_hbase(spark)


def checkpointed_sink(spark: SparkSession, name: str,
                      factory: Callable[[], CheckpointedSink]) -> type[DataSource]:
    """Register ``name`` with ``spark`` as a streaming sink that runs ``factory()``'s checkpointed
    sink functions; returns the registered DataSource class. Driver, before ``start()``;
    idempotent per ``name`` (Spark replaces a registered name, and warns).

    The one way to register a checkpointed sink (docs/checkpointed-sinks.md):
    :func:`sparkbarrier.connectors.checkpointed.sink_data_source` builds the class, this
    registers it and registers ``barrier-kafka`` and ``barrier-hbase`` from this session too
    (:func:`register`), so a query reading ``barrier-kafka`` into this sink runs in one
    Python worker daemon. Imported lazily (pyspark).
    """
    from .connectors.checkpointed import sink_data_source

    source = sink_data_source(name, factory)
    spark.dataSource.register(source)
    register(spark)
    return source


__all__ = [
    "CheckpointLogStatus",
    "ConfigError",
    "CorruptStateError",
    "DataLossError",
    "FencedError",
    "FileSystemError",
    "FlushError",
    "GroupStatus",
    "KerberosError",
    "PartitionStatus",
    "ProtocolError",
    "SinkError",
    "SinkStatus",
    "SourceError",
    "SparkBarrierError",
    "StateCompatibilityError",
    "__version__",
    "checkpoint_log_status",
    "checkpointed_sink",
    "commit_kafka_offsets",
    "group_status",
    "hbase_batch_writer",
    "register",
    "sink_status",
    "starting_offsets_from_sink",
]
