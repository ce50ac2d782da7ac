"""Checkpointed sinks for any store: a user's ``CheckpointedSink`` becomes a Spark streaming sink.

``sparkbarrier.checkpointed_sink(spark, "my-store", MyFunction)`` (the one registering
function, at the package's top: it also registers the barrier formats) then
``df.writeStream.format("my-store")``; :func:`sink_data_source` builds the DataSource class
without registering it. See :mod:`sparkbarrier.barrier._sink` for the
interfaces and the call order, ``_task`` (executor) and ``_driver_commit`` (driver) for how
the adapter runs them.
"""

from __future__ import annotations

import typing as _typing

from ..._lazy import lazy_exports as _lazy_exports
from ...barrier._sink import CheckpointedSink, CompletedCheckpoint, SinkContext, TwoPhaseCommitSink

if _typing.TYPE_CHECKING:
    from ._markers import keep_markers
    from ._source import sink_data_source

# Imported on first use: Spark's planning workers import this package on the way to a
# sink's data source class (barrier-hbase's), and the adapter's modules bring pyarrow.
__getattr__, __dir__ = _lazy_exports(__name__, globals(), {
    "keep_markers": "._markers",
    "sink_data_source": "._source",
})

__all__ = [
    "CheckpointedSink",
    "CompletedCheckpoint",
    "SinkContext",
    "TwoPhaseCommitSink",
    "keep_markers",
    "sink_data_source",
]
