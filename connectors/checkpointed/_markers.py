"""Keeping checkpoint markers alive through DataFrame transformations (any checkpointed sink).

Marker rows (``_barrier_kind`` not null) and marker columns (``_barrier_*``) come from
the ``barrier-kafka`` source. They survive ``withColumn``, ``select`` that keeps the
``_barrier_*`` columns, and filters that also pass rows with ``_barrier_kind IS NOT
NULL``; they are lost through aggregations, joins and ``select`` that drop them. A
sink works without them (its batch id comes from Spark), but then its source offsets
come only from a local Spark offset log. Every sink the adapter runs reads the same
markers, so this lives with the adapter, not with one sink; it needs pyspark, so not
in the pure ``barrier.markers`` (which names the columns).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...barrier.markers import MARKER_COLUMNS, MARKER_KIND_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


__all__ = ["keep_markers"]


def keep_markers(df: DataFrame, *columns: str | Column, where: str | Column | None = None) -> DataFrame:
    """``df.select(*columns, <marker columns>)``, optionally filtered by ``where`` while
    letting marker rows through (``where OR _barrier_kind IS NOT NULL``).

    ``columns`` may be names or Column expressions (with aliases), as for ``select``.
    Without marker columns (``barrier-kafka``'s default) it is a plain select and filter:
    the sinks then read the Kafka offsets from Spark's offset log.
    """
    from pyspark.sql import functions as F

    out = df
    has_markers = MARKER_KIND_COLUMN in df.columns
    if where is not None:
        cond = F.expr(where) if isinstance(where, str) else where
        out = out.where(cond | F.col(MARKER_KIND_COLUMN).isNotNull() if has_markers else cond)
    if columns:
        out = out.select(*columns, *[F.col(c) for c in MARKER_COLUMNS if c in df.columns])
    return out
