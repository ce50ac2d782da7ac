"""A complete exactly-once file sink: one staged Parquet file per snapshot, renamed on commit."""

import os
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from sparkbarrier.barrier import TwoPhaseCommitSink


class FileSink(TwoPhaseCommitSink):
    def validate(self, options, schema):            # query start, before any task writes
        Path(options["path"]).mkdir(parents=True, exist_ok=True)

    def begin_transaction(self):                    # executor: first data after a snapshot
        c = self.context                            # batch, partition, attempt, options
        name = f".staged-{c.batch_id}-{c.partition_id}-{uuid.uuid4().hex}.parquet"
        return [Path(c.options["path"]) / name, None]

    def write(self, txn, batch):                    # executor: Arrow batches, no markers
        if txn[1] is None:
            txn[1] = pq.ParquetWriter(txn[0], batch.schema)
        txn[1].write_batch(batch)

    def pre_commit(self, txn):                      # executor: durable but invisible
        txn[1].close()
        with open(txn[0], "rb") as f:
            os.fsync(f.fileno())
        return str(txn[0])                          # the handle sent to the driver

    def commit(self, handles, completed):           # driver: publish; idempotent
        for staged in handles:
            final = staged.replace("/.staged-", f"/part-{completed.batch_id:06d}-")
            if os.path.exists(staged):              # a repeat finds it renamed already
                os.replace(staged, final)

    def abort(self, handles, batch_id):             # driver: discard
        for staged in handles:
            Path(staged).unlink(missing_ok=True)
