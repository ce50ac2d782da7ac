"""Options of batch writes and of ``hbase_batch_writer``, parsed without Spark or servers."""

from __future__ import annotations

import pytest

import sparkbarrier
from sparkbarrier import ConfigError
from sparkbarrier.connectors.hbase.batch._options import parse_batch_write_options, sink_part

BASE = {"table": "t", "rowkey": "id", "hbase.thrift.host": "gw1:9090", "hbase.thrift2.port": "9095"}


def test_write_keys_name_the_series_the_batch_and_the_checkpoint() -> None:
    parsed = parse_batch_write_options({**BASE, "sink.id": "s", "WRITE.ID": "q", "write.batch.id": "4",
                                        "write.checkpointLocation": "/ckpt"})
    assert (parsed.series, parsed.batch_id, parsed.checkpoint_location) == ("q", 4, "/ckpt")
    assert parsed.sink.sink_id == "s" and "WRITE.ID" not in parsed.sink_options


def test_the_series_defaults_to_the_sink_id_and_the_batch_id_to_none() -> None:
    parsed = parse_batch_write_options({**BASE, "sink.id": "s"})
    assert (parsed.series, parsed.batch_id, parsed.checkpoint_location) == ("s", None, None)


def test_a_batch_write_needs_a_sink_id() -> None:
    with pytest.raises(ConfigError, match="needs option 'sink.id'") as err:
        parse_batch_write_options(BASE)
    assert err.value.option == "sink.id"


def test_a_checkpoint_needs_a_batch_id() -> None:
    with pytest.raises(ConfigError, match="'write.checkpointLocation' needs 'write.batch.id'"):
        parse_batch_write_options({**BASE, "sink.id": "s", "write.checkpointLocation": "/ckpt"})


def test_an_unknown_key_lists_the_sink_and_the_write_options() -> None:
    with pytest.raises(ConfigError, match="unknown option 'write.batch'.*rowkey.*write.batch.id"):
        parse_batch_write_options({**BASE, "sink.id": "s", "write.batch": "1"})


def test_a_negative_batch_id_is_refused() -> None:
    with pytest.raises(ConfigError, match="write.batch.id"):
        parse_batch_write_options({**BASE, "sink.id": "s", "write.batch.id": "-1"})


def test_sink_part_drops_only_the_write_keys() -> None:
    assert sink_part({**BASE, "Write.Batch.Id": "1"}) == BASE


def test_hbase_batch_writer_checks_the_sink_options_before_the_query_starts() -> None:
    with pytest.raises(ConfigError, match="unknown option 'rowkye'"):
        sparkbarrier.hbase_batch_writer({"table": "t", "rowkye": "id"})
    with pytest.raises(ConfigError, match="names each batch itself"):
        sparkbarrier.hbase_batch_writer(BASE, **{"write.id": "q"})
    fn = sparkbarrier.hbase_batch_writer(BASE, **{"sink.id": "s"})
    assert fn.options == {**BASE, "sink.id": "s"}


def test_hbase_batch_writer_under_spark_connect_gives_its_documented_error() -> None:
    """Issue 49: under Spark Connect it failed with an AttributeError on sparkContext first."""
    from types import SimpleNamespace

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    import sparkbarrier
    from sparkbarrier._exceptions import SinkError

    fn = sparkbarrier.hbase_batch_writer({"table": "t", "rowkey": "id", "hbase.thrift2.port": "9095"})
    df = SimpleNamespace(sparkSession=object.__new__(ConnectSession))
    with pytest.raises(SinkError, match="needs classic Spark.*Spark Connect"):
        fn(df, 0)  # type: ignore[arg-type]
