"""The ``barrier-hbase`` data source: exactly-once streaming sink + committed-view batch reader.

Sink options (``df.writeStream.format("barrier-hbase")``; generated table in the README):

* required: ``table``, ``rowkey``; connection: ``hbase.thrift.host`` (localhost),
  ``hbase.thrift.port`` (9090), ``hbase.thrift.transport`` (buffered|framed),
  ``hbase.thrift.protocol`` (binary|compact)
* mapping: ``column.family`` (``d``), ``columns`` (``col=family:qualifier,...``),
  ``op.column`` (``upsert``|``delete``), ``sink.ignore-null-value`` (true)
* ``create.table`` (false), ``sink.buffer-flush.max-rows`` (1000), ``.max-size`` (2mb),
  ``.interval`` (1s), ``delivery.guarantee`` (exactly-once|at-least-once),
  ``sink.id`` (``query-<query id>``), ``commit.table`` (``sparkbarrier_commits``)

Reader options (``spark.read.format("barrier-hbase")``): the connection options,
``table``, ``commit.table`` and ``sink.id`` (needed only when several sinks committed
to the table). The schema comes from the commit record.

Everything is validated when the query starts (``streamWriter`` on the driver):
options, row key / op column present, column types supported, the table and its
families (versions >= 2, no TTL), and the commit table is created if missing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from ._admin import prepare_table
from ._commit_table import ensure_commit_table
from ._committer import Committer
from ._connection import HBaseConnection
from ._layout import SinkLayout, data_field_names
from ._options import HBaseSinkOptions, parse_read_options, parse_sink_options
from ._reader import committed_schema, find_commit, iter_committed
from ._writer import HBaseTaskWriter, TaskIdentity

__all__ = ["BarrierHBaseDataSource", "HBaseStreamWriter", "HBaseCommittedReader"]


def _arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


class BarrierHBaseDataSource(DataSource):
    """``barrier-hbase``: see the module docstring for the options contract."""

    @classmethod
    def name(cls) -> str:
        return "barrier-hbase"

    def schema(self) -> StructType:
        values = parse_read_options(self.options)
        conn = _read_connection(values)
        try:
            record = find_commit(conn, str(values["commit.table"]), str(values["table"]),
                                 str(values["sink.id"]) or None)
            return committed_schema(record)
        finally:
            conn.close()

    def reader(self, schema: StructType) -> DataSourceReader:
        return HBaseCommittedReader(dict(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> HBaseStreamWriter:
        opts = parse_sink_options(self.options)
        return HBaseStreamWriter(opts, schema, validate=True)


def _read_connection(values: dict[str, Any]) -> HBaseConnection:
    return HBaseConnection(str(values["hbase.thrift.host"]), int(values["hbase.thrift.port"]),
                           transport=str(values["hbase.thrift.transport"]),
                           protocol=str(values["hbase.thrift.protocol"]),
                           timeout_ms=int(values["hbase.thrift.timeout"]))


class HBaseStreamWriter(DataSourceStreamArrowWriter):
    """Driver: validates at construction; executors: :meth:`write`; driver: commit/abort."""

    def __init__(self, opts: HBaseSinkOptions, schema: StructType, *, validate: bool = True) -> None:
        self.opts = opts
        data_schema = StructType([f for f in schema.fields if f.name in data_field_names(schema.names)])
        self.layout = SinkLayout.build(_arrow_schema(data_schema), rowkey=opts.rowkey, op_column=opts.op_column,
                                       default_family=opts.column_family, mapping=opts.explicit_mapping())
        self.schema_json = data_schema.json()
        if validate:
            conn = HBaseConnection.from_options(opts)
            try:
                prepare_table(conn, opts.table, self.layout.families, create=opts.create_table)
                ensure_commit_table(conn, opts.commit_table)
            finally:
                conn.close()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return HBaseTaskWriter(self.opts, TaskIdentity.from_task_context()).run(iterator)

    def _committer(self) -> Committer:
        columns = [[t.name, t.family.decode(), t.qualifier.decode()] for t in self.layout.targets]
        return Committer(HBaseConnection.from_options(self.opts), self.opts.commit_table, self.opts.table,
                         fenced=self.opts.exactly_once, schema_json=self.schema_json,
                         rowkey=self.opts.rowkey, columns=columns)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        committer = self._committer()
        try:
            committer.commit(messages, batchId)
        finally:
            committer.close()

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self._committer().abort(messages, batchId)  # writes nothing; opens no connection


class HBaseCommittedReader(DataSourceReader):
    """Batch read of the committed view (one partition; the scan streams in chunks)."""

    def __init__(self, options: dict[str, str]) -> None:
        self._options = options

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        values = parse_read_options(self._options)
        conn = _read_connection(values)
        try:
            record = find_commit(conn, str(values["commit.table"]), str(values["table"]),
                                 str(values["sink.id"]) or None)
            yield from iter_committed(conn, record)
        finally:
            conn.close()
