"""``python -m sparkbarrier lineage`` against a real HBase: which checkpoint wrote a row."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from sparkbarrier.__main__ import main
from sparkbarrier.barrier.markers import CheckpointBarrier, marker_batch, with_marker_columns

pytestmark = [pytest.mark.hbase]

KV = pa.schema([("id", pa.string()), ("v", pa.int64())])


def test_lineage_cli_prints_batch_and_offsets(make_sink, capsys) -> None:
    sink = make_sink(KV)
    stream = with_marker_columns(KV)
    rows = pa.RecordBatch.from_pylist([{"id": "order-17", "v": 5}], schema=stream)
    marks = marker_batch([CheckpointBarrier(3, 0, "orders:1", 1450)], stream)
    sink.commit([sink.task([rows, marks], batch=41)], 41)
    hbase = f"{sink.opts.host}:{sink.opts.port}"
    args = ["lineage", "--hbase", hbase, "--table", sink.opts.table, "--row", "order-17",
            "--sink-id", sink.opts.sink_id, "--commit-table", sink.opts.commit_table]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "d:v" in out and " 41 " in out and "orders:1 -..1450" in out
    assert main(args + ["--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)
    assert (cell["batch_id"], cell["seq"], cell["offsets_to"], cell["committed"]) == (41, 1, {"orders:1": 1450}, True)
    assert main(["lineage", "--hbase", hbase, "--table", sink.opts.table, "--row", "nope",
                 "--sink-id", sink.opts.sink_id, "--commit-table", sink.opts.commit_table]) == 1
