"""Deterministic cell timestamps: checkpoint sequence × stride + generation.

Every cell written for checkpoint sequence ``seq`` gets a timestamp in
``[seq * STRIDE, (seq + 1) * STRIDE)``. The range is cut into one block of
:data:`TASK_SPAN` timestamps per Spark partition (task ``p`` owns
``[p * TASK_SPAN, (p + 1) * TASK_SPAN)``), so two tasks never share a timestamp: a key
written by two tasks of one batch resolves the same way on every replay, and the later
split of a Kafka partition (``minPartitions`` numbers splits in offset order) wins.
Inside its block, a task's rows are cut into
*generations*: a new generation starts whenever a row key repeats within the current
one (or it reaches :data:`GENERATION_MAX_ROWS` rows, which bounds the memory of the
seen-key set). So

* two writes to one row inside a checkpoint land at increasing timestamps, and
  applying them in HBase's timestamp order equals applying them in input order
  (a tombstone at ``t`` hides a put at ``t' < t``; a later put at ``t'' > t`` shows);
* one generation never holds a row key twice, so it goes out in ``mutateRowsTs``
  calls sharing one timestamp (Thrift1 has no per-mutation timestamp);
* generations depend only on the task's input rows, never on flush timing, so a
  replay of the same input writes byte-identical cells at identical timestamps.

Sequences strictly increase across checkpoints whatever the wall clock does; the
first sequence of a new sink starts just above the current wall clock in
milliseconds, so the sink's cells sort above cells stamped by HBase itself.
"""

from __future__ import annotations

from ..._exceptions import SinkError

__all__ = [
    "STRIDE",
    "GENERATION_MAX_ROWS",
    "MAX_SEQ",
    "seq_floor",
    "seq_ceiling",
    "first_seq",
    "GenerationCounter",
    "MAX_TASKS",
    "TASK_SPAN",
]

STRIDE = 1 << 32
GENERATION_MAX_ROWS = 1 << 16
MAX_SEQ = (1 << 63) // STRIDE - 1
TASK_SPAN = 1 << 21
MAX_TASKS = STRIDE // TASK_SPAN


def seq_floor(seq: int) -> int:
    """Smallest timestamp of checkpoint ``seq``."""
    return seq * STRIDE


def seq_ceiling(seq: int) -> int:
    """First timestamp *after* checkpoint ``seq`` (the exclusive read bound)."""
    return (seq + 1) * STRIDE


def first_seq(now_ms: int) -> int:
    """Sequence for a sink's first checkpoint: its cells sort above wall-clock stamps."""
    return now_ms // STRIDE + 1


class GenerationCounter:
    """Assigns generations to a task's rows in input order (executor, one per task).

    ``partition_id`` selects the task's block, so the returned offsets (added to
    ``seq_floor(seq)``) never collide with another task's.
    """

    __slots__ = ("generation", "_offset", "_seen", "_rows")

    def __init__(self, partition_id: int = 0) -> None:
        if not 0 <= partition_id < MAX_TASKS:
            raise SinkError(
                f"barrier-hbase supports at most {MAX_TASKS} write tasks per micro-batch, "
                f"got partition {partition_id}; coalesce() the stream before the sink"
            )
        self.generation = 0
        self._offset = partition_id * TASK_SPAN
        self._seen: set[bytes] = set()
        self._rows = 0

    @property
    def current(self) -> int:
        """Offset of the current generation inside the checkpoint's range."""
        return self._offset + self.generation

    def next(self, key: bytes) -> int:
        """The timestamp offset of the next row, whose row key is ``key``."""
        if key in self._seen or self._rows >= GENERATION_MAX_ROWS:
            self.generation += 1
            if self.generation >= TASK_SPAN:
                raise SinkError(
                    f"a task wrote more than {TASK_SPAN} generations in one checkpoint; "
                    "use smaller micro-batches (maxOffsetsPerTrigger) or more partitions"
                )
            self._seen = set()
            self._rows = 0
        self._seen.add(key)
        self._rows += 1
        return self._offset + self.generation
