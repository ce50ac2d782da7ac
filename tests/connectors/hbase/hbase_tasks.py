"""One barrier-hbase write task without Spark, as the checkpointed-sink adapter runs it (tests only)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import happybase
import pyarrow as pa

from sparkbarrier.barrier import DeliveryGuarantee
from sparkbarrier.barrier._sink import SinkContext
from sparkbarrier.connectors.checkpointed._driver_commit import completed_checkpoint
from sparkbarrier.connectors.checkpointed._task import TaskCommitMessage, run_task
from sparkbarrier.connectors.hbase import parse_sink_options
from sparkbarrier.connectors.hbase.sink._committer import HBaseCommitMessage
from sparkbarrier.connectors.hbase.sink._sink_function import HBaseSinkFunction
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity


def run_writer(writer: HBaseTaskWriter, batches: Iterable[pa.RecordBatch]) -> TaskCommitMessage:
    """Write ``batches`` (marker rows allowed) as one exactly-once task; the adapter's report.

    The report's last handle is the task's :class:`HBaseCommitMessage`; its source
    offsets and checkpoints are what the adapter's driver merges for the commit.
    """
    ident = writer._id
    context = SinkContext("barrier-hbase", ident.query_id, ident.batch_id, ident.partition_id, 0, {},
                          plan_id=ident.plan_id)
    return run_task(HBaseSinkFunction.around(writer), context, iter(batches), guarantee=DeliveryGuarantee.EXACTLY_ONCE)


def write_task(writer: HBaseTaskWriter, batches: Iterable[pa.RecordBatch]) -> HBaseCommitMessage:
    """The task's last commit message (everything it wrote), for ``Committer.commit``."""
    return run_writer(writer, batches).handles[-1]


def spark_schema(arrow_schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema, prefer_timestamp_ntz=False)


class Sink:
    """One sink (options + driver writer) driven by hand: tasks and commits without Spark."""

    def __init__(self, hbase: tuple[str, int], thrift2: tuple[str, int] | None, table: str, schema: pa.Schema,
                 **extra: str) -> None:
        raw = {"hbase.thrift.host": hbase[0], "hbase.thrift.port": str(hbase[1]), "table": table,
               "hbase.thrift2.port": str(thrift2[1]) if thrift2 else "",
               "rowkey": "id", "create.table": "true", "sink.id": table,
               "commit.table": "sparkbarrier_commits_test", **extra}
        self.raw = raw
        self.opts = parse_sink_options(raw)
        self.schema = schema
        self.driver = HBaseSinkFunction()
        self.driver.validate(raw, spark_schema(schema))
        self.driver.start(raw, spark_schema(schema))
        self._reports: dict[int, TaskCommitMessage] = {}  # id(message) → its task's report

    def task(self, rows: Sequence[dict[str, Any]] | Sequence[pa.RecordBatch], *, batch: int,
             query: str = "q1", partition: int = 0, plan: str = "") -> HBaseCommitMessage:
        batches = rows if rows and isinstance(rows[0], pa.RecordBatch) else [
            pa.RecordBatch.from_pylist(list(rows), schema=self.schema)]
        report = run_writer(HBaseTaskWriter(self.opts, TaskIdentity(query, batch, partition, plan)), batches)
        msg = report.handles[-1]
        self._reports[id(msg)] = report
        return msg

    def commit(self, messages: Sequence[HBaseCommitMessage], batch: int) -> Any:
        """Commit as the adapter's driver does: offsets merged from the tasks' reports."""
        reports = [self._reports[id(m)] for m in messages if id(m) in self._reports]
        completed = completed_checkpoint(reports, batch)
        return self.driver.committer().commit(messages, batch, offsets=completed.source_offsets,
                                              source_checkpoints=completed.source_checkpoints)

    def read(self, **as_of: Any) -> list[dict[str, Any]]:
        """The committed (or, with ``as_of_batch``/``as_of_ms``, as-of) view, sorted by id."""
        from sparkbarrier.connectors.hbase import read_committed

        host, port = ",".join(str(g) for g in self.opts.gateways), self.opts.port
        rows = read_committed(host, port, self.opts.table, sink_id=self.opts.sink_id,
                              commit_table=self.opts.commit_table, **as_of).to_pylist()
        return sorted(rows, key=lambda r: r["id"])

    def plain(self) -> dict[bytes, dict[bytes, bytes]]:
        """What any HBase client sees: a plain scan (newest version per cell, deletes applied)."""
        conn = happybase.Connection(self.opts.host, self.opts.port)
        try:
            return dict(conn.table(self.opts.table).scan())
        finally:
            conn.close()

    def versions(self, row: bytes, column: bytes) -> list[tuple[bytes, int]]:
        conn = happybase.Connection(self.opts.host, self.opts.port)
        try:
            return conn.table(self.opts.table).cells(row, column, versions=1000, include_timestamp=True)
        finally:
            conn.close()

    def history(self) -> list[Any]:
        """The sink's commit records as readers see them (history rows and ``c:commit``)."""
        from sparkbarrier.connectors.hbase.sink._commit_table import read_history
        from sparkbarrier.connectors.hbase.client._connection import HBaseConnection

        conn = HBaseConnection(self.opts, 0)
        try:
            return read_history(conn, self.opts.commit_table, self.opts.sink_id)
        finally:
            conn.close()

    def history_rows(self) -> list[int]:
        """The sequences copied into history rows (``<sink.id>\\x00<seq>``), without ``c:commit``."""
        conn = happybase.Connection(self.opts.host, self.opts.port)
        try:
            prefix = self.opts.sink_id.encode() + b"\x00"
            return [int(key[len(prefix):]) for key, _ in conn.table(self.opts.commit_table).scan(row_prefix=prefix)]
        finally:
            conn.close()

    def notes(self) -> dict[bytes, bytes]:
        """The notes left in the sink row: each try's ``c:task-*`` cell."""
        from sparkbarrier.connectors.hbase.sink._commit_table import read_sink_row
        from sparkbarrier.connectors.hbase.client._connection import HBaseConnection

        conn = HBaseConnection(self.opts, 0)
        try:
            return {n.column(): n.to_bytes() for n in read_sink_row(conn, self.opts.commit_table,
                                                                    self.opts.sink_id).notes}
        finally:
            conn.close()

    def note_rows(self) -> int:
        """How many chunk rows of notes this sink has in the commit table."""
        conn = happybase.Connection(self.opts.host, self.opts.port)
        mark = b"\x00" + (self.opts.sink_id or "").encode() + b"\x00"
        try:
            return sum(1 for key, _ in conn.table(self.opts.commit_table).scan(row_prefix=b"\x01", columns=[b"c:keys"])
                       if mark in key)
        finally:
            conn.close()
