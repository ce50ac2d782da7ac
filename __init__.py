"""sparkbarrier: Flink-grade checkpoint semantics for PySpark Structured Streaming."""

from __future__ import annotations

import typing as _typing
import weakref as _weakref
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


def _point_spark_at_this_python() -> None:
    """Set ``PYSPARK_PYTHON`` to this interpreter where it is unset and ``python3`` is another.

    Spark starts its Python workers, and looks up the ``barrier-kafka`` and ``barrier-hbase``
    formats, with ``PYSPARK_PYTHON``, else ``python3`` from ``PATH``. A venv's Python run by
    its path, without activating the venv, finds the system's ``python3`` there, which lacks
    sparkbarrier, and Spark then fails with ``DATA_SOURCE_NOT_FOUND`` and no hint. So an
    import in the driver, before the SparkSession starts, points Spark at the interpreter that
    imported sparkbarrier, and logs that it did. A value you set is never changed: on a
    cluster whose executors run another Python, set ``PYSPARK_PYTHON`` (docs/operations.md).
    """
    import os
    import shutil
    import sys

    if os.environ.get("PYSPARK_PYTHON") or not sys.executable:
        return
    default = shutil.which("python3")
    here = os.path.dirname(os.path.abspath(sys.executable))
    if default is not None and os.path.dirname(os.path.abspath(default)) == here:
        return  # python3 from PATH is this environment's (an activated venv, the system's own)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import logging

    logging.getLogger(__name__).info(
        "PYSPARK_PYTHON was unset and python3 on PATH is %s, not this interpreter: set PYSPARK_PYTHON=%s so "
        "Spark's Python workers find sparkbarrier (set PYSPARK_PYTHON yourself to choose another)",
        default, sys.executable)


_point_spark_at_this_python()

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


# The sessions ``register`` registered the formats with: Spark logs a warning for every
# registration that replaces one ("... replaced a statically registered data source", then
# "... a previously registered data source"), and a second one changes nothing.
_REGISTERED: _weakref.WeakSet[SparkSession] = _weakref.WeakSet()


def register(spark: SparkSession) -> None:
    """Register ``barrier-kafka`` and ``barrier-hbase`` with ``spark`` explicitly, once per session.

    Not needed after ``pip install`` (Spark finds the ``pyspark_barrier_*`` modules on
    its own); useful where auto-registration is off or the package was added late, and
    in a session whose queries also run Python UDFs or Python sinks registered from
    Python: Spark keys its Python worker daemons by a function's interpreter and
    environment, and a source it found on its own carries another environment than
    anything registered from Python, so such a query starts a second daemon (measured
    0.6-1.0 s more on its first batch, and the daemon's memory for the session's life).
    Imported lazily so the protocol core stays importable without pyspark. Driver; a
    second call for the same session does nothing (``checkpointed_sink`` calls it for every
    sink it registers), so Spark's replacement warning comes once per format and session.
    """
    from .connectors.hbase import register as register_hbase
    from .connectors.kafka import register as register_kafka

    if spark in _REGISTERED:
        return
    register_kafka(spark)
    register_hbase(spark)
    _REGISTERED.add(spark)


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
