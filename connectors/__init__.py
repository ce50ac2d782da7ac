"""Spark connectors: ``barrier-kafka`` (``.kafka``), ``barrier-hbase`` (``.hbase``), resume helper.

Subpackages import pyspark and their client libraries; nothing is imported here until
asked for, so ``sparkbarrier.connectors._options`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["starting_offsets_from_sink"]


def __getattr__(name: str) -> Any:
    if name == "starting_offsets_from_sink":
        from .resume import starting_offsets_from_sink

        return starting_offsets_from_sink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
