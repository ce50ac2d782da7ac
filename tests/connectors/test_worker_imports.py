"""The per-batch Arrow code of the source and the sink never imports pandas.

Why: pyarrow's ``pa.array``, ``pa.scalar`` and ``to_numpy`` ask its pandas shim whether
an input is a pandas object, which imports pandas into the Python worker the first time:
0.2 s on a quiet machine, 1.5-2 s while a query's first micro-batch starts its source
and sink workers at once on two cores (profiled inside Spark, 2026-11-26). Spark's own
worker code for Python data sources does not import it, so neither may ours. Checked in
a fresh interpreter, on the columns every batch builds or encodes.
"""

from __future__ import annotations

import subprocess
import sys

_PROBE = r"""
import sys
import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from sparkbarrier.connectors.kafka import source_schema
from sparkbarrier.connectors.kafka.reader._offset_range import KafkaRangePartition, build_batch
from sparkbarrier.connectors.hbase._codec import encode_column
from sparkbarrier.connectors.hbase.sink._writer import _row_sizes
from sparkbarrier.connectors.hbase.sink._column_layout import SinkLayout

assert "pandas" not in sys.modules, "imported by the modules themselves"
schema = to_arrow_schema(source_schema(False), timezone="UTC")
n = 5
keys = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                              pa.py_buffer(b"abcde")])
batch = build_batch(KafkaRangePartition("t", 1, 0, n, checkpoint_id=1, timestamp_ms=0), schema,
                    keys=keys, values=keys, offsets=np.arange(n, dtype=np.int64),
                    timestamps_ms=np.full(n, 1_700_000_000_000, np.int64),
                    timestamp_types=np.zeros(n, np.int32), headers=None)
assert batch.column("offset").to_pylist() == list(range(n))
assert batch.column("partition").to_pylist() == [1] * n
sink = pa.RecordBatch.from_arrays(
    [batch.column("key").cast(pa.string()), batch.column("offset"), batch.column("partition"),
     batch.column("timestamp")], names=["id", "o", "p", "ts"])
layout = SinkLayout.build(sink.schema, rowkey="id", op_column=None, default_family="d", mapping={})
assert len(_row_sizes(sink, layout, n)) == n
for name in sink.schema.names:
    assert len(encode_column(sink.column(name))) == n
assert encode_column(sink.column("o"))[2] == (2).to_bytes(8, "big")
print("pandas" in sys.modules)
"""


def test_building_and_encoding_a_batch_leaves_pandas_unimported() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


_READER_PROBE = r"""
import pickle
import sys

from sparkbarrier.connectors.kafka.planner import _planner
from sparkbarrier.connectors.kafka.reader._reader_choice import reader_for
from sparkbarrier.connectors.kafka._options import parse_declared_options
from sparkbarrier.connectors.kafka._source import source_schema

assert "kafka" not in sys.modules, "kafka-python imported by the reader's modules"
planner = _planner.KafkaStreamPlanner(
    parse_declared_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "kafka.group.id": "g"}),
    source_schema(False))
worker = pickle.loads(pickle.dumps(planner))  # what a Spark worker gets before read()
reader_for(worker._options)
print(sorted(m for m in ("kafka", "pandas") if m in sys.modules))
"""


def test_a_reader_worker_on_librdkafka_never_imports_kafka_python() -> None:
    """kafka-python is the driver's client (planning, lookups, group commits); a worker that
    unpickles the source's reader and picks the librdkafka path does not load it (~90 ms of
    every new worker's start, and its memory)."""
    done = subprocess.run([sys.executable, "-c", _READER_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# What Spark's planning workers run before any batch: ``lookup_data_sources`` imports every
# ``pyspark_*`` module on the path and pickles its DefaultSource; ``create_data_source``
# unpickles the class, builds it from the options and asks the source for its schema. A new
# worker of each kind starts for every Spark session (and after an idle timeout), so the
# clients and pyarrow stay out of that path (measured 2026-11-28: importing both shims took
# ~0.6 s of such a worker's start with them, ~0.1 s without).
_LOOKUP_PROBE = r"""
import pickle
import sys

import pyspark_barrier_hbase
import pyspark_barrier_kafka

hbase = pickle.loads(pickle.dumps(pyspark_barrier_hbase.DefaultSource))
kafka = pickle.loads(pickle.dumps(pyspark_barrier_kafka.DefaultSource))
assert (hbase.name(), kafka.name()) == ("barrier-hbase", "barrier-kafka")
source = kafka({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "kafka.group.id": "g",
                "barrierMarkers": "true"})
assert source.schema().fieldNames()[-1] == "_barrier_next_offset"
sink = hbase({"hbase.thrift.host": "127.0.0.1", "table": "t", "rowkey": "id"})
heavy = ("pyarrow", "numpy", "pandas", "thriftpy2", "happybase", "kafka", "confluent_kafka")
print(sorted(name for name in heavy if name in sys.modules))
"""


def test_looking_the_formats_up_and_creating_them_imports_no_client_and_no_pyarrow() -> None:
    done = subprocess.run([sys.executable, "-c", _LOOKUP_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
