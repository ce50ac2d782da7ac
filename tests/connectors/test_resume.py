"""``starting_offsets_from_sink`` against real HBase (and Kafka for partition filling)."""

from __future__ import annotations

import json

import pytest
from hbase_clients import thrift1
from kafka import KafkaAdminClient

from sparkbarrier import SinkError
from sparkbarrier.connectors import starting_offsets_from_sink
from sparkbarrier.connectors.hbase._commit_table import (
    COMMIT_COLUMN,
    CommitRecord,
    ensure_commit_table,
    put_cell,
)

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(120)]


def _commit(thrift: tuple[str, int], commit_table: str, sink_id: str, offsets: dict[str, int]) -> None:
    conn = thrift1(*thrift)
    try:
        ensure_commit_table(conn, commit_table)
        record = CommitRecord(sink_id=sink_id, table="t", seq=1, query_id="q", batch_id=4,
                              ts_lo=1_700_000_000_000, ts_hi=1_700_000_000_009,
                              read_bound=1_700_000_000_009, offsets=offsets)
        put_cell(conn, commit_table, sink_id, COMMIT_COLUMN, record.to_bytes())
    finally:
        conn.close()


def test_offsets_come_back_as_starting_offsets_json(hbase_thrift, unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "s1", {"orders:1": 7, "orders:0": 5, "refunds:0": 0})
    got = starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table)
    assert json.loads(got) == {"orders": {"0": 5, "1": 7}, "refunds": {"0": 0}}


def test_commit_without_source_offsets_is_a_clear_error(hbase_thrift, unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "s1", {})
    with pytest.raises(SinkError, match="without source offsets.*keep_markers"):
        starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table)


def test_sink_without_commit_is_a_clear_error(hbase_thrift, unique_name) -> None:
    table = unique_name("commits")
    _commit(hbase_thrift, table, "other", {"t:0": 1})
    with pytest.raises(SinkError, match="committed nothing"):
        starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table)


@pytest.mark.kafka
def test_partitions_never_committed_start_at_earliest(hbase_thrift, kafka_bootstrap, unique_name) -> None:
    topic, table = unique_name("resume"), unique_name("commits")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()
    _commit(hbase_thrift, table, "s1", {f"{topic}:1": 9})
    got = starting_offsets_from_sink(*hbase_thrift, "s1", commit_table=table,
                                     bootstrap_servers=kafka_bootstrap)
    assert json.loads(got) == {topic: {"0": -2, "1": 9, "2": -2}}
