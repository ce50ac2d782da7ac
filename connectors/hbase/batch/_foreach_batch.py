"""``foreachBatch(sparkbarrier.hbase_batch_writer({...}))``: each micro-batch, one exactly-once batch write.

For what the streaming sink cannot take: update-mode aggregations (Spark refuses update
mode for every Python sink: docs/hbase-aggregations.md says where), stream-static joins
and any per-batch logic that ends in one DataFrame. Spark calls the function on the
driver, in the driver's Python process, once per micro-batch and again for the same
batch id after a driver restart; it writes the batch DataFrame with
``df.write.format("barrier-hbase")`` (``_df_write``) under the streaming query's id
(``write.id``) and ``foreachBatch``'s batch id (``write.batch.id``): the same attempt
names as the streaming sink's, so a replay converges, and a replay of a committed batch
writes nothing. ``write.checkpointLocation`` is the query's checkpoint, where the commit
reads the batch's Kafka offsets from Spark's offset log.

Classic Spark only: the query's id and checkpoint come from the driver JVM (Spark
Connect runs ``foreachBatch`` in a server-side process without them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...._exceptions import ConfigError, SinkError
from .._options import parse_sink_options
from ._options import WRITE_BATCH_ID, WRITE_CHECKPOINT, WRITE_ID, WRITE_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["HBaseBatchWriterFunction", "hbase_batch_writer"]

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # set by Spark on the stream's thread for each batch
# query id -> the options of the writer that took the default sink.id ``query-<id>`` (this
# driver process; foreachBatch runs every batch of a query in it).
_DEFAULT_ID_OWNERS: dict[str, dict[str, str]] = {}


def _claim_default_id(query_id: str, options: dict[str, str]) -> None:
    """Refuse a second writer of one query under the default ``sink.id``: it would write nothing.

    Two targets under one ``sink.id`` and one (query, batch) look like one batch written
    twice: the second write is taken for a replay of the first and writes nothing. The
    first writer (per query and driver process) keeps the default; any writer with other
    options fails at once, naming the option to set.
    """
    owner = _DEFAULT_ID_OWNERS.setdefault(query_id, dict(options))
    if owner != options:
        raise ConfigError(
            f"two hbase_batch_writer targets of streaming query {query_id} both use the default sink.id "
            f"'query-{query_id}' (tables {owner.get('table')!r} and {options.get('table')!r}): the second would "
            f"be taken for a replay of the first and write nothing. Give each writer its own 'sink.id', e.g. "
            f"hbase_batch_writer({{..., 'sink.id': '<query name>-{options.get('table')}'}})", option="sink.id")


def hbase_batch_writer(options: Mapping[str, str] | None = None, /, **more: str) -> HBaseBatchWriterFunction:
    """A ``foreachBatch`` function writing each micro-batch into HBase exactly once (driver, before ``start()``).

    ``options`` are the streaming sink's (``table``, ``rowkey``, ``hbase.thrift.host``, ...;
    keys with dots go in the mapping, plain ones may also be keywords). They are checked
    here, so a typo fails before the query starts. ``sink.id`` defaults to
    ``query-<query id>``, as for the streaming sink. The ``write.*`` options are the
    function's to set.
    """
    given = {**(options or {}), **more}
    set_here = sorted(k for k in given if k.lower().startswith(WRITE_PREFIX))
    if set_here:
        raise ConfigError(f"option {set_here[0]!r}: hbase_batch_writer names each batch itself (the streaming "
                          "query's id and foreachBatch's batch id); for a one-off write use "
                          "df.write.format('barrier-hbase') with write.* options", option=set_here[0])
    parse_sink_options(given)
    return HBaseBatchWriterFunction({k: str(v) for k, v in given.items()})


class HBaseBatchWriterFunction:
    """The callable ``foreachBatch`` runs: ``(batch DataFrame, batch id) -> None``.

    Kept by Spark for the query's life in the driver's Python process; it remembers each
    query's checkpoint location (one JVM call per query, not per batch).
    """

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self._locations: dict[str, str | None] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        spark = df.sparkSession
        if type(spark).__module__.startswith("pyspark.sql.connect"):
            raise SinkError("hbase_batch_writer needs classic Spark (a driver JVM): Spark Connect runs "
                            "foreachBatch without the query's id and checkpoint; write each batch with "
                            "df.write.format('barrier-hbase') and explicit write.id / write.batch.id options "
                            "(docs/hbase-aggregations.md)", batch_id=batch_id)
        query_id = spark.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not query_id:
            raise SinkError("hbase_batch_writer(...) is a foreachBatch function: call it as "
                            "df.writeStream.foreachBatch(sparkbarrier.hbase_batch_writer({...})); outside a "
                            "streaming query use df.write.format('barrier-hbase')", batch_id=batch_id)
        options = dict(self.options)
        if not any(k.lower() == "sink.id" for k in options):
            options["sink.id"] = f"query-{query_id}"
            _claim_default_id(query_id, options)
        options[WRITE_ID] = query_id
        options[WRITE_BATCH_ID] = str(batch_id)
        location = self._checkpoint(spark, query_id)
        if location:
            options[WRITE_CHECKPOINT] = location
        df.write.format("barrier-hbase").options(**options).mode("append").save()

    def _checkpoint(self, spark: SparkSession, query_id: str) -> str | None:
        """The query's resolved checkpoint directory (where Spark's offset log is), from the driver JVM.

        ``foreachBatch`` gets a DataFrame of the stream's own cloned session, whose
        ``spark.streams`` lists no query; the session state every clone shares keeps the
        active queries by id (``SharedState.activeStreamingQueries``, spark-sql 4.2/4.3).
        """
        if query_id not in self._locations:
            # Private py4j handles: no public API names a running query's checkpoint.
            jvm = spark.sparkContext._jvm
            shared = spark._jsparkSession.sharedState()
            if jvm is None:
                raise SinkError("hbase_batch_writer needs classic Spark (a driver JVM): Spark Connect runs "
                                "foreachBatch without the query's checkpoint")
            execution = shared.activeStreamingQueries().get(jvm.java.util.UUID.fromString(query_id))
            if execution is None:
                raise SinkError(f"hbase_batch_writer: streaming query {query_id} is not active in this application")
            location = str(execution.resolvedCheckpointRoot())
            self._locations[query_id] = location or None
            log.info("hbase_batch_writer: query %s reads its batches' offsets from %s", query_id, location)
        return self._locations[query_id]
