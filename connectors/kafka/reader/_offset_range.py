"""One planned offset range on an executor: its description and the rules both readers share.

The two executor read paths (confluent-kafka, kafka-python) differ only in how they
fetch records. Everything a user can observe besides speed lives here so it cannot
drift between them: the picklable task (:class:`KafkaRangePartition`), the data-loss
policy (:func:`check_loss`), the no-progress error, and the column-wise Arrow batch
(:func:`build_batch`), which takes whole columns so neither path builds a Python
object per record beyond what its client hands out.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from ...._exceptions import DataLossError, SourceError
from .._options import KafkaSourceOptions

__all__ = ["KafkaRangePartition", "build_batch", "check_loss", "gc_paused", "gone",
           "no_progress", "until_no_progress"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaRangePartition(InputPartition):
    """One Spark task: records ``[start, end)`` of ``topic``/``partition``.

    ``emit_barrier`` is set on the last split of a channel's range; the marker
    carries ``checkpoint_id``/``timestamp_ms`` from the planned offset.
    """

    topic: str
    partition: int
    start: int
    end: int
    checkpoint_id: int
    timestamp_ms: int
    emit_barrier: bool = True

    @property
    def channel(self) -> str:
        return f"{self.topic}:{self.partition}"


def check_loss(options: KafkaSourceOptions, part: KafkaRangePartition, pos: int,
               earliest: int) -> int:
    """Where to continue when ``pos`` is below what Kafka still retains.

    Raises :class:`DataLossError` with ``failOnDataLoss=true``; else logs and skips.
    """
    if earliest <= pos:
        return pos
    lost_to = min(earliest, part.end)
    message = (f"offsets {pos}..{lost_to - 1} of {part.channel} are no longer available "
               f"(earliest retained offset is {earliest}); planned range {part.start}.."
               f"{part.end - 1} of checkpoint {part.checkpoint_id}")
    if options.fail_on_data_loss:
        raise DataLossError(message + ". Set failOnDataLoss=false to skip lost offsets.",
                            topic_partition=part.channel)
    log.warning("barrier-kafka: data loss skipped: %s", message)
    return lost_to


def gone(part: KafkaRangePartition) -> DataLossError:
    """The partition of a planned range no longer exists (deleted topic)."""
    return DataLossError(f"{part.channel} no longer exists", topic_partition=part.channel)


def until_no_progress(options: KafkaSourceOptions) -> str:
    """How long a read keeps retrying: the bound :func:`no_progress` enforces, for logs."""
    return (f"the task fails after {options.poll_timeout_ms} ms without progress "
            f"(kafkaConsumer.pollTimeoutMs)")


def no_progress(options: KafkaSourceOptions, part: KafkaRangePartition, position: int,
                detail: str = "") -> SourceError:
    """``kafkaConsumer.pollTimeoutMs`` passed without the range advancing."""
    return SourceError(
        f"no progress reading {part.channel} at offset {position} (planned end "
        f"{part.end}) for {options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)"
        + (f"; last client error: {detail}" if detail else ""),
        topic_partition=part.channel)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic collector for one step of a reader; restore it after.

    A reader holds up to ``arrowBatchSize`` fresh container objects (messages, tuples)
    at a time. Reference counting frees them (they form no cycles), but their count
    alone triggers collections, and as they survive, full ones over the whole worker
    heap. Paused per step, not per task: whenever control leaves the reader (a yield
    to Spark, an exception) the collector is as the caller had it. Not re-entrant
    across threads; an executor task reads on one thread.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _headers_array(headers: Sequence[Sequence[tuple[str, bytes | None]] | None],
                   kind: pa.DataType) -> pa.Array:
    """``array<struct<key, value>>`` from per-record header lists (None = no headers)."""
    lengths = np.fromiter((len(h) if h else 0 for h in headers), np.int32, len(headers))
    offsets = np.zeros(len(headers) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = [pair for h in headers if h for pair in h]
    entries = pa.StructArray.from_arrays(
        [pa.array([k for k, _ in flat], pa.string()), pa.array([v for _, v in flat], pa.binary())],
        fields=list(kind.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets), entries, type=kind)


def _repeated_string(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` from two buffers (~60x cheaper than a list of n strs)."""
    data = text.encode()
    if n * len(data) >= 2**31:  # beyond int32 offsets: let pyarrow pick the layout
        return pa.array([text] * n, pa.string())
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(data * n)])


_NUMPY = {pa.int32(): np.int32, pa.int64(): np.int64}


def _fixed(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A null-free fixed-width Arrow array over ``values``' own buffer (no copy).

    Not ``pa.array``: that call asks pyarrow's pandas shim whether the input is a pandas
    object, which imports pandas into the Python worker on its first batch (0.2 s on a
    quiet machine, 1.5-2 s while a first micro-batch starts all its workers at once)."""
    contiguous = np.ascontiguousarray(values, dtype=_NUMPY[kind])
    return pa.Array.from_buffers(kind, len(contiguous), [None, pa.py_buffer(contiguous)])


def build_batch(part: KafkaRangePartition, schema: pa.Schema, *,
                keys: Sequence[bytes | None] | pa.Array, values: Sequence[bytes | None] | pa.Array,
                offsets: np.ndarray, timestamps_ms: np.ndarray, timestamp_types: np.ndarray,
                headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | pa.Array | None
                ) -> pa.RecordBatch:
    """One Arrow batch from whole columns; marker columns null.

    ``keys``, ``values`` and ``headers`` are Python values or ready Arrow arrays of the
    schema's types; ``timestamp_types`` uses Spark's codes (0 CreateTime, 1
    LogAppendTime, -1 none); ``headers`` is required exactly when the schema has a
    ``headers`` column.
    """
    n = len(offsets)
    arrays: dict[str, pa.Array] = {
        "key": keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary()),
        "value": values if isinstance(values, pa.Array) else pa.array(values, pa.binary()),
        "topic": _repeated_string(part.topic, n),
        "partition": _fixed(np.full(n, part.partition, dtype=np.int32), pa.int32()),
        "offset": _fixed(offsets, pa.int64()),
        "timestamp": _fixed(timestamps_ms * 1000, pa.int64()).cast(schema.field("timestamp").type),
        "timestampType": _fixed(timestamp_types, pa.int32()),
    }
    if isinstance(headers, pa.Array):
        arrays["headers"] = headers
    elif headers is not None:
        arrays["headers"] = _headers_array(headers, schema.field("headers").type)
    out = [arrays[f.name] if f.name in arrays else pa.nulls(n, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(out, schema=schema)
