"""Smoke tests: the real servers serve, and Spark runs a Python streaming source and an Arrow sink."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

pytestmark = pytest.mark.timeout(240)


@pytest.mark.kafka
def test_kafka_produce_then_consume(kafka_bootstrap: str, unique_name) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique_name("smoke")
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(10):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    producer.flush(timeout=30)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value for r in records)
    consumer.close()
    assert values == [b"v%d" % i for i in range(10)]


@pytest.mark.hbase
def test_hbase_put_then_scan(hbase_thrift: tuple[str, int], unique_name) -> None:
    import happybase

    host, port = hbase_thrift
    table_name = unique_name("smoke")
    connection = happybase.Connection(host, port, timeout=30_000)
    try:
        connection.create_table(table_name, {"d": dict(max_versions=1)})
        table = connection.table(table_name)
        with table.batch() as batch:
            for i in range(5):
                batch.put(b"row%d" % i, {b"d:q": b"%d" % i})
        rows = list(table.scan())
        assert rows == [(b"row%d" % i, {b"d:q": b"%d" % i}) for i in range(5)]
    finally:
        if table_name.encode() in connection.tables():
            connection.delete_table(table_name, disable=True)
        connection.close()


# --- a minimal Python streaming source and Arrow sink, defined here so the test owns them ---

from pyspark.sql.datasource import (  # noqa: E402  (grouped with the classes that use them)
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)


class _CounterReader(DataSourceStreamReader):
    """Ten numbers per micro-batch, as one Arrow batch."""

    def initialOffset(self) -> dict:
        return {"next": 0}

    def latestOffset(self, start: dict, limit) -> dict:  # type: ignore[override]
        return {"next": start["next"] + 10}

    def partitions(self, start: dict, end: dict):
        return [InputPartition((start["next"], end["next"]))]

    def read(self, partition):
        lo, hi = partition.value
        yield pa.RecordBatch.from_pydict({"n": pa.array(range(lo, hi), pa.int64())})


class _FileArrowWriter(DataSourceStreamArrowWriter):
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def write(self, iterator):
        import pyarrow.compute as pc

        return _Sum(sum(pc.sum(batch.column(0)).as_py() or 0 for batch in iterator))

    def commit(self, messages, batchId: int) -> None:
        total = sum(m.total for m in messages if isinstance(m, _Sum))
        Path(self.directory, f"batch-{batchId}.json").write_text(json.dumps({"sum": total}))

    def abort(self, messages, batchId: int) -> None:
        pass


class _Sum(WriterCommitMessage):
    def __init__(self, total: int) -> None:
        self.total = total


class _SmokeSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "sparkbarrier_smoke"

    def schema(self) -> str:
        return "n bigint"

    def streamReader(self, schema):
        return _CounterReader()

    def streamWriter(self, schema, overwrite: bool):
        return _FileArrowWriter(self.options["directory"])


@pytest.mark.spark
def test_spark_stream_through_python_source_and_arrow_writer(spark, tmp_path: Path) -> None:
    # The classes live in this test module, which Spark's workers cannot import: ship them by value.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(_SmokeSource)
    out = tmp_path / "out"
    out.mkdir()
    query = (
        spark.readStream.format("sparkbarrier_smoke")
        .load()
        .writeStream.format("sparkbarrier_smoke")
        .option("directory", str(out))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "batch-2.json").exists():
            if not query.isActive:
                raise AssertionError(f"query stopped: {query.exception()}")
            assert time.monotonic() < deadline, "three micro-batches did not complete in 120 s"
            time.sleep(0.2)
    finally:
        query.stop()
    sums = [json.loads((out / f"batch-{b}.json").read_text())["sum"] for b in range(3)]
    assert sums == [sum(range(0, 10)), sum(range(10, 20)), sum(range(20, 30))]
