"""Query-run state of a checkpointed sink inside one reused pyspark worker process.

pyspark 4.3 builds a fresh stream writer for every batch (write-planning worker) and
for every commit (commit worker), from a pickled ``DataSource``; those workers are
pooled and reused (``spark.python.worker.reuse``, on by default). An instance cannot
carry state from one call to the next, but a module of a reused process can. This
module is that place, keyed by the query *run* (one ``DataSource`` instance, created
by Spark when the query starts) and the sink:

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

__all__ = ["RunKey", "forget_runs", "new_run_id", "started_function", "validate_once"]

_lock = threading.Lock()
_started: dict[RunKey, CheckpointedSink] = {}
_validated: set[RunKey] = set()


@dataclass(frozen=True)
class RunKey:
    """One query run of one sink: ``run_id`` is per ``DataSource`` instance (per query start)."""

    run_id: str
    sink: str
    sink_id: str
    checkpoint_location: str

    def same_sink(self, other: RunKey) -> bool:
        return (self.sink, self.sink_id, self.checkpoint_location) == (other.sink, other.sink_id,
                                                                        other.checkpoint_location)


def new_run_id() -> str:
    """A run id that sorts by when it was made (13-digit epoch ms, then 16 random hex digits).

    Sinks order plans of one batch by it: a replay planned after a driver restart sorts
    after the plan that died (``connectors/hbase/_attempts``).
    """
    return f"{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:16]}"


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


def validate_once(run: RunKey, check: Callable[[], None]) -> None:
    """Run ``check`` the first time this process plans a batch of ``run``; a failure is not remembered."""
    with _lock:
        if run in _validated:
            return
        check()
        for old in [k for k in _validated if k.same_sink(run)]:
            _validated.discard(old)
        _validated.add(run)


def forget_runs() -> None:
    """Drop every run (tests that reuse a process for unrelated queries)."""
    with _lock:
        _started.clear()
        _validated.clear()
