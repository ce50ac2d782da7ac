"""Resume a fresh query from what the sink committed (Spark checkpoint lost or new).

The ``barrier-hbase`` commit record holds, per source channel (``"topic:partition"``),
the next offset after everything the sink has committed (see ``hbase.sink._commit_table``).
:func:`starting_offsets_from_sink` turns it into a ``startingOffsets`` JSON for
``barrier-kafka`` or Spark's ``format("kafka")``, so a query started on an empty
checkpoint directory continues exactly where the committed data ends: with the same
``sink.id`` the sink's commit protocol continues the same history, so nothing is lost
or applied twice.

It reaches the cluster the way the query did: HBase through the sink's own ``hbase.*``
options (one connection stack: gateway lists, failover, TLS, Kerberos), Kafka through
the source's ``kafka.*`` options (Spark's names, parsed by the source's code).

Resuming needs an explicit ``sink.id`` on the original query: the default
(``query-<query id>``) changes with every new checkpoint directory, so a fresh query
would otherwise write as a different sink. A channel appears in the record only once a
committed batch read from it; with Kafka options the topics' other partitions are added
at ``-2`` (earliest) -- right when the original query started at ``earliest``; after
``startingOffsets=latest`` pass their positions yourself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from .._exceptions import ConfigError, ProtocolError, SinkError
from ._kafka_offsets import nest_offsets
from .hbase._options import DEFAULT_COMMIT_TABLE, SINK_OPTION_SPECS, SPARK_SINK_KEYS
from .hbase.client._connection import HBaseConnection, connection_options
from .hbase.client._options import CONNECTION_OPTION_SPECS
from .hbase.read._reader import find_commit
from .kafka.client._positions import SPARK_EARLIEST, TopicPartition
from .kafka.client._topics import client_options, topic_partitions

__all__ = ["starting_offsets_from_sink"]

_BOOTSTRAP = "kafka.bootstrap.servers"
# The sink's keys that say how to write, not where the commit record is.
_CONNECTION = frozenset(spec.key.lower() for spec in CONNECTION_OPTION_SPECS)
_SINK_ONLY = (frozenset({spec.key.lower() for spec in SINK_OPTION_SPECS} | {k.lower() for k in SPARK_SINK_KEYS})
              - _CONNECTION)
_NO_OFFSETS = (
    "the driver could not read the offsets of the query's Spark checkpoint (its offset log; for an "
    "hdfs:// checkpoint name the NameNode's WebHDFS address in SPARKBARRIER_WEBHDFS or the Hadoop "
    "configuration in HADOOP_CONF_DIR), or, behind barrier-kafka, the _barrier_* marker columns were "
    "dropped before the sink (keep them with keep_markers)")


def starting_offsets_from_sink(host: str | None = None, port: int | None = None, sink_id: str | None = None, *,
                               options: Mapping[str, str] | None = None,
                               commit_table: str | None = None,
                               kafka_options: Mapping[str, str] | None = None,
                               topics: Iterable[str] = (),
                               bootstrap_servers: str | None = None,
                               transport: str | None = None, protocol: str | None = None) -> str:
    """``startingOffsets`` JSON (``{"topic": {"0": next, ...}}``) from ``sink_id``'s last commit.

    ``options``: the sink's option map, exactly as the query gave it: its ``hbase.*``
    options (``hbase.thrift.host``, TLS, Kerberos, gateways, failover) make the
    connection, and its ``sink.id`` and ``commit.table`` name the record when the
    arguments do not (naming one both ways with different values is an error); the
    sink's other options are not needed to read a record and are passed over, and an
    unknown key is refused. ``host``/``port`` (the old positional shorthand),
    ``transport`` and ``protocol`` are shorthands for some of the ``hbase.*`` options.
    ``kafka_options``: Spark's Kafka client options, as the source took them
    (``kafka.bootstrap.servers``, ``kafka.security.protocol``, ``kafka.sasl.*``,
    ``kafka.ssl.*``); ``bootstrap_servers`` is a shorthand for the first. With a bootstrap
    server, partitions of the recorded topics and of ``topics`` that the record lacks are
    added at earliest (see module doc).

    Raises :class:`SinkError` if the sink has committed nothing, or committed without
    source offsets; :class:`ConfigError` naming the option for a bad one. Read-only; safe
    to call while the sink runs (the answer is then a past commit).
    """
    connection, sink_id, commit_table = _sink_options(options, sink_id, commit_table)
    if not sink_id:
        raise SinkError("resuming from the sink needs the sink.id the query wrote with")
    kafka = _kafka_options(kafka_options, bootstrap_servers)
    lookup = client_options(kafka) if kafka else None  # a bad Kafka option fails before any connection
    conn = HBaseConnection(connection_options(connection, host=host, port=port, transport=transport,
                                              protocol=protocol))
    try:
        record = find_commit(conn, commit_table, "", sink_id)
    finally:
        conn.close()
    if not record.offsets:
        raise SinkError(f"sink {sink_id!r} committed batch {record.batch_id} without source offsets: {_NO_OFFSETS}")
    try:
        recorded = {TopicPartition.from_channel(ch): int(off) for ch, off in record.offsets.items()}
    except ProtocolError as exc:
        raise SinkError(f"sink {sink_id!r}: commit record channel {exc.channel!r} is not "
                        "topic:partition") from exc
    nested = nest_offsets(recorded)
    wanted = set(nested) | set(topics)
    if lookup is not None:
        bootstrap, settings = lookup
        found = topic_partitions(bootstrap, settings, sorted(wanted))
        missing = sorted(wanted - set(found))
        if missing:
            raise SinkError(f"topics {missing} recorded by the sink do not exist in Kafka at {bootstrap}")
        for topic, partitions in found.items():
            for p in partitions:
                nested.setdefault(topic, {}).setdefault(str(p), SPARK_EARLIEST)
    ordered = {t: dict(sorted(ps.items(), key=lambda kv: int(kv[0]))) for t, ps in sorted(nested.items())}
    return json.dumps(ordered, separators=(",", ":"))


def _sink_options(options: Mapping[str, str] | None, sink_id: str | None, commit_table: str | None
                  ) -> tuple[dict[str, str], str | None, str]:
    """The sink's option map split into its connection options, ``sink.id`` and ``commit.table``.

    Users pass the map their query wrote with; rejecting its ``table`` or ``rowkey``
    would make them hand-pick keys, so only keys the sink does not know stay in the
    connection map, where the connection's parser refuses them by name.
    """
    connection: dict[str, str] = {}
    named = {"sink.id": sink_id, "commit.table": commit_table}
    for key, value in (options or {}).items():
        low = key.lower()
        if low in named:
            given = named[low]
            if given is not None and given != value:
                raise ConfigError(f"option {low!r} is given twice with different values: as an argument "
                                  f"({given!r}) and in options ({value!r})", option=low)
            named[low] = value
        elif low not in _SINK_ONLY:
            connection[key] = value
    return connection, named["sink.id"], named["commit.table"] or DEFAULT_COMMIT_TABLE


def _kafka_options(options: Mapping[str, str] | None, bootstrap: str | None) -> dict[str, str]:
    """The Kafka client options, with the ``bootstrap_servers`` shorthand folded in (naming it twice is an error)."""
    out = dict(options or {})
    if bootstrap is not None:
        if any(key.lower() == _BOOTSTRAP for key in out):
            raise ConfigError(f"option {_BOOTSTRAP!r} is given twice: as bootstrap_servers= and in kafka_options",
                              option=_BOOTSTRAP)
        out[_BOOTSTRAP] = bootstrap
    return out
