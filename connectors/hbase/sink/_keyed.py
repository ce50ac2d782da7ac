"""Keyed tasks: a write task whose every row key is one Spark's hash partitioning gives it.

Why. Two write tasks of a batch that change one row key must be ordered: HBase masks
by timestamp, so their cells need distinct timestamps, and a layout that gives every
task its own 8 ms (``_timestamps``) spends 8 ms of clock per task and batch. Yet most
wide batches cannot put a key in two tasks at all: a ``repartition(n, rowkey)``, or an
aggregation grouped by the row key column, sends key ``k`` to partition
``pmod(murmur3(k, 42), n)``, Spark's ``HashPartitioning``. A task all of whose keys hash
to its own partition id under one modulus ``n`` (a *keyed* task) shares no key with any
other keyed task of that modulus: their keys hash to other residues. So keyed tasks may
share the batch's first block of timestamps, and only the others need blocks of their
own, above it (``TaskClock.for_task``).

Nothing here trusts the data to be partitioned: the test is per task, on the keys it
writes, under a modulus every task of the attempt shares (the task count of the commit
the attempt builds on, ``Placement.keyed_tasks``; 1 for a first batch, which makes task 0
keyed and no other). A stream that is not keyed yields tasks that are not keyed, which
write as before; a wrong modulus only costs timestamps.

The hash is Spark's ``Murmur3Hash`` (seed 42), as ``pyspark.sql.functions.hash`` computes
it, for the row key types whose cell bytes (``.._codec``) give back the value Spark
hashed: binary and string (the bytes themselves, ``hashUnsafeBytes``, whose tail bytes
are mixed one by one), boolean, tinyint, smallint, int and date (``hashInt``), bigint and
timestamps (``hashLong``). Other types (floating point, decimal) are never keyed.
Vectorised with numpy: keys of one length at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

__all__ = ["KeyedCheck", "hash_kind", "spark_hashes"]

SEED = 42
_SLICE = 8192  # keys hashed at once
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_M1, _M2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)

# The row key's Spark type -> how its cell bytes hash: "bytes", or the numpy dtype of the
# big-endian value and whether Spark hashes it as a long.
_KINDS: dict[pa.DataType, str] = {
    pa.binary(): "bytes", pa.large_binary(): "bytes", pa.string(): "bytes", pa.large_string(): "bytes",
    pa.bool_(): "bool", pa.int8(): ">i1", pa.int16(): ">i2", pa.int32(): ">i4", pa.date32(): ">i4",
    pa.int64(): ">i8",
}


def hash_kind(key_type: pa.DataType) -> str | None:
    """How keys of ``key_type`` hash (see the module doc); None where tasks are never keyed."""
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


def _hash_bytes(keys: list[bytes], length: int) -> np.ndarray:
    """``hashUnsafeBytes`` of keys all ``length`` long: little-endian words, then each tail byte (sign-extended)."""
    n = len(keys)
    data = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(n, length)
    h = np.full(n, SEED, dtype=np.uint32)
    words = length // 4
    if words:
        blocks = np.ascontiguousarray(data[:, :4 * words]).view("<u4")
        for j in range(words):
            h = _mix(h, blocks[:, j].astype(np.uint32))
    for i in range(4 * words, length):
        h = _mix(h, data[:, i].view(np.int8).astype(np.int32).view(np.uint32))
    return _fmix(h, length)


def spark_hashes(keys: list[bytes], kind: str) -> np.ndarray:
    """Spark's ``hash()`` (int32) of each key's value, in order; ``keys`` are cell bytes of ``kind``."""
    out = np.empty(len(keys), dtype=np.uint32)
    if kind == "bytes":
        by_length: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            by_length.setdefault(len(key), []).append(i)
        for length, where in by_length.items():
            out[where] = _hash_bytes([keys[i] for i in where], length)
    elif kind == "bool":
        out[:] = _hash_ints(np.array([key != b"\x00" for key in keys], dtype=np.int32), long=False)
    else:
        values = np.frombuffer(b"".join(keys), dtype=kind)
        if len(values) != len(keys):
            raise ValueError(f"row keys are not all {np.dtype(kind).itemsize} bytes long")
        out[:] = _hash_ints(values, long=kind == ">i8")
    return out.view(np.int32)


class KeyedCheck:
    """Whether every key fed to it hashes to ``partition`` modulo ``tasks`` (fed in slices, stops at a miss)."""

    __slots__ = ("_kind", "_open", "_partition", "_pending", "_tasks", "keyed")

    def __init__(self, kind: str | None, partition: int, tasks: int) -> None:
        self._kind, self._partition, self._tasks = kind, partition, tasks
        # Modulo 1 every key hashes to 0: task 0 is keyed, with no hash (and for any key type).
        self.keyed = 0 <= partition < tasks and (tasks == 1 or kind is not None)
        self._open = self.keyed and tasks > 1  # whether a key can still change the verdict
        self._pending: list[bytes] = []

    def feed(self, keys: Iterable[bytes]) -> None:
        """Test ``keys`` a slice at a time (stops reading them at the first key of another partition)."""
        it = iter(keys)
        while self._open and (part := list(itertools.islice(it, _SLICE))):
            self._pending.extend(part)
            self._check()

    def add(self, key: bytes) -> None:
        if self._open:
            self._pending.append(key)
            if len(self._pending) >= _SLICE:
                self._check()

    def done(self) -> bool:
        """The verdict once every key the task writes was fed."""
        if self._open and self._pending:
            self._check()
        return self.keyed

    def _check(self) -> None:
        try:
            hashes = spark_hashes(self._pending, self._kind or "bytes").astype(np.int64)
        except ValueError:  # keys of another width than the type's: not Spark's values
            self.keyed = False
        else:
            self.keyed = bool(np.all(np.mod(hashes, self._tasks) == self._partition))
        self._open = self.keyed
        self._pending = []
