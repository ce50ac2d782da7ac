"""Resume a fresh query from what the sink committed (Spark checkpoint lost or new).

The ``barrier-hbase`` commit record holds, per source channel (``"topic:partition"``),
the next offset after everything the sink has committed (see ``hbase._commit_table``).
:func:`starting_offsets_from_sink` turns it into a ``startingOffsets`` JSON for
``barrier-kafka``, so a query started on an empty checkpoint directory continues
exactly where the committed data ends: with the same ``sink.id`` the sink's commit
protocol continues the same history, so nothing is lost or applied twice.

Resuming needs an explicit ``sink.id`` on the original query: the default
(``query-<query id>``) changes with every new checkpoint directory, so a fresh query
would otherwise write as a different sink. A channel appears in the record only once a
committed batch read from it; with ``bootstrap_servers`` the topics' other partitions
are added at ``-2`` (earliest) -- right when the original query started at
``earliest``; after ``startingOffsets=latest`` pass their positions yourself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .._exceptions import ProtocolError, SinkError
from ._kafka_offsets import nest_offsets
from .hbase._connection import HBaseConnection, connection_options
from .hbase._options import DEFAULT_COMMIT_TABLE
from .hbase._reader import find_commit
from .kafka._positions import SPARK_EARLIEST, TopicPartition

__all__ = ["starting_offsets_from_sink"]


def starting_offsets_from_sink(host: str, port: int, sink_id: str, *,
                               commit_table: str = DEFAULT_COMMIT_TABLE,
                               bootstrap_servers: str | None = None,
                               topics: Iterable[str] = (),
                               kafka_config: Mapping[str, Any] | None = None,
                               transport: str = "buffered", protocol: str = "binary") -> str:
    """``startingOffsets`` JSON (``{"topic": {"0": next, ...}}``) from ``sink_id``'s last commit.

    Raises :class:`SinkError` if the sink has committed nothing, or committed without
    source offsets (the marker columns were dropped before the sink, see
    ``keep_markers``). With ``bootstrap_servers``, partitions of the recorded topics
    and of ``topics`` that the record lacks are added at earliest (see module doc).
    Read-only; safe to call while the sink runs (the answer is then a past commit).
    """
    if not sink_id:
        raise SinkError("resuming from the sink needs the sink.id the query wrote with")
    conn = HBaseConnection(connection_options(host=host, port=port, transport=transport, protocol=protocol))
    try:
        record = find_commit(conn, commit_table, "", sink_id)
    finally:
        conn.close()
    if not record.offsets:
        raise SinkError(
            f"sink {sink_id!r} committed batch {record.batch_id} without source offsets: the "
            "_barrier_* marker columns did not reach the sink (keep them with keep_markers)")
    try:
        recorded = {TopicPartition.from_channel(ch): int(off) for ch, off in record.offsets.items()}
    except ProtocolError as exc:
        raise SinkError(f"sink {sink_id!r}: commit record channel {exc.channel!r} is not "
                        "topic:partition") from exc
    nested = nest_offsets(recorded)
    wanted = set(nested) | set(topics)
    if bootstrap_servers is not None:
        for topic, partitions in _partitions(bootstrap_servers, wanted, kafka_config).items():
            for p in partitions:
                nested.setdefault(topic, {}).setdefault(str(p), SPARK_EARLIEST)
    ordered = {t: dict(sorted(ps.items(), key=lambda kv: int(kv[0]))) for t, ps in sorted(nested.items())}
    return json.dumps(ordered, separators=(",", ":"))


def _partitions(bootstrap: str, topics: set[str], config: Mapping[str, Any] | None) -> dict[str, set[int]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **dict(config or {}))
    try:
        existing = consumer.topics()
        missing = sorted(topics - existing)
        if missing:
            raise SinkError(f"topics {missing} recorded by the sink do not exist in Kafka at {bootstrap}")
        return {t: set(consumer.partitions_for_topic(t) or ()) for t in topics}
    finally:
        consumer.close()
