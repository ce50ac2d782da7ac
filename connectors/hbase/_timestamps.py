"""Deterministic cell timestamps: checkpoint sequence × stride + generation.

Every cell written for checkpoint sequence ``seq`` gets a timestamp in
``[seq * STRIDE, (seq + 1) * STRIDE)``. Inside the range, a task's rows are cut into
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
]

STRIDE = 1 << 32
GENERATION_MAX_ROWS = 1 << 16
MAX_SEQ = (1 << 63) // STRIDE - 1


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
    """Assigns generations to a task's rows in input order (executor, one per task)."""

    __slots__ = ("generation", "_seen", "_rows")

    def __init__(self) -> None:
        self.generation = 0
        self._seen: set[bytes] = set()
        self._rows = 0

    def next(self, key: bytes) -> int:
        """The generation of the next row, whose row key is ``key``."""
        if key in self._seen or self._rows >= GENERATION_MAX_ROWS:
            self.generation += 1
            if self.generation >= STRIDE:
                raise SinkError(
                    f"a task wrote more than {STRIDE} generations in one checkpoint; "
                    "use smaller micro-batches (maxOffsetsPerTrigger) or more partitions"
                )
            self._seen = set()
            self._rows = 0
        self._seen.add(key)
        self._rows += 1
        return self.generation
