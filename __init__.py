"""sparkbarrier: Flink-grade checkpoint semantics for PySpark Structured Streaming."""

from __future__ import annotations

from ._exceptions import (
    ConfigError,
    CorruptStateError,
    DataLossError,
    FencedError,
    FlushError,
    ProtocolError,
    SinkError,
    SourceError,
    SparkBarrierError,
    StateCompatibilityError,
)

from ._status import (
    CheckpointLogStatus,
    GroupStatus,
    PartitionStatus,
    SinkStatus,
    checkpoint_log_status,
    group_status,
    sink_status,
)

__version__ = "0.1.0"


def register(spark: object) -> None:
    """Register ``barrier-kafka`` and ``barrier-hbase`` with ``spark`` explicitly.

    Not needed after ``pip install`` (Spark finds the ``pyspark_barrier_*`` modules on
    its own); useful where auto-registration is off or the package was added late.
    Imported lazily so the protocol core stays importable without pyspark.
    """
    from .connectors.hbase import register as register_hbase
    from .connectors.kafka import register as register_kafka

    register_kafka(spark)
    register_hbase(spark)

def checkpointed_sink(spark: object, name: str, factory: object) -> object:
    """Register ``name`` as a streaming sink that runs ``factory()``'s checkpointed sink functions.

    See :mod:`sparkbarrier.connectors.checkpointed` and the README section "Write your own
    checkpointed sink". Imported lazily (pyspark).
    """
    from .connectors.checkpointed import checkpointed_sink as _register

    return _register(spark, name, factory)  # type: ignore[arg-type]


__all__ = [
    "CheckpointLogStatus",
    "ConfigError",
    "CorruptStateError",
    "DataLossError",
    "FencedError",
    "FlushError",
    "GroupStatus",
    "PartitionStatus",
    "ProtocolError",
    "SinkError",
    "SinkStatus",
    "SourceError",
    "SparkBarrierError",
    "StateCompatibilityError",
    "checkpointed_sink",
    "__version__",
    "checkpoint_log_status",
    "group_status",
    "register",
    "sink_status",
]
