"""Option parsing of the barrier-hbase sink: pure, no servers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkbarrier._exceptions import ConfigError
from sparkbarrier.connectors.hbase import DEFAULT_COMMIT_TABLE, DeliveryGuarantee, parse_sink_options
from sparkbarrier.connectors.hbase.sink._column_layout import SinkLayout
from sparkbarrier.connectors.hbase._options import parse_columns

BASE = {"table": "t", "rowkey": "id", "hbase.thrift2.port": "9095"}


def test_defaults_are_documented_values() -> None:
    o = parse_sink_options(BASE)
    assert (o.host, o.port, o.column_family, o.max_rows, o.max_size) == (
        "localhost", 9090, "d", 1000, 2 * 1024 * 1024)
    assert o.guarantee is DeliveryGuarantee.EXACTLY_ONCE and o.ignore_null_value
    assert o.commit_table == DEFAULT_COMMIT_TABLE and o.sink_id is None


def test_exactly_once_without_a_thrift2_gateway_is_refused_naming_the_option_and_the_way_out() -> None:
    """Thrift1 has no exact-version delete: the puts of tries Spark did not commit could not be
    removed apart from the committed ones (docs/hbase-guarantees.md)."""
    with pytest.raises(ConfigError, match="exactly-once needs a Thrift2 gateway") as err:
        parse_sink_options({"table": "t", "rowkey": "id"})
    assert err.value.option == "hbase.thrift2.host"
    assert "delivery.guarantee=at-least-once" in str(err.value) and "'hbase.thrift2.port'" in str(err.value)
    o = parse_sink_options({"table": "t", "rowkey": "id", "delivery.guarantee": "at-least-once"})
    assert o.thrift2_gateways == () and not o.exactly_once
    assert parse_sink_options({"table": "t", "rowkey": "id", "hbase.thrift2.host": "gw:9095"}).exactly_once


def test_option_keys_are_case_insensitive() -> None:
    o = parse_sink_options({"TABLE": "t", "RowKey": "id", "Delivery.Guarantee": "AT-LEAST-ONCE"})
    assert o.guarantee is DeliveryGuarantee.AT_LEAST_ONCE


def test_one_guarantee_enum_and_the_old_option_name_is_an_error() -> None:
    from sparkbarrier.barrier import DeliveryGuarantee as CoreGuarantee

    assert DeliveryGuarantee is CoreGuarantee
    with pytest.raises(ConfigError, match="'Checkpoint.Mode' of barrier-hbase sink is now 'delivery.guarantee'") as exc:
        parse_sink_options({**BASE, "Checkpoint.Mode": "at-least-once"})
    assert exc.value.option == "Checkpoint.Mode"


def test_unknown_option_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match="valid options are: .*rowkey.*sink.buffer-flush.max-rows") as exc:
        parse_sink_options({**BASE, "row.key": "x"})
    assert exc.value.option == "row.key"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hbase.thrift.port", "abc"),
        ("hbase.thrift.port", "70000"),
        ("sink.buffer-flush.max-rows", "0"),
        ("sink.buffer-flush.max-size", "2 parsecs"),
        ("sink.ignore-null-value", "yes"),
        ("delivery.guarantee", "maybe-once"),
        ("hbase.thrift.transport", "http"),
        ("columns", "a=nofamily"),
    ],
)
def test_bad_values_name_the_option(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_sink_options({**BASE, key: value})
    assert exc.value.option == key


def test_missing_required_options() -> None:
    with pytest.raises(ConfigError, match="rowkey"):
        parse_sink_options({"table": "t"})


def test_columns_mapping_parses() -> None:
    assert parse_columns("a=f:q, b = g:b") == (("a", "f", "q"), ("b", "g", "b"))
    with pytest.raises(ConfigError, match="twice"):
        parse_columns("a=f:q,a=g:q")


SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("op", pa.string()),
                    ("_barrier_kind", pa.string())])


def test_layout_maps_every_other_column_and_ignores_markers() -> None:
    layout = SinkLayout.build(SCHEMA, rowkey="id", op_column="op", default_family="d",
                              mapping={})
    assert [t.column for t in layout.targets] == [b"d:v"]
    assert layout.families == (b"d",)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"rowkey": "nope"}, "rowkey"),
        ({"op_column": "v"}, "op.column"),
        ({"op_column": "missing"}, "op.column"),
        ({"mapping": {"ghost": ("d", "g")}}, "columns"),
    ],
)
def test_layout_rejects_bad_mapping(kwargs: dict, option: str) -> None:
    args = {"rowkey": "id", "op_column": None, "default_family": "d", "mapping": {}, **kwargs}
    with pytest.raises(ConfigError) as exc:
        SinkLayout.build(SCHEMA, **args)
    assert exc.value.option == option


def test_layout_rejects_unsupported_types() -> None:
    schema = pa.schema([("id", pa.string()), ("tags", pa.list_(pa.string()))])
    with pytest.raises(ConfigError, match="tags.*supported"):
        SinkLayout.build(schema, rowkey="id", op_column=None, default_family="d", mapping={})


@pytest.mark.parametrize("op_column", [None, "op"])
def test_a_key_only_stream_is_refused_because_it_owns_no_cell(op_column: str | None) -> None:
    """A delete of a key-only row could only clear a whole family (another writer's cells too),
    and its upsert would write nothing: refused at query start, naming the way out."""
    fields = [pa.field("id", pa.string())] + ([pa.field("op", pa.string())] if op_column else [])
    with pytest.raises(ConfigError, match="only the row key") as err:
        SinkLayout.build(pa.schema(fields), rowkey="id", op_column=op_column, default_family="d", mapping={})
    assert err.value.option == "rowkey" and "F.lit(True)" in str(err.value)


def test_time_flushes_are_gone_because_they_would_make_replays_differ() -> None:
    with pytest.raises(ConfigError, match="sink.buffer-flush.max-rows") as exc:
        parse_sink_options({**BASE, "sink.buffer-flush.interval": "1s"})
    assert "sink.buffer-flush.interval" in str(exc.value)


def test_thrift_transport_and_protocol_are_enums_with_the_same_spellings() -> None:
    from sparkbarrier.connectors.hbase.client._options import ThriftProtocol, ThriftTransport

    o = parse_sink_options(BASE)
    assert o.transport is ThriftTransport.BUFFERED and o.protocol is ThriftProtocol.BINARY
    o = parse_sink_options({**BASE, "hbase.thrift.transport": " Framed ", "hbase.thrift.protocol": "COMPACT"})
    assert o.transport is ThriftTransport.FRAMED and o.protocol is ThriftProtocol.COMPACT
    with pytest.raises(ConfigError, match=r"option 'hbase.thrift.protocol' must be one of binary, compact"):
        parse_sink_options({**BASE, "hbase.thrift.protocol": "json"})


def test_read_options_parse_into_a_frozen_dataclass() -> None:
    import dataclasses

    from sparkbarrier.connectors.hbase.client._options import ThriftTransport
    from sparkbarrier.connectors.hbase._options import HBaseReadOptions, parse_read_options

    o = parse_read_options({"table": "t", "as.of.timestamp": "1970-01-01T00:00:01Z", "Filter.Pushdown": "true"})
    assert isinstance(o, HBaseReadOptions)
    assert (o.host, o.port, o.transport, o.table, o.sink_id, o.commit_table) == (
        "localhost", 9090, ThriftTransport.BUFFERED, "t", None, DEFAULT_COMMIT_TABLE)
    assert (o.as_of_batch, o.as_of_ms, o.filter_pushdown) == (None, 1000, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.table = "u"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="option 'as.of.batch' must be >= 0"):
        parse_read_options({"table": "t", "as.of.batch": "-1"})


@pytest.mark.parametrize("key", ["column.family", "columns", "Column.Family"])
def test_reader_refuses_the_sinks_column_mapping_instead_of_ignoring_it(key: str) -> None:
    # The view's columns come from the commit record; accepting these changed nothing.
    from sparkbarrier.connectors.hbase import hbase_read_options_table
    from sparkbarrier.connectors.hbase._options import READ_OPTION_SPECS, parse_read_options

    with pytest.raises(ConfigError, match=f"option '{key}' is the barrier-hbase sink's, not the reader's") as info:
        parse_read_options({"table": "t", key: "d"})
    assert info.value.option == key
    assert not {"column.family", "columns"} & {spec.key for spec in READ_OPTION_SPECS}
    assert "column.family" not in hbase_read_options_table()


def test_reader_takes_and_ignores_the_sinks_write_options_so_one_dict_serves_both() -> None:
    # Issue 59: a fresh table needs create.table in the dict the sink and the reader share.
    from sparkbarrier.connectors.hbase._options import parse_read_options

    shared = {"table": "t", "sink.id": "s", "rowkey": "id", "op.column": "op", "create.table": "true",
              "delivery.guarantee": "exactly-once", "sink.buffer-flush.max-rows": "10"}
    assert parse_read_options(shared) == parse_read_options({"table": "t", "sink.id": "s"})
    with pytest.raises(ConfigError, match="unknown option 'create.tables' for barrier-hbase reader"):
        parse_read_options({"table": "t", "create.tables": "true"})
