"""A replay under other options: exact, or refused before anything is written (real HBase).

The replay of an abandoned attempt removes that attempt's noted puts from the sink's
columns as the replay maps them, and the attempt's delete markers stay; a batch
committed into one table is found committed only there. So the options that decide
which cells a batch writes are recorded with every attempt and compared, at query
start (``HBaseSinkFunction.validate``) and where a task places (``_attempts.check_writes``).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkbarrier._exceptions import ConfigError
from sparkbarrier.connectors.hbase import parse_sink_options
from hbase_tasks import Sink, spark_schema

pytestmark = [pytest.mark.hbase]

SCHEMA = pa.schema([("id", pa.string()), ("a", pa.int64()), ("b", pa.int64()), ("op", pa.string())])
ROWS = [{"id": "r1", "a": 1, "b": 2, "op": None}]


def _abandoned_batch(make_sink, **options: str) -> Sink:
    """Batch 0 committed, batch 1 written by a driver that died before its commit."""
    sink = make_sink(SCHEMA, **{"op.column": "op", **options})
    sink.commit([sink.task(ROWS, batch=0, plan="p1")], 0)
    sink.task([{"id": "r1", "a": 10, "b": 20, "op": None}], batch=1, plan="p2")
    return sink


@pytest.mark.timeout(60)
def test_a_replay_with_a_column_dropped_from_the_mapping_is_refused_at_start_and_at_placement(make_sink) -> None:
    sink = _abandoned_batch(make_sink, columns="a=d:a,b=d:b")
    changed = {**sink.raw, "columns": "a=d:a"}
    with pytest.raises(ConfigError, match=r"batch 1 of query q1 was being written with columns='a=d:a,b=d:b'") as err:
        sink.driver.validate(changed, spark_schema(SCHEMA))
    assert err.value.option == "columns" and "until batch 1 commits" in str(err.value)
    # A task of the replay that skipped the start check (another writer's build) is refused
    # where it places, before it records an attempt or writes a cell.
    sink.opts = parse_sink_options(changed)
    with pytest.raises(ConfigError, match="never committed"):
        sink.task([{"id": "r1", "a": 10, "b": 20, "op": None}], batch=1, plan="p3")
    # Under the same options the replay is exact: b's abandoned put is removed with the rest.
    sink.opts = parse_sink_options(sink.raw)
    sink.commit([sink.task([{"id": "r1", "a": 10, "b": 20, "op": None}], batch=1, plan="p4")], 1)
    assert sink.read() == [{"id": "r1", "a": 10, "b": 20}]
    assert [v for v, _ in sink.versions(b"r1", b"d:b")] == [(20).to_bytes(8, "big", signed=True),
                                                               (2).to_bytes(8, "big", signed=True)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option, value", [("op.column", ""), ("sink.ignore-null-value", "false")])
def test_a_replay_under_another_op_column_or_null_handling_is_refused(make_sink, option: str, value: str) -> None:
    sink = _abandoned_batch(make_sink)
    with pytest.raises(ConfigError, match="never committed") as err:
        sink.driver.validate({**sink.raw, option: value}, spark_schema(SCHEMA))
    assert err.value.option == option


@pytest.mark.timeout(60)
def test_another_table_under_a_committed_sink_id_is_refused_instead_of_writing_nothing(
        make_sink, unique_name) -> None:
    sink = make_sink(SCHEMA, **{"op.column": "op"})
    sink.commit([sink.task(ROWS, batch=0, plan="p1")], 0)
    other = {**sink.raw, "table": unique_name("other")}
    with pytest.raises(ConfigError, match="keeps the commits of one table") as err:
        sink.driver.validate(other, spark_schema(SCHEMA))
    assert err.value.option == "table"
    sink.opts = parse_sink_options(other)
    with pytest.raises(ConfigError, match="keeps the commits of one table"):
        sink.task(ROWS, batch=0, plan="p2")  # the replay of batch 0 that wrote nothing, silently
