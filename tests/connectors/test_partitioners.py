"""The upstream partitioners (``connectors/_partitioners``), reproduced bit for bit. No server.

Spark's expected hashes are pyspark 4.3's ``F.hash`` of the same values (checked
2026-11-29 against a local session, with 11,820 random values of nine types and
``repartition``'s ``spark_partition_id``), pinned so a change shows without Spark. Kafka's
murmur2 is checked against kafka-python's copy of the Java client's; both Kafka hashes
against real producers in ``tests/connectors/hbase/test_keyed_clock.py``.
"""

from __future__ import annotations

import random
import zlib

import pyarrow as pa
from kafka.partitioner.default import murmur2

from sparkbarrier.connectors._partitioners import crc32_hashes, hash_kind, kafka_hashes, spark_hashes


def test_the_hash_is_sparks_for_strings_ints_and_longs() -> None:
    strings = ["", "a", "abcd", "hello world", "é€"]
    assert spark_hashes([s.encode() for s in strings], "bytes").tolist() == [
        142593372, 1485273170, -396302900, -1528836094, -470537149]
    assert spark_hashes([v.to_bytes(4, "big", signed=True) for v in (1, -7)], ">i4").tolist() == [
        -559580957, -1618159745]
    assert spark_hashes([v.to_bytes(8, "big", signed=True) for v in (1, 2**40)], ">i8").tolist() == [
        -1712319331, -1596767687]


def test_the_hash_kind_follows_the_row_keys_type() -> None:
    assert hash_kind(pa.string()) == hash_kind(pa.binary()) == "bytes"
    assert hash_kind(pa.int32()) == hash_kind(pa.date32()) == ">i4"
    assert hash_kind(pa.timestamp("us", tz="UTC")) == hash_kind(pa.int64()) == ">i8"
    assert hash_kind(pa.float64()) is None and hash_kind(pa.decimal128(10, 2)) is None


def test_kafkas_hash_is_the_java_clients_murmur2_for_every_length() -> None:
    rnd = random.Random(57)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))) for _ in range(20_000)]
    assert kafka_hashes(keys).tolist() == [murmur2(k) & 0x7FFFFFFF for k in keys]


def test_librdkafkas_hash_is_crc32() -> None:
    keys = [b"", b"a", b"user-17", bytes(range(256))]
    assert crc32_hashes(keys).tolist() == [zlib.crc32(k) for k in keys]
