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

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptStateError",
    "DataLossError",
    "FencedError",
    "FlushError",
    "ProtocolError",
    "SinkError",
    "SourceError",
    "SparkBarrierError",
    "StateCompatibilityError",
    "__version__",
]
