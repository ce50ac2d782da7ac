"""A Spark data source (streaming sink) around a user's checkpointed sink function.

``sparkbarrier.checkpointed_sink(spark, "my-store", MyFunction)`` registers the data source
:func:`sink_data_source` builds, named ``my-store``; ``df.writeStream.format("my-store")``
then runs ``MyFunction`` under the checkpoint protocol (see ``sparkbarrier.barrier._sink``
for the call order). The sink's options reach the function in its :class:`SinkContext`; keys starting with
``checkpoint.`` and ``delivery.guarantee`` are the adapter's own, declared in
:data:`ADAPTER_SPECS` (the docs/checkpointed-sinks.md table is generated from them).

Which process runs what (pyspark 4.3; pinned by ``tests/connectors/checkpointed/test_start_once.py``):
Spark calls ``DataSource.streamWriter`` anew for every batch in a write-planning worker
(``write_into_data_source.py``) and for every commit or abort in a commit worker
(``python_streaming_sink_runner.py``). Both are pooled, reused Python workers, so
neither the writer instance nor "the driver's function" survives from one call to the
next: only module state of a reused worker process does. Hence:

* ``validate(options, schema)`` (a hook, no-op by default) runs in the planning worker, on the first
  batch's planning, at most once per process and sink (same options and schema): the
  checks that must fail the query before its first batch (bad options, a missing
  table). pyspark builds the planning worker's DataSource from its class for every
  batch, so that worker cannot tell a restart from the next batch: a restart in the
  same Spark application validates again only in planning workers that never saw it;
* ``start(options, schema)`` (a hook, no-op by default) runs in the commit worker, lazily, once per
  query run and process, before that process's first ``notify_checkpoint_*`` call; the
  started instance is kept in :mod:`._runs` and every later commit and abort of the run
  in that process calls it. A query run is one ``DataSource`` instance: Spark creates
  it when the query starts, so a restart (same checkpoint) starts again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..._exceptions import ConfigError, SinkError
from ...barrier import DeliveryGuarantee
from ...barrier._sink import CheckpointedSink, SinkContext
from .._options import OptionSpec, OptionValues, parse_bool, parse_options, parse_stripped
from ._driver_commit import Completion, check_state_directory, checkpoint_location, state_directory
from ._options import DELIVERY_GUARANTEE, RENAMED_SINK_OPTIONS
from ._runs import CheckKey, RunKey, new_plan_id, new_run_id, started_function, validate_once
from ._task import TaskCommitMessage, run_task

log = logging.getLogger(__name__)

__all__ = [
    "ADAPTER_OPTIONS",
    "ADAPTER_SPECS",
    "CheckpointedStreamWriter",
    "checkpointed_options_table",
    "sink_data_source",
]

ADAPTER_PREFIX = "checkpoint."
ADAPTER_SPECS: tuple[OptionSpec, ...] = (
    DELIVERY_GUARANTEE,
    OptionSpec("checkpoint.state.location", parse_stripped, "",
               "where the applied-checkpoint ledger lives (a path or a URI: hdfs://, s3a://, ...); "
               "default `<checkpointLocation>/sparkbarrier/<name>`, on the checkpoint's file system"),
    OptionSpec("checkpoint.state.allowMismatch", parse_bool, False,
               "restore a ledger written for another sink instead of refusing it", type_name="bool"),
)
ADAPTER_OPTIONS = tuple(spec.key for spec in ADAPTER_SPECS)


@dataclass
class _Message(WriterCommitMessage):
    """Spark wants a WriterCommitMessage; it carries the task's report."""

    report: TaskCommitMessage


def _adapter_options(options: dict[str, str], name: str) -> OptionValues:
    """Parse the adapter's keys: ``delivery.guarantee`` and ``checkpoint.*`` (the rest belongs to the function)."""
    own = {k: v for k, v in options.items()
           if k.lower().startswith(ADAPTER_PREFIX) or k.lower() == DELIVERY_GUARANTEE.key}
    values, _ = parse_options(own, ADAPTER_SPECS, source_name=f"checkpointed sink {name!r}",
                              renamed=RENAMED_SINK_OPTIONS)
    return values


def _lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's option map is case-insensitive; adapter options are matched case-insensitively."""
    out = dict(options)
    for key in ADAPTER_OPTIONS:
        for k in list(out):
            if k.lower() == key.lower() and k != key:
                out[key] = out.pop(k)
    return out


class CheckpointedStreamWriter(DataSourceStreamArrowWriter):
    """Built per batch (planning worker) and per commit (commit worker); see the module docstring.

    The constructor is cheap: it parses the adapter's options and, once per query run
    and process, runs the function's ``validate``. ``start`` never runs here; the
    commit and abort paths get the run's started function from :func:`started_function`.
    """

    def __init__(self, name: str, factory: Callable[[], CheckpointedSink], options: dict[str, str],
                 schema: StructType, run_id: str = "", plan_id: str = "") -> None:
        self.name, self.factory, self.options, self.schema = name, factory, _lower_keys(options), schema
        adapter = _adapter_options(self.options, name)
        self.guarantee = adapter.choice(DELIVERY_GUARANTEE.key, DeliveryGuarantee)
        self.allow_mismatch = adapter.flag("checkpoint.state.allowMismatch")
        self.run = RunKey(run_id or new_run_id(), name, self.options.get("sink.id", ""),
                          checkpoint_location(self.options) or "")
        self.plan_id = plan_id or new_plan_id()  # this batch's, when built by the planning worker (``_runs``)
        self.uses_ledger = _checked(factory(), name).uses_ledger  # constructing is cheap; start is not
        self.state_dir = state_directory(self.options, name) if self.uses_ledger else None

    def validate_at_query_start(self) -> None:
        """Planning worker: the function's ``validate`` and our own warning, once per run and process."""
        def check() -> None:
            self.factory().validate(self.options, self.schema)
            check_state_directory(self.options, self.name, self.state_dir)
            _warn_if_offsets_unrecordable(self.name, self.schema, checkpoint_location(self.options))

        # The planning worker builds its DataSource from the class and options for every
        # batch (write_into_data_source.py), so no run id reaches it: key by what was given.
        given = hashlib.sha256(json.dumps([sorted(self.options.items()), self.schema.json()]).encode()).hexdigest()
        validate_once(CheckKey(self.run.sink, self.run.sink_id, self.run.checkpoint_location, given), check)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        if ctx is None or batch is None or query is None:
            raise SinkError(f"sink {self.name!r} is a streaming sink: no micro-batch id in the task context")
        context = SinkContext(self.name, query, int(batch), ctx.partitionId(), ctx.attemptNumber(), self.options,
                              plan_id=self.plan_id)
        return _Message(run_task(self.factory(), context, iterator, guarantee=self.guarantee))

    def _completion(self) -> Completion:
        identity = {"sink": self.name, "sink.id": self.options.get("sink.id", "")}
        fn = started_function(self.run, self.factory, self.options, self.schema)
        return Completion(fn, identity, self.state_dir, allow_mismatch=self.allow_mismatch,
                          checkpoint_location=checkpoint_location(self.options))

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self._completion().commit(_reports(messages), batchId)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self._completion().abort(_reports(messages), batchId)


def _warn_if_offsets_unrecordable(name: str, schema: StructType, location: str | None) -> None:
    """Say at query start when the sink could not learn the Kafka offsets of its batches.

    Without barrier markers they come from Spark's offset log, which the commit worker
    reads on the checkpoint's file system (``connectors/storage/_files.py``): a location it
    cannot reach would leave every commit record without offsets.

    Never raises: a check that exists to warn must not fail the query (it once did, on
    fsspec's ``RuntimeError: Namenode is in startup mode`` during a NameNode restart).
    The listing rides through restarts and failovers within the file system's retry
    bound; whatever still fails, of whatever type, is logged as the warning.
    """
    from ...barrier import MARKER_COLUMNS
    from ..storage._files import folder, is_local

    if set(MARKER_COLUMNS) <= set(schema.names) or (location and is_local(location)):
        return
    if not location:
        log.warning("sink %r cannot record the Kafka offsets of its batches: the stream has no barrier marker "
                    "columns and the query has no checkpointLocation", name)
        return
    try:
        folder(location).names()
    except Exception as exc:  # noqa: BLE001 -- reported as the warning, never raised: see the docstring
        log.warning("sink %r cannot record the Kafka offsets of its batches: the driver cannot read Spark's "
                    "offset log at %r (%s: %s). For hdfs:// set HADOOP_CONF_DIR to the cluster's Hadoop "
                    "configuration (or SPARKBARRIER_WEBHDFS=http://namenode:9870); or, reading barrier-kafka, set "
                    ".option('barrierMarkers', 'true') and keep the marker columns "
                    "(sparkbarrier.connectors.checkpointed.keep_markers)", name, location, type(exc).__name__, exc)


def _checked(fn: object, name: str) -> CheckpointedSink:
    """``fn`` if it subclasses CheckpointedSink, whose defaults the adapter relies on."""
    if not isinstance(fn, CheckpointedSink):
        raise ConfigError(f"sink {name!r}: the factory returned a {type(fn).__name__}, not a subclass of "
                          "sparkbarrier.barrier.CheckpointedSink (or TwoPhaseCommitSink), which declares "
                          "the hooks the adapter calls")
    return fn


def _reports(messages: Sequence[WriterCommitMessage | None]) -> list[TaskCommitMessage]:
    return [m.report for m in messages if isinstance(m, _Message)]


def sink_data_source(name: str, factory: Callable[[], CheckpointedSink]) -> type[DataSource]:
    """A DataSource class named ``name`` whose streaming writer runs ``factory()``'s functions."""

    class CheckpointedSinkSource(DataSource):
        def __init__(self, options: dict[str, str]) -> None:
            # Spark creates an instance at query start and pickles it to every commit
            # worker: its id names the query run there (the planning worker builds an
            # instance of its own for every batch; ``_runs``).
            super().__init__(options)
            self.run_id = new_run_id()

        @classmethod
        def name(cls) -> str:
            return name

        def streamWriter(self, schema: StructType, overwrite: bool) -> CheckpointedStreamWriter:  # noqa: ARG002 -- Spark's
            writer = CheckpointedStreamWriter(name, factory, dict(self.options), schema, self.run_id)
            writer.validate_at_query_start()
            return writer

    CheckpointedSinkSource.__qualname__ = CheckpointedSinkSource.__name__ = f"CheckpointedSink[{name}]"
    return CheckpointedSinkSource


def checkpointed_options_table() -> str:
    """Markdown table of the adapter's ``checkpoint.*`` options (for docs/checkpointed-sinks.md)."""
    from .._options import options_table

    return options_table(ADAPTER_SPECS)
