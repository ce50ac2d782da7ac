"""Which process and instance runs a checkpointed sink's ``start``, ``validate`` and commits (issue 20).

pyspark 4.3 builds a new stream writer for every batch and every commit, in pooled
worker processes; these tests count the calls over a real query and a restart so that
"once per query run" stays true (see ``connectors/checkpointed/_runs.py``).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from polling import wait_for
from sparkbarrier.barrier import CheckpointedSink

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

BATCHES = 20


class CountingSink(CheckpointedSink):
    """Records every driver-side call, its process and its instance, into ``record.path``."""

    uses_ledger = False

    def __init__(self) -> None:
        self.instance = uuid.uuid4().hex
        self.started_in: int | None = None
        self.run = ""

    def _record(self, options: Any, **what: Any) -> None:
        with open(options["record.path"], "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "instance": self.instance, **what}) + "\n")

    def validate(self, options: dict[str, str], schema: Any) -> None:
        self._record(options, call="validate", run=options["run"])
        if options.get("fail") == "true":
            raise ValueError("bad option fail=true")

    def start(self, options: dict[str, str], schema: Any) -> None:
        self.options, self.started_in, self.run = options, os.getpid(), options["run"]
        self._record(options, call="start", run=self.run)

    def initialize_state(self, context: Any) -> None:
        pass

    def invoke(self, batch: Any) -> None:
        pass

    def snapshot_state(self, batch_id: int) -> Any:
        return None

    def notify_checkpoint_complete(self, batch_id: int, completed: Any) -> None:
        self._record(self.options, call="commit", batch=batch_id, run=self.run, started_in=self.started_in)

    def notify_checkpoint_aborted(self, batch_id: int, completed: Any = None) -> None:
        self._record(self.options, call="abort", batch=batch_id, run=self.run, started_in=self.started_in)


def _calls(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run(spark: Any, name: str, record: Path, ckpt: Path, run: str, until_commits: int) -> None:
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).option("numPartitions", 1).load()
             .writeStream.format(name).option("record.path", str(record)).option("run", run)
             .option("checkpointLocation", str(ckpt)).start())
    try:
        wait_for(lambda: sum(c["call"] == "commit" and c["run"] == run for c in _calls(record)) >= until_commits
                 or query.exception(), timeout=240, what=f"{until_commits} commits of run {run}")
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def test_start_runs_once_per_run_and_process_and_every_commit_sees_it(spark, tmp_path: Path,
                                                                       unique_name: Any) -> None:
    from pyspark import cloudpickle

    import sparkbarrier

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    name = unique_name("counting")
    sparkbarrier.checkpointed_sink(spark, name, CountingSink)
    record, ckpt = tmp_path / "calls.jsonl", tmp_path / "ckpt"
    _run(spark, name, record, ckpt, "1", BATCHES)
    _run(spark, name, record, ckpt, "2", 2)  # a restart on the same checkpoint

    calls = _calls(record)
    for run in ("1", "2"):
        starts = [c for c in calls if c["call"] == "start" and c["run"] == run]
        commits = [c for c in calls if c["call"] in ("commit", "abort") and c["run"] == run]
        commit_pids = {c["pid"] for c in commits}
        # once per run and commit process; local mode's commits land on one or two pooled workers
        assert len(starts) == len(commit_pids) and 1 <= len(starts) <= 2, (run, starts, commit_pids)
        assert len({c["pid"] for c in starts}) == len(starts)
        started = {c["instance"]: c["pid"] for c in starts}
        # every commit runs on the instance started in its own process for its run
        assert all(started.get(c["instance"]) == c["pid"] == c["started_in"] for c in commits), commits
        validates = [c for c in calls if c["call"] == "validate" and c["run"] == run]
        # once per planning process and options (the run differs in its "run" option here)
        assert 1 <= len(validates) <= 2 and len({c["pid"] for c in validates}) == len(validates), validates
    run1 = [c for c in calls if c["call"] == "commit" and c["run"] == "1"]
    assert len(run1) >= BATCHES and [c["batch"] for c in run1] == sorted({c["batch"] for c in run1})
    assert not {c["instance"] for c in calls if c["run"] == "1"} & {c["instance"] for c in calls if c["run"] == "2"}


def test_validation_fails_the_query_before_its_first_batch(spark, tmp_path: Path, unique_name: Any) -> None:
    from pyspark import cloudpickle

    import sparkbarrier

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    name = unique_name("failing")
    sparkbarrier.checkpointed_sink(spark, name, CountingSink)
    record = tmp_path / "calls.jsonl"
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
             .writeStream.format(name).option("record.path", str(record)).option("run", "x").option("fail", "true")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        error = wait_for(query.exception, timeout=120, what="the query to fail")
    finally:
        query.stop()
    assert "bad option fail=true" in str(error)
    assert [c["call"] for c in _calls(record)] == ["validate"]
