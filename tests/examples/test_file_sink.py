"""The manual's complete checkpointed-sink example (docs/checkpointed-sinks.md), end to end through Spark."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "files"))


def test_readme_shows_the_example_file_verbatim() -> None:
    code = (ROOT / "examples" / "files" / "file_sink.py").read_text().split("\n", 1)[1].lstrip("\n")
    assert code in (ROOT / "docs" / "checkpointed-sinks.md").read_text()


def test_file_sink_writes_every_row_once_and_stages_nothing_visible(spark, tmp_path: Path) -> None:
    from pyspark import cloudpickle

    import file_sink
    import sparkbarrier

    cloudpickle.register_pickle_by_value(file_sink)  # executors get the class by value
    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"id": [f"{i}-{k}" for k in range(5)], "v": list(range(5))}), src / f"{i}.parquet")
    sparkbarrier.checkpointed_sink(spark, "files-exactly-once", file_sink.FileSink)
    out = tmp_path / "out"
    query = (spark.readStream.schema("id string, v bigint").option("maxFilesPerTrigger", 1).parquet(str(src))
             .writeStream.format("files-exactly-once").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(180), "query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    parts = sorted(out.glob("part-*.parquet"))
    assert parts and not list(out.glob(".staged-*"))
    ids = sorted(i for p in parts for i in pq.read_table(p).column("id").to_pylist())
    assert ids == sorted(f"{i}-{k}" for i in range(3) for k in range(5))
    assert (tmp_path / "ckpt" / "sparkbarrier" / "files-exactly-once").is_dir()  # the applied ledger
