"""Cell timestamps: wall-clock milliseconds, fixed per (batch, task), identical on retry.

Why this shape. Every HBase client expects epoch-millisecond timestamps (TTLs, time-range
reads, other writers' deletes, a server's timestamp slop), while exactly once needs every
try of a task to write its delete markers at the *same* timestamp and its puts at
timestamps the commit can name from ids alone, to remove exactly the puts of the tries
it does not keep. So an attempt picks its **base** once, from the planning clock
(:func:`next_base`: never below what was written before, ``_attempts``), and every
timestamp inside it follows from ids (docs/hbase-guarantees.md, step 2):

* blocks of :data:`TASK_WIDTH_MS` ms, block ``n`` at ``base + n * TASK_WIDTH_MS``
  (:func:`task_block`): the *keyed* tasks (``_keyed``: no two of one block share a key)
  write in the first ``levels`` blocks; every other task ``p`` in block ``levels + p``,
  so a key in several tasks is written at distinct timestamps, the same way on every
  retry;
* in its block a task's delete markers sit at the first millisecond (the same on every
  try), its puts at one of the :data:`TRY_SLOTS` milliseconds above, the slot its try
  claimed (``_writer``): a marker at ``t`` masks every put at ``<= t`` whatever the
  arrival order, and the commit removes every try's puts but the committing one's.

A batch of keyed tasks therefore spans ``8 * levels`` ms however many tasks it has (one
block unless ``minPartitions`` splits partitions, ``2k - 1`` for ``k`` splits), and the next starts at ``max(now, end of
this one)``: a keyed stream stays on the clock at any rate. A batch with tasks that are
not keyed spans up to ``8 * (levels + tasks)`` ms (:func:`batch_span_ms`,
``AttemptRecord.span_ms``): faster than that, its cells move ahead of the clock (docs/hbase-guarantees.md, limit 1).
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


def batch_span_ms(max_tasks: int, levels: int = 1) -> int:
    """The timestamps a batch attempt may use with ``sink.max-write-tasks`` = ``max_tasks``:
    the keyed tasks' ``levels`` blocks and one block per task."""
    return (levels + max_tasks) * TASK_WIDTH_MS


def task_block(partition: int, *, keyed_at: int | None = None, levels: int = 1) -> int:
    """The block task ``partition`` writes in: ``keyed_at`` if it is keyed (``_keyed.keyed_block``),
    else its own above the ``levels`` keyed blocks."""
    return keyed_at if keyed_at is not None else levels + partition


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
    input ended, and a task that is not writes in block ``levels + partition``, inside the
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
