"""Keyed tasks (``_keyed``): Spark's hash of row key cell bytes, and the per-task test. No server.

The expected hashes are pyspark 4.3's ``F.hash`` of the same values (checked 2026-11-29
against a local session, with 11,820 random values of nine types and ``repartition``'s
``spark_partition_id``), pinned here so a change to the hash shows without Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkbarrier.connectors.hbase.sink._keyed import KeyedCheck, hash_kind, spark_hashes


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


def _keys_of(partition: int, tasks: int, n: int) -> list[bytes]:
    names = [f"k{i}".encode() for i in range(n * tasks * 8)]
    residues = np.mod(spark_hashes(names, "bytes").astype(np.int64), tasks)
    return [k for k, r in zip(names, residues.tolist()) if r == partition][:n]


def test_a_task_is_keyed_only_when_every_key_hashes_to_it() -> None:
    mine = _keys_of(3, 7, 20_000)
    check = KeyedCheck("bytes", 3, 7)
    check.feed(mine[:9_000])
    for key in mine[9_000:]:
        check.add(key)
    assert check.done()
    stray = KeyedCheck("bytes", 3, 7)
    stray.feed([*mine, _keys_of(4, 7, 1)[0]])
    assert not stray.done()
    assert not KeyedCheck("bytes", 7, 7).done()  # a partition past the modulus holds no residue
    assert not KeyedCheck(None, 3, 7).done()  # a key type Spark's hash is not reproduced for


def test_modulo_one_task_0_is_keyed_without_hashing_and_no_other_is() -> None:
    only = KeyedCheck(None, 0, 1)
    only.feed(iter(lambda: b"x", None))  # an endless stream: decided already, nothing is read
    assert only.done()
    assert not KeyedCheck("bytes", 1, 1).done()
