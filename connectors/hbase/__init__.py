"""``barrier-hbase``: an exactly-once HBase sink (Thrift1 via happybase), committed/as-of reader, lineage.

``df.writeStream.format("barrier-hbase")`` works without registration (the
``pyspark_barrier_hbase`` shim); :func:`register` registers explicitly.
:func:`hbase_batch_writer` is the ``foreachBatch`` route (update-mode aggregations, joins);
:func:`sink_status` reads the last commit of a ``sink.id`` back from the commit table.
Internals (the commit-table records, option spec lists) stay in the private modules.
"""

from __future__ import annotations

import typing as _typing

from ..._lazy import lazy_exports as _lazy_exports
from ._datasource import BarrierHBaseDataSource

if _typing.TYPE_CHECKING:  # the lazy names below, for type checkers
    from pyspark.sql import SparkSession

    from ..checkpointed._markers import keep_markers
    from ._options import DEFAULT_COMMIT_TABLE, DeliveryGuarantee, HBaseSinkOptions, parse_sink_options
    from .batch._foreach_batch import hbase_batch_writer
    from .client._options import HBaseConnectionOptions, parse_connection_options
    from .client._sasl import KerberosError, KerberosSettings, Qop
    from .read._lineage import CellLineage, lineage
    from .read._reader import read_committed
    from .read._status import SinkStatus, sink_status

# Imported on first use: Spark's planning workers import this package to look the format
# up (the ``pyspark_barrier_hbase`` shim) and to create the sink, and need only the data
# source class; the rest brings pyarrow, thriftpy2 and happybase (~0.45 s of each new
# worker, measured 2026-11-28).
__getattr__, __dir__ = _lazy_exports(__name__, globals(), {
    "keep_markers": "..checkpointed._markers",
    "DEFAULT_COMMIT_TABLE": "._options",
    "DeliveryGuarantee": "._options",
    "HBaseSinkOptions": "._options",
    "parse_sink_options": "._options",
    "hbase_batch_writer": ".batch._foreach_batch",
    "HBaseConnectionOptions": ".client._options",
    "parse_connection_options": ".client._options",
    "KerberosError": ".client._sasl",
    "KerberosSettings": ".client._sasl",
    "Qop": ".client._sasl",
    "CellLineage": ".read._lineage",
    "lineage": ".read._lineage",
    "read_committed": ".read._reader",
    "SinkStatus": ".read._status",
    "sink_status": ".read._status",
})


__all__ = [
    "DEFAULT_COMMIT_TABLE",
    "BarrierHBaseDataSource",
    "CellLineage",
    "DeliveryGuarantee",
    "HBaseConnectionOptions",
    "HBaseSinkOptions",
    "KerberosError",
    "KerberosSettings",
    "Qop",
    "SinkStatus",
    "hbase_batch_writer",
    "hbase_kerberos_options_table",
    "hbase_options_table",
    "hbase_read_options_table",
    "keep_markers",
    "lineage",
    "parse_connection_options",
    "parse_sink_options",
    "read_committed",
    "register",
    "sink_status",
]


def register(spark: SparkSession) -> None:
    """Register ``barrier-hbase`` with ``spark`` (idempotent)."""
    spark.dataSource.register(BarrierHBaseDataSource)


def hbase_options_table() -> str:
    """Markdown table of every option the sink takes but Kerberos' (for docs/options.md).

    The sink runs under the checkpointed-sink adapter, which parses its own ``checkpoint.*``
    options (an applied-checkpoint ledger's location) for every sink: listed here too, so
    "every option" is every key the sink accepts, each saying it changes nothing for
    barrier-hbase, which keeps no ledger (``uses_ledger = False``: the commit table is its record).
    """
    import dataclasses

    from .._options import options_table
    from ..checkpointed._source import ADAPTER_SPECS
    from ._options import SINK_OPTION_SPECS
    from .client._options import KERBEROS_OPTION_SPECS

    own = [spec for spec in SINK_OPTION_SPECS if spec not in KERBEROS_OPTION_SPECS]
    keys = {spec.key for spec in own}
    adapter = [dataclasses.replace(spec, description=(
        f"the checkpointed-sink adapter's: {spec.description}. Accepted; no effect on barrier-hbase, "
        "which keeps no ledger (its commit table is the record)")) for spec in ADAPTER_SPECS if spec.key not in keys]
    return options_table(own + adapter)


def hbase_kerberos_options_table() -> str:
    """Markdown table of the Kerberos options (for docs/hbase-kerberos.md)."""
    from .._options import options_table
    from .client._options import KERBEROS_OPTION_SPECS

    return options_table(KERBEROS_OPTION_SPECS)


def hbase_read_options_table() -> str:
    """Markdown table of the batch reader's own options (for docs/options.md)."""
    from .._options import options_table
    from ._options import READ_OPTION_SPECS, SINK_OPTION_SPECS

    sink_keys = {spec.key for spec in SINK_OPTION_SPECS}
    return options_table([spec for spec in READ_OPTION_SPECS if spec.key not in sink_keys])
