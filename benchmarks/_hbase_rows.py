"""What the HBase benchmarks share: the 10-column rows, their Spark schema, one write task.

The floor below ``bench_hbase_sink.py``, ``bench_hbase_read.py`` and ``_gateway_bench.py``:
each needs the same rows and the same way of writing them without Spark, and none of
them imports another's private helpers (that made an import circle).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from sparkbarrier.barrier import DeliveryGuarantee
from sparkbarrier.barrier._sink import SinkContext
from sparkbarrier.connectors.checkpointed._task import run_task
from sparkbarrier.connectors.hbase.sink._committer import HBaseCommitMessage
from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction
from sparkbarrier.connectors.hbase._options import HBaseSinkOptions
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity

__all__ = ["SCHEMA", "make_rows", "spark_schema_json", "write_task"]

SCHEMA = pa.schema([("id", pa.string())] + [(f"i{k}", pa.int64()) for k in range(3)]
                   + [(f"f{k}", pa.float64()) for k in range(3)] + [(f"s{k}", pa.string()) for k in range(3)])


def make_rows(n: int) -> pa.Table:
    ids = pa.array([f"row{i:09d}" for i in range(n)])
    cols = [ids] + [pa.array(range(k, n + k), pa.int64()) for k in range(3)]
    cols += [pa.array([i * 0.5 + k for i in range(n)], pa.float64()) for k in range(3)]
    cols += [pa.array([f"value-{k}-{i % 1000}" for i in range(n)]) for k in range(3)]
    return pa.Table.from_arrays(cols, schema=SCHEMA)


def spark_schema_json(schema: pa.Schema) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema).json()


def write_task(opts: HBaseSinkOptions, identity: TaskIdentity,
               batches: Iterable[pa.RecordBatch]) -> HBaseCommitMessage:
    """One exactly-once write task without Spark, run as the checkpointed-sink adapter runs it.

    Returns the task's last commit message (everything it wrote), ready for
    ``Committer.commit``. Rows carry no markers here, so there are no source offsets.
    """
    context = SinkContext("barrier-hbase", identity.query_id, identity.batch_id, identity.partition_id, 0, {})
    report = run_task(HBaseSinkFunction.around(HBaseTaskWriter(opts, identity)), context, iter(batches),
                      guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    return report.handles[-1]
