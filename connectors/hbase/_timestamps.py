"""Cell timestamps: wall-clock milliseconds, fixed per (batch, task, round), identical on replay.

Why this shape. Every HBase client expects epoch-millisecond timestamps: TTLs expire
by them, time-range queries select by them, other writers' puts and deletes compare
against them, and clusters with ``hbase.hregion.keyvalue.timestamp.slop.millisecs``
reject cells too far ahead. Exactly-once, on the other hand, needs a replayed
micro-batch to write *identical* cells and delete markers at *identical* timestamps,
so a replay converges on what the first attempt wrote instead of adding versions.

So a micro-batch attempt picks its **base** once, from the wall clock
(``max(now, end of everything written before)``), and records it in the commit table
(see ``_committer``); replays reuse the recorded base. Inside a batch every timestamp
is a pure function of the input:

* write task ``p`` owns :data:`TASK_WIDTH_MS` milliseconds starting at
  ``base + p * TASK_WIDTH_MS``, so two tasks never share a timestamp and a key written
  by two tasks resolves the same way on every replay (the higher partition wins: for
  ``minPartitions`` splits of one Kafka partition that is the later offset range);
* a task's block holds :data:`ROUNDS` rounds of two slots each: deletes at
  ``2r``, puts at ``2r + 1``. A put masks nothing and a delete marker at ``t`` masks
  every put at ``<= t`` whatever the arrival order, so "delete, then put" inside a
  round is a marker and a newer put, and replays converge;
* within a round the task nets its rows per key (``_buffer``): a hot key updated
  thousands of times costs one put, not thousands of timestamps. A new round starts
  only when a delete follows a put of the same key that has already been flushed in
  the current round, which is a deterministic function of the input and the
  deterministic flush points (row/byte limits, barriers), never of time.

A batch therefore spans at most ``MAX_TASKS * TASK_WIDTH_MS`` ms (4.1 s) and usually
``8 * tasks`` ms; the next batch starts at ``max(now, end of this one)``, so cells
stay within a few seconds of the wall clock however often keys repeat.
"""

from __future__ import annotations

from ..._exceptions import SinkError

__all__ = [
    "ROUNDS",
    "TASK_WIDTH_MS",
    "MAX_TASKS",
    "BATCH_SPAN_MS",
    "next_base",
    "TaskClock",
]

ROUNDS = 4
TASK_WIDTH_MS = 2 * ROUNDS
MAX_TASKS = 512
BATCH_SPAN_MS = MAX_TASKS * TASK_WIDTH_MS


def next_base(now_ms: int, floor_ms: int) -> int:
    """Base of a new batch attempt: the wall clock, never below what was written before."""
    return max(now_ms, floor_ms)


class TaskClock:
    """The two timestamps one write task uses in its current round (executor, one per task)."""

    __slots__ = ("round", "_start")

    def __init__(self, base_ms: int, partition_id: int) -> None:
        if not 0 <= partition_id < MAX_TASKS:
            raise SinkError(
                f"barrier-hbase supports at most {MAX_TASKS} write tasks per micro-batch, "
                f"got partition {partition_id}; coalesce() the stream before the sink"
            )
        self.round = 0
        self._start = base_ms + partition_id * TASK_WIDTH_MS

    @property
    def delete_ts(self) -> int:
        return self._start + 2 * self.round

    @property
    def put_ts(self) -> int:
        return self._start + 2 * self.round + 1

    @property
    def last_round(self) -> bool:
        return self.round == ROUNDS - 1

    @property
    def next_is_last(self) -> bool:
        return self.round + 1 == ROUNDS - 1

    @property
    def end(self) -> int:
        """First timestamp after everything this task may have written so far."""
        return self.put_ts + 1

    def advance(self) -> None:
        if self.last_round:
            raise SinkError("internal: a write task ran out of timestamp rounds")
        self.round += 1
