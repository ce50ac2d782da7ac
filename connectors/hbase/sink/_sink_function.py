"""``barrier-hbase`` as a checkpointed sink: the sink is one user of the generic API.

The generic adapter (``sparkbarrier.connectors.checkpointed``) runs this function: on
executors ``initialize_state`` agrees on the batch's timestamp base, ``invoke`` nets
rows into the mutation buffer, ``snapshot_state`` reports at every aligned barrier
(writing nothing: a task writes each key once, at the end of its input) and at the end of
the task, after that one write, and returns the task's :class:`HBaseCommitMessage` as its handle;
on the driver ``notify_checkpoint_complete`` writes the commit record with the Kafka
offsets the barriers carried. The commit table is the durable record of what was
applied (a replay of a committed batch is a no-op there), so the adapter's own ledger
is not needed (``uses_ledger = False``); the Kafka offsets of each batch come from the
barriers or from Spark's offset log, wherever the checkpoint is (``connectors/storage/_files.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from ...._exceptions import ProtocolError
from ....barrier._sink import CheckpointedSink, CompletedCheckpoint, SinkContext
from .._options import HBaseSinkOptions, parse_sink_options
from ..client._admin import DeletedCellsNotice, prepare_table, table_exists
from ..client._connection import HBaseConnection
from ..client._connection_pool import connect, release
from ..client._thrift2 import Thrift2Admin
from ._attempts import check_formats, check_writes
from ._column_layout import SinkLayout, data_field_names
from ._commit_table import ensure_commit_table, raise_plan_epoch, read_sink_row
from ._committer import Committer, HBaseCommitMessage
from ._notices import first_notice, forget_notice
from ._timestamps import MIN_TABLE_VERSIONS, now_ms

if TYPE_CHECKING:
    from pyspark.sql.types import StructType
from ._writer import HBaseTaskWriter, TaskIdentity

__all__ = ["HBaseSinkFunction", "raise_plan_id"]

log = logging.getLogger(__name__)

TABLE_NOTICE = "table"


def _arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


class HBaseSinkFunction(CheckpointedSink):
    """The ``CheckpointedSink`` behind ``writeStream.format("barrier-hbase")``."""

    uses_ledger = False

    def __init__(self) -> None:
        self.opts: HBaseSinkOptions | None = None
        self.layout: SinkLayout | None = None
        self.schema_json = ""
        self.warnings: list[str] = []
        self._writer: HBaseTaskWriter | None = None
        self._ended = False

    @classmethod
    def around(cls, writer: HBaseTaskWriter) -> HBaseSinkFunction:
        """A function over an existing writer: tests and benchmarks run one task without Spark."""
        fn = cls()
        fn._writer = writer
        return fn

    # -- planning worker, query start (once per run and process) ---------------

    def validate(self, options: Mapping[str, str], schema: StructType) -> None:
        """Fail the query before its first batch: options, schema, the table, the commit table.

        The only place that connects at query start (one Thrift connection, and one
        Thrift2 admin connection); the adapter runs it once per query run per planning
        process, and :meth:`_tell` keeps its warning to once per ``sink.id`` across
        processes. Every check runs on every start (a table can be dropped, altered or
        created between two queries of one process). The tables are found by their own
        descriptors, not by listing every table; the Thrift connection goes back to the
        pool when every check passed, so the batch's plan epoch (:func:`raise_plan_id`,
        next in this worker) is raised on it, not on a new socket (a new handshake, secured).
        """
        self._parse(options, schema)
        opts, layout = self._parsed()
        if opts.kerberos is not None:  # credentials first: their error names the option to fix
            from ..client._sasl import check_credentials

            check_credentials(opts.kerberos)
        conn = connect(opts)
        thrift2 = self._thrift2()
        admin = thrift2() if thrift2 is not None else None
        checked = False
        try:
            notice = prepare_table(conn, opts.table, layout.families, create=opts.create_table, thrift2=admin,
                                   min_versions=MIN_TABLE_VERSIONS, require_deleted_cells=opts.exactly_once)
            if not table_exists(conn, opts.commit_table):
                ensure_commit_table(conn, opts.commit_table)
            if opts.sink_id:  # a replay under other options, or over an older format, is refused before any task writes
                row = read_sink_row(conn, opts.commit_table, opts.sink_id)
                check_formats(row.state.commit, row.state.attempt, sink_id=opts.sink_id,
                              commit_table=opts.commit_table, notes=row.notes)
                check_writes(row.state.commit, row.state.attempt, opts.write_shape(), opts.sink_id)
            self._tell(conn, notice)
            checked = True
        finally:
            if checked:  # a check that failed may leave the socket mid-answer: never kept
                release(conn)
            else:
                conn.close()
            if admin is not None:
                admin.close()

    def _tell(self, conn: HBaseConnection, notice: DeletedCellsNotice | None) -> None:
        """Warn about the table once per ``sink.id``, not once per planning process and start.

        Every planning worker of every start checks the table; the first one to record
        the notice in the commit table warns (with the fix), the rest log it at INFO.
        None means the families are known to keep deleted cells: the record goes, so a
        later regression is news again. Without a ``sink.id`` (the default one needs the
        query id, which planning does not see) the warning is given per process.
        """
        opts, _ = self._parsed()
        if notice is None:
            if opts.sink_id:
                forget_notice(conn, opts.commit_table, opts.sink_id, TABLE_NOTICE)
            return
        if opts.sink_id and not first_notice(conn, opts.commit_table, opts.sink_id, TABLE_NOTICE, notice.key()):
            log.info("%s (warned once, when sink.id %s first met it)", notice.text(), opts.sink_id)
            return
        log.warning("%s", notice.text())
        self.warnings.append(notice.text())

    # -- commit worker, once per run and process ---------------------------------

    def start(self, options: Mapping[str, str], schema: StructType) -> None:
        """Keep what every commit needs (options, layout); no connection: :meth:`validate` checked the store."""
        self._parse(options, schema)

    def _parse(self, options: Mapping[str, str], schema: StructType) -> None:
        from pyspark.sql.types import StructType

        opts = self.opts = parse_sink_options(options)
        data_schema = StructType([f for f in schema.fields if f.name in data_field_names(schema.names)])
        self.layout = SinkLayout.build(_arrow_schema(data_schema), rowkey=opts.rowkey, op_column=opts.op_column,
                                       default_family=opts.column_family, mapping=opts.explicit_mapping())
        self.schema_json = data_schema.json()

    def _parsed(self) -> tuple[HBaseSinkOptions, SinkLayout]:
        """The options and layout; an explicit error (an ``assert`` vanishes under
        ``python -O``) when Spark called out of the order the adapter guarantees."""
        if self.opts is None or self.layout is None:
            raise ProtocolError("barrier-hbase: the sink was used before its options were "
                                "parsed (a bug in the call order, please report it)")
        return self.opts, self.layout

    def _task_writer(self) -> HBaseTaskWriter:
        if self._writer is None:
            raise ProtocolError("barrier-hbase: rows arrived before the task's writer began "
                                "(a bug in the call order, please report it)")
        return self._writer

    def _thrift2(self) -> Callable[[], Thrift2Admin] | None:
        """A factory of Thrift2 admin connections (always in exactly-once mode), or None.

        Each goes through the shared gateway loop over ``hbase.thrift2.host``, with the same
        TLS, Kerberos and ``hbase.thrift.failover.*`` as every Thrift1 connection.
        """
        opts = self.opts
        if opts is None or not opts.thrift2_gateways:
            return None
        return lambda: Thrift2Admin(opts)

    # -- executor ----------------------------------------------------------------

    def initialize_state(self, context: SinkContext) -> None:
        if self._writer is None:
            opts = parse_sink_options(context.options)
            self._writer = HBaseTaskWriter(opts, TaskIdentity(context.query_id, context.batch_id,
                                                              context.partition_id, context.plan_id))
        self._writer.begin()

    def invoke(self, batch: pa.RecordBatch) -> None:
        self._task_writer().add(batch)

    def snapshot_state(self, batch_id: int) -> HBaseCommitMessage:  # noqa: ARG002 -- CheckpointedSink's
        """Report at a barrier (nothing is written there); after :meth:`end_of_input`, write the task's netted keys."""
        return self._task_writer().snapshot(final=self._ended)

    def end_of_input(self) -> bool:
        """The task's input is done: the next snapshot is the last one and writes everything.

        True: that snapshot must run even without new data: it is the one that writes.
        """
        self._ended = True
        return True

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    # -- driver --------------------------------------------------------------------

    def committer(self) -> Committer:
        opts, layout = self._parsed()
        columns = [[t.name, t.family.decode(), t.qualifier.decode()] for t in layout.targets]
        return Committer(connect(opts), opts.commit_table, opts.table,
                         fenced=opts.exactly_once, schema_json=self.schema_json, rowkey=opts.rowkey,
                         columns=columns, thrift2=self._thrift2())

    def notify_checkpoint_complete(self, batch_id: int, completed: CompletedCheckpoint) -> None:
        committer = self.committer()
        committed = False
        try:
            committer.commit(_messages(completed), batch_id, offsets=completed.source_offsets,
                             source_checkpoints=completed.source_checkpoints)
            committed = True
        finally:
            committer.close(keep=committed)

    def notify_checkpoint_aborted(self, batch_id: int, completed: CompletedCheckpoint | None = None) -> None:
        if completed is not None:
            committer = self.committer()
            try:
                committer.abort(_messages(completed), batch_id)  # writes nothing
            finally:
                committer.close(keep=True)  # its connection was not used: as clean as it came


def raise_plan_id(options: Mapping[str, str]) -> str:
    """The id of a newly planned batch (planning worker, once per batch; ``_attempts``).

    In both delivery modes an epoch raised in the commit table (``e`` and 19 digits), so a
    later plan sorts after every earlier one whatever the drivers' clocks say, and a
    ``sink.id`` can move from one mode to the other and back (plans of both compare); one
    increment on a kept connection. After ``@``, the driver's clock at planning: the one
    clock a new attempt of this plan takes its timestamp base from (``plan_clock``), so
    no executor's clock decides where a batch writes.
    """
    opts = parse_sink_options(options)
    conn = connect(opts)
    epoch = raise_plan_epoch(conn, opts.commit_table)
    release(conn)
    return f"e{epoch:019d}@{now_ms()}"


def _messages(completed: CompletedCheckpoint) -> list[HBaseCommitMessage]:
    """The checkpoint's handles: this function's :meth:`~HBaseSinkFunction.snapshot_state`
    results, back from a pickle (the committer ignores anything else, as it did before)."""
    return [h for h in completed.handles if isinstance(h, HBaseCommitMessage)]
