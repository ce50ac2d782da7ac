"""``barrier-hbase``: an exactly-once HBase sink (Thrift1 via happybase), committed/as-of reader, lineage.

``df.writeStream.format("barrier-hbase")`` works without registration (the
``pyspark_barrier_hbase`` shim); :func:`register` registers explicitly.
"""

from __future__ import annotations

from typing import Any

from ._commit_table import AttemptRecord, CommitRecord
from ._options import (
    DEFAULT_COMMIT_TABLE,
    READ_OPTION_SPECS,
    SINK_OPTION_SPECS,
    DeliveryGuarantee,
    HBaseSinkOptions,
    parse_sink_options,
)
from ._markers import keep_markers, marker_columns
from ._lineage import CellLineage, lineage
from ._reader import read_committed
from ._source import BarrierHBaseDataSource

__all__ = [
    "BarrierHBaseDataSource",
    "CellLineage",
    "CommitRecord",
    "AttemptRecord",
    "DEFAULT_COMMIT_TABLE",
    "DeliveryGuarantee",
    "HBaseSinkOptions",
    "READ_OPTION_SPECS",
    "SINK_OPTION_SPECS",
    "hbase_options_table",
    "hbase_read_options_table",
    "keep_markers",
    "lineage",
    "marker_columns",
    "parse_sink_options",
    "read_committed",
    "register",
]


def register(spark: Any) -> None:
    """Register ``barrier-hbase`` with ``spark`` (idempotent)."""
    spark.dataSource.register(BarrierHBaseDataSource)


def hbase_options_table() -> str:
    """Markdown table of the sink options (for the README)."""
    from .._options import options_table

    return options_table(SINK_OPTION_SPECS)


def hbase_read_options_table() -> str:
    """Markdown table of the batch reader's own options (for the README)."""
    from .._options import options_table

    sink_keys = {spec.key for spec in SINK_OPTION_SPECS}
    return options_table([spec for spec in READ_OPTION_SPECS if spec.key not in sink_keys])
