"""One barrier-hbase write task without Spark, as the checkpointed-sink adapter runs it (tests only)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from sparkbarrier.barrier import DeliveryGuarantee
from sparkbarrier.barrier._sink import SinkContext
from sparkbarrier.connectors.checkpointed._task import TaskCommitMessage, run_task
from sparkbarrier.connectors.hbase._committer import HBaseCommitMessage
from sparkbarrier.connectors.hbase._function import HBaseSinkFunction
from sparkbarrier.connectors.hbase._writer import HBaseTaskWriter


def run_writer(writer: HBaseTaskWriter, batches: Iterable[pa.RecordBatch]) -> TaskCommitMessage:
    """Write ``batches`` (marker rows allowed) as one exactly-once task; the adapter's report.

    The report's last handle is the task's :class:`HBaseCommitMessage`; its source
    offsets and checkpoints are what the adapter's driver merges for the commit.
    """
    ident = writer._id
    context = SinkContext("barrier-hbase", ident.query_id, ident.batch_id, ident.partition_id, 0, {})
    return run_task(HBaseSinkFunction.around(writer), context, iter(batches), guarantee=DeliveryGuarantee.EXACTLY_ONCE)


def write_task(writer: HBaseTaskWriter, batches: Iterable[pa.RecordBatch]) -> HBaseCommitMessage:
    """The task's last commit message (everything it wrote), for ``Committer.commit``."""
    return run_writer(writer, batches).handles[-1]
