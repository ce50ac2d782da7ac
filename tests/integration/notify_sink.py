"""A two-phase-commit sink that appends every notification it gets to a record file (tests only).

Executors pre-commit their rows' ids as the handle; the driver's ``commit`` appends one
JSON line ``{"batch": N, "ids": [...]}``. It keeps no record of its own of which batches
it applied, so it is exactly once only if the adapter's ledger is: a batch the adapter
notifies twice shows up twice in the file. The record file lives outside every
driver-local directory the tests wipe (it is the test's observation, not the sink's state).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from sparkbarrier.barrier import CompletedCheckpoint, TwoPhaseCommitSink


class NotifySink(TwoPhaseCommitSink[list]):
    def __init__(self) -> None:
        self.record = ""

    def start(self, options: Mapping[str, str], schema: Any) -> None:
        self.record = options["record"]

    def begin_transaction(self) -> list:
        return []

    def write(self, txn: list, batch: pa.RecordBatch) -> None:
        txn.extend(batch.column("id").to_pylist())

    def pre_commit(self, txn: list) -> list:
        return txn

    def commit(self, handles: Sequence[Any], completed: CompletedCheckpoint) -> None:
        ids = [i for h in handles for i in h]
        with open(self.record, "a") as out:
            out.write(json.dumps({"batch": completed.batch_id, "ids": ids,
                                  "offsets": dict(completed.source_offsets)}) + "\n")
