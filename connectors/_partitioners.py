"""How the systems upstream of a sink partition keys: Spark's, Kafka's and librdkafka's hashes.

Why. A sink task may learn from its keys alone whether they all fall into one partition of
a known partitioner, and two tasks whose keys fall into different partitions of one
partitioner share no key, whatever the data (``hbase/sink/_keyed``). The partitioners a
Kafka → Spark stream meets are reproduced bit for bit:

* ``spark``: Spark's ``HashPartitioning`` (``repartition(n, col)``, an aggregation
  grouped by the column): ``pmod(Murmur3Hash(value, seed 42), n)``, as
  ``pyspark.sql.functions.hash`` computes it, for the key types whose cell bytes
  (``hbase/_codec``) give back the value Spark hashed: binary and string (the bytes,
  ``hashUnsafeBytes``, whose tail bytes are mixed one by one), boolean, tinyint, smallint,
  int and date (``hashInt``), bigint and timestamps (``hashLong``);
* ``kafka``: the Java producer's default partitioner for keyed records, a stream read from
  Kafka without a shuffle: ``(murmur2(key bytes) & 0x7fffffff) % partitions``;
* ``crc32``: librdkafka's default (``consistent_random``): ``crc32(key bytes) % partitions``.

The Kafka hashes are of the row key's cell bytes, which are the Kafka key's bytes when the
row key is the record key (a string or binary key, or an int or long in Kafka's big-endian
serialisers). Vectorised with numpy: keys of one length at a time. Every function returns
int64 values whose residue modulo the partition count is the partition.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pyarrow as pa

__all__ = ["HASHES", "crc32_hashes", "hash_kind", "kafka_hashes", "spark_hashes"]

SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_M1, _M2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)
_KAFKA_SEED, _KAFKA_M = np.uint32(0x9747B28C), np.uint32(0x5BD1E995)

# The row key's Spark type -> how its cell bytes hash under Spark's Murmur3: "bytes", or
# the numpy dtype of the big-endian value and whether Spark hashes it as a long.
_KINDS: dict[pa.DataType, str] = {
    pa.binary(): "bytes", pa.large_binary(): "bytes", pa.string(): "bytes", pa.large_string(): "bytes",
    pa.bool_(): "bool", pa.int8(): ">i1", pa.int16(): ">i2", pa.int32(): ">i4", pa.date32(): ">i4",
    pa.int64(): ">i8",
}


def hash_kind(key_type: pa.DataType) -> str | None:
    """How keys of ``key_type`` hash under Spark's Murmur3; None where it is not reproduced."""
    if pa.types.is_timestamp(key_type):
        return ">i8"
    return _KINDS.get(key_type)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    rotated: np.ndarray = (x << np.uint32(r)) | (x >> np.uint32(32 - r))
    return rotated


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = _rotl(k * _C1, 15) * _C2
    return _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h: np.ndarray, length: int) -> np.ndarray:
    h = h ^ np.uint32(length)
    h = (h ^ (h >> np.uint32(16))) * _M1
    h = (h ^ (h >> np.uint32(13))) * _M2
    mixed: np.ndarray = h ^ (h >> np.uint32(16))
    return mixed


def _hash_ints(values: np.ndarray, *, long: bool) -> np.ndarray:
    """``hashInt`` (int32 values) or ``hashLong`` (int64: low word, then high word)."""
    h = np.full(len(values), SEED, dtype=np.uint32)
    if not long:
        return _fmix(_mix(h, values.astype(np.int32).view(np.uint32)), 4)
    v = values.astype(np.int64).view(np.uint64)
    h = _mix(h, (v & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return _fmix(_mix(h, (v >> np.uint64(32)).astype(np.uint32)), 8)


def _spark_bytes(data: np.ndarray, length: int) -> np.ndarray:
    """``hashUnsafeBytes`` of keys all ``length`` long: little-endian words, then each tail byte (sign-extended)."""
    h = np.full(len(data), SEED, dtype=np.uint32)
    words = length // 4
    if words:
        blocks = np.ascontiguousarray(data[:, :4 * words]).view("<u4")
        for j in range(words):
            h = _mix(h, blocks[:, j].astype(np.uint32))
    for i in range(4 * words, length):
        h = _mix(h, data[:, i].view(np.int8).astype(np.int32).view(np.uint32))
    return _fmix(h, length)


def _kafka_bytes(data: np.ndarray, length: int) -> np.ndarray:
    """Kafka's ``Utils.murmur2`` of keys all ``length`` long, made positive (``toPositive``)."""
    m = _KAFKA_M
    h = np.full(len(data), _KAFKA_SEED ^ np.uint32(length & 0xFFFFFFFF), dtype=np.uint32)
    words = length // 4
    if words:
        blocks = np.ascontiguousarray(data[:, :4 * words]).view("<u4")
        for j in range(words):
            k = blocks[:, j].astype(np.uint32) * m
            k = (k ^ (k >> np.uint32(24))) * m
            h = (h * m) ^ k
    tail = length % 4
    if tail:
        for i in reversed(range(tail)):
            h = h ^ (data[:, 4 * words + i].astype(np.uint32) << np.uint32(8 * i))
        h = h * m
    h = (h ^ (h >> np.uint32(13))) * m
    h = h ^ (h >> np.uint32(15))
    positive: np.ndarray = h & np.uint32(0x7FFFFFFF)
    return positive


def _by_length(keys: list[bytes], one: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    out = np.empty(len(keys), dtype=np.int64)
    by_length: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        by_length.setdefault(len(key), []).append(i)
    for length, where in by_length.items():
        data = np.frombuffer(b"".join(keys[i] for i in where), dtype=np.uint8).reshape(len(where), length)
        out[where] = one(data, length)
    return out


def spark_hashes(keys: list[bytes], kind: str) -> np.ndarray:
    """Spark's ``hash()`` (a signed int32, as int64) of each key's value; ``keys`` are cell bytes of ``kind``."""
    if kind == "bytes":
        return _by_length(keys, _spark_bytes).astype(np.uint32).view(np.int32).astype(np.int64)
    if kind == "bool":
        out = _hash_ints(np.array([key != b"\x00" for key in keys], dtype=np.int32), long=False)
    else:
        values = np.frombuffer(b"".join(keys), dtype=kind)
        if len(values) != len(keys):
            raise ValueError(f"row keys are not all {np.dtype(kind).itemsize} bytes long")
        out = _hash_ints(values, long=kind == ">i8")
    return out.view(np.int32).astype(np.int64)


def kafka_hashes(keys: list[bytes]) -> np.ndarray:
    """Kafka's positive murmur2 of each key: the partition is this modulo the topic's partitions."""
    return _by_length(keys, _kafka_bytes)


def crc32_hashes(keys: list[bytes]) -> np.ndarray:
    """librdkafka's CRC-32 of each key (``consistent_random``): the partition is this modulo the partitions."""
    return np.fromiter((zlib.crc32(key) for key in keys), dtype=np.int64, count=len(keys))


def _spark(keys: list[bytes], kind: str | None) -> np.ndarray | None:
    return spark_hashes(keys, kind) if kind is not None else None


def _kafka(keys: list[bytes], _kind: str | None) -> np.ndarray:
    return kafka_hashes(keys)


def _crc32(keys: list[bytes], _kind: str | None) -> np.ndarray:
    return crc32_hashes(keys)


# Name on the wire -> the hash of a list of row key cell bytes of a Spark kind (None: the
# kind is not hashed by that partitioner). Order: the preferred first, where two key a stream alike.
HASHES: dict[str, Callable[[list[bytes], str | None], np.ndarray | None]] = {
    "spark": _spark, "kafka": _kafka, "crc32": _crc32}
