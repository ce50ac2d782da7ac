"""Run the demo pipeline once with ``Trigger.AvailableNow`` on a given Spark master.

Used by ``test_cluster.py`` in a subprocess so the cluster gets its own SparkSession
(one JVM per process) and a hard timeout. Prints one JSON line with the batches run.

    python cluster_pipeline.py MASTER BOOTSTRAP HBASE_HOST:PORT TOPIC GROUP TABLE CHECKPOINT [THRIFT2_PORT]

``THRIFT2_PORT`` (the HBase Thrift2 server on the Thrift host) is optional: with it the
sink creates its table with ``KEEP_DELETED_CELLS=TRUE``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demo"))

from pipeline import Names, pipeline, spark_session  # noqa: E402

from sparkbarrier._endpoints import parse_hostport  # noqa: E402


def main(argv: list[str]) -> int:
    master, bootstrap, hbase, topic, group, table, checkpoint, *rest = argv
    thrift2_port = int(rest[0]) if rest else None
    host, port = parse_hostport(hbase, "HBASE_HOST:PORT")
    names = Names(topic=topic, group=group, table=table, sink_id=table)
    spark = spark_session(master=master, app="sparkbarrier-cluster-test")
    try:
        # The executor JVM registers a few seconds after the session starts: wait for it
        # (bounded), so the query really runs on the separate executor.
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
        deadline = time.monotonic() + 90
        while status().size() < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        executors = status().size()
        query = (pipeline(spark, bootstrap, (host, port), names, max_per_trigger=1000,
                          thrift2_port=thrift2_port)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        finished = query.awaitTermination(180)
        error = query.exception()
        if not finished:
            query.stop()
        batches = [p.batchId for p in query.recentProgress if p.numInputRows]
        print(json.dumps({"finished": bool(finished), "error": str(error) if error else None,
                          "batches": batches, "executors": executors,
                          "master": spark.sparkContext.master}))
        return 0 if finished and error is None else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
