"""Cell timestamps: wall-clock milliseconds, fixed per (batch, task), identical on retry.

Why this shape. Every HBase client expects epoch-millisecond timestamps: TTLs expire
by them, time-range queries select by them, other writers' puts and deletes compare
against them, and clusters with ``hbase.hregion.keyvalue.timestamp.slop.millisecs``
reject cells too far ahead. Exactly-once, on the other hand, needs every try of a task
to write its delete markers at the *same* timestamp and its puts at timestamps the
commit can name from ids alone, so that it removes exactly the puts of the tries it
does not keep and a retry adds no version.

So a micro-batch attempt picks its **base** once, from the wall clock
(``max(now, end of everything written before)``), and records it in the commit table
(see ``_attempts``); retries within its plan reuse the recorded base. Inside a batch every timestamp
follows from ids (the task's partition id, the try's slot, the batch's task count),
never from values:

* a batch attempt's timestamps are blocks of :data:`TASK_WIDTH_MS` milliseconds, block
  ``n`` starting at ``base + n * TASK_WIDTH_MS`` (:func:`task_block`). Block 0 is shared
  by the batch's *keyed* tasks: those whose every row key hashes to their own residue
  modulo the attempt's ``keyed_tasks`` under its partitioner (``_keyed``: the
  partitioning of ``repartition(n, rowkey)``, of an aggregation grouped by the row key,
  of a topic's producer), so no two of them share a key. Every other task ``p`` writes in block
  ``1 + p``, above it. A key in several tasks is thus written at distinct timestamps by
  each, the same way on every retry: first the keyed task's change, then the others' in
  partition order (for ``minPartitions`` splits of one Kafka partition, where no task is
  keyed, the later offset range last). A replay after a driver restart writes in a new
  attempt above the abandoned one (``_attempts``);
* a task nets its whole input per key (``_buffer``) and writes each key once: its delete
  markers at the block's first millisecond (the same on every try: which cells a key's
  rows delete does not depend on their order), its puts at one of the
  :data:`TRY_SLOTS` milliseconds above, the slot its try claimed (``_writer``). Tries
  of one task that saw a key's rows in different orders put different values, each at
  its own slot, and the commit removes every try's puts but the committing one's
  (``_committer``), so a row ends as one try left it. A put masks nothing and a delete
  marker at ``t`` masks every put at ``<= t`` whatever the arrival order, so "delete,
  then put" is a marker and a newer put; a hot key updated thousands of times costs one
  put. Without Thrift2 (no exact-version delete) every try puts at slot 0. A try's note
  records its block (``TaskNote.block``), so the commit names its puts from the note alone
  (a note of the release before, version 2, wrote in block ``partition``).

A batch of keyed tasks therefore spans 8 ms, however many tasks it has: its next batch
starts at ``max(now, end of this one)``, so a keyed stream's cells stay on the clock at
any rate. A batch with tasks that are not keyed spans up to ``8 * (1 + tasks)`` ms
(:func:`batch_span_ms`, what the attempt records, ``AttemptRecord.span_ms``): batches of
such tasks faster than 8 ms per task move the cells ahead of the clock, and a replay
after a restart starts a whole span above the attempt it abandons.
"""

from __future__ import annotations

import os
import time

from ...._exceptions import ConfigError, SinkError
from .._options import MAX_WRITE_TASKS_DEFAULT

__all__ = [
    "BATCH_SPAN_MS",
    "CLOCK_OFFSET_ENV",
    "MAX_TASKS",
    "MIN_TABLE_VERSIONS",
    "TASK_WIDTH_MS",
    "TRY_SLOTS",
    "TaskClock",
    "batch_span_ms",
    "check_block",
    "next_base",
    "now_ms",
    "task_block",
]

TASK_WIDTH_MS = 8  # a block: one delete timestamp and TRY_SLOTS put timestamps
TRY_SLOTS = TASK_WIDTH_MS - 1  # put timestamps of a block: one try of the task each
MAX_TASKS = MAX_WRITE_TASKS_DEFAULT  # sink.max-write-tasks's default; the limit of releases before it
# What a family must keep (checked at query start, ``client._admin.prepare_table``): the
# committed version under every try of the task writing the cell in flight above it.
MIN_TABLE_VERSIONS = 1 + TRY_SLOTS


def batch_span_ms(max_tasks: int) -> int:
    """The timestamps a batch attempt may use with ``sink.max-write-tasks`` = ``max_tasks``:
    the keyed tasks' block and one block per task."""
    return (1 + max_tasks) * TASK_WIDTH_MS


def task_block(partition: int, *, keyed: bool) -> int:
    """The block task ``partition`` writes in: 0, shared, if it is keyed (``_keyed``), else its own."""
    return 0 if keyed else 1 + partition


# The span of an attempt that records none (``AttemptRecord.span_ms``): releases before
# sink.max-write-tasks, whose task p wrote in block p of MAX_TASKS.
BATCH_SPAN_MS = MAX_TASKS * TASK_WIDTH_MS


# Milliseconds added to the wall clock where the sink reads it (a test hook: a driver or
# executor whose clock is behind or ahead, without changing the system clock).
CLOCK_OFFSET_ENV = "SPARKBARRIER_CLOCK_OFFSET_MS"


def now_ms() -> int:
    """The wall clock in epoch milliseconds, as the sink reads it (the one place it does)."""
    return time.time_ns() // 1_000_000 + int(os.environ.get(CLOCK_OFFSET_ENV) or 0)


def next_base(now_ms: int, floor_ms: int) -> int:
    """Base of a new batch attempt: the wall clock, never below what was written before."""
    return max(now_ms, floor_ms)


def check_block(partition: int, max_tasks: int) -> None:
    """Refuse a task whose partition id is past ``sink.max-write-tasks`` (before it writes anything).

    Checked for every task, keyed or not: whether a task is keyed is known only once its
    input ended, and a task that is not writes in block ``1 + partition``, inside the
    recorded span only below the limit.
    """
    if not 0 <= partition < max_tasks:
        raise ConfigError(
            f"barrier-hbase: this batch has a write task with partition id {partition}, and sink.max-write-tasks is "
            f"{max_tasks}: a write task whose row keys are not hash-partitioned by the row key owns "
            f"{TASK_WIDTH_MS} ms of cell timestamps per batch. Set option 'sink.max-write-tasks' to at least the "
            f"number of partitions reaching the sink (the batch's cells then span up to {TASK_WIDTH_MS} ms per "
            f"task), or coalesce() the stream before the sink",
            option="sink.max-write-tasks")


class TaskClock:
    """The timestamps of one write task's block (executor, one per task).

    The task's delete markers go at the block's first millisecond (:meth:`delete_ts`),
    the same for every try; each try's puts at the slot it claimed (:meth:`slot_put_ts`).
    The block is not checked here: the writer checks it against ``sink.max-write-tasks``
    (:func:`check_block`) before it places, and the commit names blocks of tries that wrote.
    """

    __slots__ = ("_start", "block")

    def __init__(self, base_ms: int, block: int) -> None:
        self.block = block
        self._start = base_ms + block * TASK_WIDTH_MS

    def delete_ts(self) -> int:
        """The delete timestamp: the block's first millisecond (every try's)."""
        return self._start

    def slot_put_ts(self, slot: int) -> int:
        """The put timestamp of the try that claimed ``slot``: ``base + 8 * block + 1 + slot``."""
        if not 0 <= slot < TRY_SLOTS:
            raise SinkError(f"internal: try slot {slot} outside 0..{TRY_SLOTS - 1}")
        return self._start + 1 + slot

    def block_end(self) -> int:
        """First timestamp after the task's block: above every try's puts."""
        return self._start + TASK_WIDTH_MS
