"""Spark connectors: ``barrier-kafka`` (``.kafka``), ``barrier-hbase`` (``.hbase``), resume helper.

Subpackages import pyspark and their client libraries; nothing is imported here until
asked for, so ``sparkbarrier.connectors._options`` stays cheap.
"""

from __future__ import annotations

import typing as _typing

if _typing.TYPE_CHECKING:  # for the type checker: ``__getattr__`` is typed ``object``
    from .resume import starting_offsets_from_sink

__all__ = ["starting_offsets_from_sink"]


def __getattr__(name: str) -> object:
    if name == "starting_offsets_from_sink":
        from .resume import starting_offsets_from_sink

        return starting_offsets_from_sink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
