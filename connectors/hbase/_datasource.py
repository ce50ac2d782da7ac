"""The ``barrier-hbase`` data source: exactly-once streaming sink, batch writer, committed-view reader.

Sink (``df.writeStream.format("barrier-hbase")``), batch writer (``df.write``: one committed
batch, ``batch._df_write``) and batch reader (``spark.read.format("barrier-hbase")``). Their
options are declared once, in
:data:`~sparkbarrier.connectors.hbase._options.SINK_OPTION_SPECS` and
:data:`~sparkbarrier.connectors.hbase._options.READ_OPTION_SPECS`; the tables in
docs/options.md are generated from them (``hbase_options_table()``,
``hbase_read_options_table()``). The reader takes its schema from the commit record,
plans one Spark partition per region, and reads the committed or as-of view.

Everything is validated when the query starts (``HBaseSinkFunction.validate``, on the
first batch's planning, once per query run and planning process): options, row key /
op column present, column types supported, the table and its families (versions >= 2;
a warning where deleted cells are not kept, given once per ``sink.id``: the commit
table remembers it), and the commit table is created if missing. Commits reuse the
run's started function (``connectors/checkpointed/_runs.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..checkpointed._runs import new_run_id
from .read._key_ranges import FULL, KeyRange, split_by_regions

# The rest is imported in the methods that use it, for Spark's planning workers that only
# look the format up or create it (see the package's lazy exports).
if TYPE_CHECKING:
    import pyarrow as pa

    from ..checkpointed._source import CheckpointedStreamWriter
    from ._options import HBaseReadOptions
    from .client._connection import HBaseConnection
    from .sink._commit_table import CommitRecord

__all__ = ["BarrierHBaseDataSource", "HBaseCommittedReader"]


class BarrierHBaseDataSource(DataSource):
    """``barrier-hbase``: see the module docstring for the options contract."""

    @classmethod
    def name(cls) -> str:
        return "barrier-hbase"

    def schema(self) -> StructType:
        from ._options import parse_read_options
        from .client._connection import HBaseConnection
        from .read._reader import committed_schema

        opts = parse_read_options(self.options)
        conn = HBaseConnection(opts)
        try:
            return committed_schema(_view(conn, opts))
        finally:
            conn.close()

    def reader(self, schema: StructType) -> DataSourceReader:
        from ._options import parse_read_options
        from .client._connection import HBaseConnection
        from .read._reader import region_ranges

        opts = parse_read_options(self.options)
        conn = HBaseConnection(opts)
        try:
            record = _view(conn, opts)
            regions = region_ranges(conn, record.table)
        finally:
            conn.close()
        cls = HBaseFilteringReader if opts.filter_pushdown else HBaseCommittedReader
        return cls(dict(self.options), record, regions, schema)

    def __init__(self, options: dict[str, str]) -> None:
        # The instance Spark creates at query start, and pickles to the commit worker, names
        # the query run there (the commit worker's started function is kept per run).
        super().__init__(options)
        self.run_id = new_run_id()

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._unpickled = True

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write``: one committed batch of a write series (``batch._df_write``); planning
        worker, once per ``save()``."""
        from .batch._df_write import plan_batch_write

        return plan_batch_write(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> CheckpointedStreamWriter:  # noqa: ARG002 -- Spark's
        """Called by pyspark's planning worker once per batch, on an instance it builds from
        this class for that batch (``write_into_data_source``): the batch's plan id is an
        epoch raised in the commit table, shipped to the tasks in the pickled writer. Also
        called by the commit worker for every commit and abort, on an instance it
        *unpickles* (``python_streaming_sink_runner``): that writer only commits, so it
        raises no epoch (one round trip less on the driver's serial path)."""
        from ..checkpointed._source import CheckpointedStreamWriter
        from .sink._sink_function import HBaseSinkFunction, raise_plan_id

        if getattr(self, "_unpickled", False):  # the commit worker
            return CheckpointedStreamWriter(self.name(), HBaseSinkFunction, dict(self.options), schema, self.run_id)
        writer = CheckpointedStreamWriter(self.name(), HBaseSinkFunction, dict(self.options), schema, self.run_id,
                                          plan_id="-")
        writer.validate_at_query_start()  # creates the commit table on the first batch
        writer.plan_id = raise_plan_id(self.options)
        return writer


def _view(conn: HBaseConnection, opts: HBaseReadOptions) -> CommitRecord:
    from .read._reader import find_commit, view_record

    latest = find_commit(conn, opts.commit_table, opts.table, opts.sink_id)
    return view_record(conn, opts.commit_table, latest, as_of_batch=opts.as_of_batch, as_of_ms=opts.as_of_ms)


class ScanPartition(InputPartition):
    """One row-key range inside one region (picklable)."""

    def __init__(self, index: int, start: bytes, stop: bytes, *, empty: bool = False) -> None:
        super().__init__(index)
        self.start, self.stop, self.empty = start, stop, empty


class HBaseCommittedReader(DataSourceReader):
    """Batch read of a committed or as-of view: one partition per region and key range.

    The commit record is resolved once, on the driver, when the reader is created, so
    every partition reads the same checkpoint even while the sink keeps committing.
    """

    def __init__(self, options: dict[str, str], record: CommitRecord, regions: list[KeyRange],
                 schema: StructType) -> None:
        self._options = options
        self._record = record
        self._regions = regions
        key_field = next((f for f in schema.fields if f.name == record.rowkey), None)
        self._key_type = key_field.dataType if key_field is not None else None
        self._ranges: list[KeyRange] = [FULL]

    def partitions(self) -> Sequence[InputPartition]:
        ranges = split_by_regions(self._ranges, self._regions)
        if not ranges:  # the pushed filters exclude every key
            return [ScanPartition(0, b"", b"", empty=True)]
        return [ScanPartition(i, start, stop) for i, (start, stop) in enumerate(ranges)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from ._options import parse_read_options
        from .client._connection import HBaseConnection
        from .read._reader import iter_committed

        if not isinstance(partition, ScanPartition) or partition.empty:
            return
        conn = HBaseConnection(parse_read_options(self._options), partition.value)
        try:
            yield from iter_committed(conn, self._record, (partition.start, partition.stop))
        finally:
            conn.close()


class HBaseFilteringReader(HBaseCommittedReader):
    """The reader with row-key filter pushdown (option ``filter.pushdown=true``).

    A separate class because Spark refuses a reader that implements ``pushFilters``
    while ``spark.sql.python.filterPushdown.enabled`` is false (its default).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        from .read._pushdown import rowkey_ranges

        self._ranges, rest = rowkey_ranges(filters, self._record.rowkey, self._key_type)
        yield from rest
