"""Options of a ``barrier-hbase`` batch write: the sink's, plus the few that name the batch.

``df.write.format("barrier-hbase")`` takes every option of the streaming sink
(:data:`~.._options.SINK_OPTION_SPECS`, parsed by :func:`~.._options.parse_sink_options`) and
the ``write.*`` keys declared here (the docs/hbase-aggregations.md table is generated from
:data:`BATCH_WRITE_OPTION_SPECS`). A batch write is one committed batch of a *write
series*: the series is the query id its commit record carries, the batch id Spark's
batch id in a stream; together they name the attempt (``_attempts``), so a re-run under
the same ids writes nothing. Parsed once on the driver into :class:`BatchWriteOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...._exceptions import ConfigError
from ..._options import OptionSpec, parse_non_negative_int, parse_options, parse_stripped
from ...checkpointed._options import RENAMED_SINK_OPTIONS
from .._options import SINK_OPTION_SPECS, SPARK_SINK_KEYS, HBaseSinkOptions, parse_sink_options

__all__ = ["BATCH_WRITE_OPTION_SPECS", "BatchWriteOptions", "parse_batch_write_options", "sink_part"]

WRITE_PREFIX = "write."
WRITE_ID = "write.id"
WRITE_BATCH_ID = "write.batch.id"
WRITE_CHECKPOINT = "write.checkpointLocation"

BATCH_WRITE_OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(WRITE_ID, parse_stripped, "",
               "the write series: the query id the commit record carries (as a streaming query's id does); "
               "default: the `sink.id`. `hbase_batch_writer` sets the streaming query's id"),
    OptionSpec(WRITE_BATCH_ID, parse_non_negative_int, None,
               "the batch id within the series: a write under a committed (series, batch id) writes nothing, "
               "so a re-run is idempotent; default: one more than the series' newest committed batch (0 for "
               "the first), so each run without it commits a new batch. `hbase_batch_writer` sets "
               "`foreachBatch`'s batch id", type_name="long"),
    OptionSpec(WRITE_CHECKPOINT, parse_stripped, "",
               "a streaming query's checkpoint: the commit record carries the source offsets Spark's offset "
               "log holds for `write.batch.id` there (lineage, `starting_offsets_from_sink`); needs "
               "`write.batch.id`. `hbase_batch_writer` sets it"),
)


@dataclass(frozen=True)
class BatchWriteOptions:
    """A batch write's parsed options: the sink's, the series and batch, the checkpoint (or none)."""

    sink: HBaseSinkOptions
    sink_options: dict[str, str]  # the raw sink keys, for executors and the commit worker to parse again
    series: str
    batch_id: int | None
    checkpoint_location: str | None


def sink_part(raw: Mapping[str, str]) -> dict[str, str]:
    """``raw`` without the ``write.*`` keys: what :func:`parse_sink_options` takes."""
    return {k: v for k, v in raw.items() if not k.lower().startswith(WRITE_PREFIX)}


def parse_batch_write_options(raw: Mapping[str, str]) -> BatchWriteOptions:
    """Validate a batch write's option map (driver, once per write).

    One pass over the sink's and the write's specs, so an unknown key's error lists
    both. ``sink.id`` is required: without a stream there is no query id to default it
    from, and a re-run must find the commits of the first run.
    """
    values, _ = parse_options(raw, SINK_OPTION_SPECS + BATCH_WRITE_OPTION_SPECS,
                              source_name="barrier-hbase batch write", ignored=SPARK_SINK_KEYS,
                              renamed=RENAMED_SINK_OPTIONS)
    options = sink_part(raw)
    sink = parse_sink_options(options)
    if sink.sink_id is None:
        raise ConfigError("a barrier-hbase batch write needs option 'sink.id': it names the sink in the commit "
                          "table, where a re-run finds what the first run committed (the committed, as-of and "
                          "lineage reads take the same sink.id)", option="sink.id")
    batch_id = values.optional_integer(WRITE_BATCH_ID)
    location = values.text(WRITE_CHECKPOINT) or None
    if location is not None and batch_id is None:
        raise ConfigError(f"option {WRITE_CHECKPOINT!r} needs {WRITE_BATCH_ID!r}: the offsets are read from the "
                          f"offset log entry of that batch", option=WRITE_CHECKPOINT)
    return BatchWriteOptions(sink, options, values.text(WRITE_ID) or sink.sink_id, batch_id, location)
