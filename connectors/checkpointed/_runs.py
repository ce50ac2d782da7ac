"""Query-run state of a checkpointed sink inside one reused pyspark worker process, and the ids.

pyspark 4.3 builds a fresh stream writer for every batch and for every commit, in pooled,
reused Python workers (``spark.python.worker.reuse``, on by default), and the two get
their ``DataSource`` differently (pinned by ``tests/connectors/checkpointed/test_start_once.py``
and ``tests/connectors/hbase/test_spark_sink.py``):

* the write-planning worker (``write_into_data_source``) builds a *new* instance from the
  class for every batch and pickles that batch's writer to its tasks: a **plan id**
  (:func:`new_plan_id`, ``SinkContext.plan_id``) made there names one planned batch,
  shared by its tasks, their retries and their speculative copies;
* the commit worker (``python_streaming_sink_runner``) unpickles the instance Spark
  created when the query started, for every commit and abort: its **run id**
  (:func:`new_run_id`, ``RunKey.run_id``) names one query run (a restart makes another).

An instance cannot carry state from one call to the next, but a module of a reused
process can. This module is that place, keyed by the query run and the sink:

* :func:`started_function` - the commit worker's function of the run: ``factory()``,
  then its ``start(options, schema)`` once, before the first notification it serves;
* :func:`validate_once` - the planning worker's query-start checks, once per key (the
  planning worker gets no run id: it builds a new DataSource from the class per batch).

What this cannot give: one process per query. The JVM takes any idle worker from its
pool for a commit, so a run whose commits land on two workers starts twice, once in
each (each commit still sees the instance started in its own process for its run).
State that must be shared across processes belongs in the store (a commit table, a
ledger), as Flink's does in its checkpoint.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from ...barrier import CheckpointedSink

__all__ = ["CheckKey", "RunKey", "forget_runs", "new_plan_id", "new_run_id", "started_function", "validate_once"]

_lock = threading.Lock()
_started: dict[RunKey, CheckpointedSink] = {}
_validated: set[CheckKey] = set()


@dataclass(frozen=True)
class RunKey:
    """One query run of one sink: ``run_id`` is the query-start ``DataSource`` instance's (the
    commit worker unpickles that instance for every commit)."""

    run_id: str
    sink: str
    sink_id: str
    checkpoint_location: str

    def same_sink(self, other: RunKey) -> bool:
        return (self.sink, self.sink_id, self.checkpoint_location) == (other.sink, other.sink_id,
                                                                        other.checkpoint_location)


def new_run_id() -> str:
    """A query run's id (13-digit epoch ms, then 16 random hex digits): unique, and readable."""
    return f"{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:16]}"


def new_plan_id() -> str:
    """A planned batch's id for a sink that orders nothing by it: unique, roughly time-ordered.

    ``barrier-hbase`` orders plans and makes its own, from an epoch in its commit table
    (``connectors/hbase/sink/_sink_function.raise_plan_id``): no clock decides which plan is newer.
    """
    return new_run_id()


def started_function(run: RunKey, factory: Callable[[], CheckpointedSink], options: Mapping[str, str],
                     schema: StructType) -> CheckpointedSink:
    """The run's started function in this process; ``start`` runs on the first call only.

    A new run of the same sink (a restart) replaces the previous run's entry, so a
    long-lived worker keeps one function per sink. A failing ``start`` keeps nothing:
    the next commit or abort tries again (and fails the same way if nothing changed).
    """
    with _lock:
        fn = _started.get(run)
        if fn is not None:
            return fn
        fn = factory()
        fn.start(dict(options), schema)
        for old in [k for k in _started if k.same_sink(run)]:
            del _started[old]
        _started[run] = fn
        return fn


@dataclass(frozen=True)
class CheckKey:
    """What a query-start check was run for: one sink, under one ``sink.id``, at one place
    (``where``: a stream's checkpoint location, or the write series of batch writes),
    with the options and schema whose digest is ``given`` (the planning worker builds its
    ``DataSource`` anew for every batch, so no run id reaches it)."""

    sink: str
    sink_id: str
    where: str
    given: str

    def same_sink(self, other: CheckKey) -> bool:
        return (self.sink, self.sink_id, self.where) == (other.sink, other.sink_id, other.where)


def validate_once(key: CheckKey, check: Callable[[], None]) -> None:
    """Run ``check`` the first time this process plans a batch of ``key``; a failure is not remembered.

    A check of the same sink with other options replaces the one remembered, so going back
    to the first options checks again."""
    with _lock:
        if key in _validated:
            return
        check()
        for old in [k for k in _validated if k.same_sink(key)]:
            _validated.discard(old)
        _validated.add(key)


def forget_runs() -> None:
    """Drop every run (tests that reuse a process for unrelated queries)."""
    with _lock:
        _started.clear()
        _validated.clear()
