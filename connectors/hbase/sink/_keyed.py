"""Keyed tasks: a write task whose every row key falls into its own residue of one partitioner.

Why. Two write tasks of a batch that change one row key must be ordered: HBase masks
by timestamp, so their cells need distinct timestamps, and a task with its own 8 ms
block (``_timestamps``) spends 8 ms of clock per task and batch. Yet most wide batches
cannot put a key in two tasks: ``repartition(n, rowkey)`` or an aggregation grouped by
the row key sends ``k`` to partition ``pmod(murmur3(k), n)``; a topic read without a
shuffle gives each task the keys Kafka's producer sent to one partition (``minPartitions``:
to consecutive tasks, one range each). Tasks whose keys all hash to distinct residues of
one hash and modulus share no key, so they share a block: block ``rank``, where the
tasks holding one residue (the splits of one partition) take ranks 0, 1, ... in
partition order. Only the other tasks need blocks of their own, above the ranks.

Nothing here trusts the data: the test is per task, on the keys it writes, under the
hash, modulus and residues the attempt recorded from the commit it builds on, which
chose them from what the tasks reported: per partitioner of ``.._partitioners``, the
first key's hash ``h0`` and the gcd ``g`` of every key's difference from it. The keys
then share one residue modulo ``n`` exactly when ``n`` divides ``g``, and it is ``h0 mod n``,
for whatever ``n`` the next batch needs; neither depends on the order the keys came in
(the gcd of the differences from one key is that of all pairwise differences). A hash is
dropped once ``g`` is 1, and the keys stop being read once every hash is. A wrong choice
only costs timestamps.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..._partitioners import HASHES

__all__ = ["KeyClasses", "choose_keying", "is_keyed", "levels", "own_class"]

_SLICE = 8192  # keys hashed at once
DEFAULT_HASH = "spark"  # an attempt that names none (records before key_hash)


class KeyClasses:
    """Per partitioner, ``(h0, g)`` of the keys fed to it (fed in slices; see the module doc)."""

    __slots__ = ("_kind", "_pending", "classes", "empty")

    def __init__(self, kind: str | None) -> None:
        self._kind = kind  # the row key's Spark hash kind (``hash_kind``)
        self.classes: dict[str, list[int]] | None = None  # None until the first key
        self.empty = True
        self._pending: list[bytes] = []

    def open(self) -> bool:
        """Whether a key can still change the report."""
        return self.empty or bool(self.classes)

    def feed(self, keys: Iterable[bytes]) -> None:
        """Take ``keys`` a slice at a time (stops reading them once no partitioner keeps them together)."""
        it = iter(keys)
        while self.open() and (part := list(itertools.islice(it, _SLICE))):
            self._pending.extend(part)
            self._hash()

    def add(self, key: bytes) -> None:
        if self.open():
            self._pending.append(key)
            if len(self._pending) >= _SLICE:
                self._hash()

    def done(self) -> dict[str, list[int]]:
        """The report once every key the task writes was fed: partitioner -> ``[h0, g]``."""
        if self._pending:
            self._hash()
        return dict(self.classes or {})

    def _hash(self) -> None:
        keys, self._pending = self._pending, []
        if not keys:
            return
        first = self.classes is None
        if self.classes is None:  # the first slice: every partitioner, its h0 from the first key
            self.classes = {name: [0, 0] for name in HASHES}
        self.empty = False
        for name in list(self.classes):
            try:
                hashes = HASHES[name](keys, self._kind)
            except ValueError:  # keys of another width than the type's: not Spark's values
                hashes = None
            if hashes is None:
                del self.classes[name]
                continue
            if first:
                self.classes[name][0] = int(hashes[0])
            h0, g = self.classes[name]
            g = math.gcd(g, int(np.gcd.reduce(np.abs(hashes - h0))))
            if g == 1:
                del self.classes[name]
            else:
                self.classes[name][1] = g


def own_class(partition: int, modulus: int, residues: Sequence[int] = ()) -> tuple[int, int]:
    """Task ``partition``'s residue and rank: ``residues[partition]`` is ``residue + rank * modulus``
    (-1: none) where the attempt recorded residues, else residue ``partition``, rank 0."""
    if not residues:
        return partition, 0
    v = residues[partition] if 0 <= partition < len(residues) else -1
    return (v % modulus, v // modulus) if v >= 0 else (-1, 0)


def levels(modulus: int, residues: Sequence[int] = ()) -> int:
    """The blocks keyed tasks take (1 + the highest rank); every other task writes above them."""
    return 1 + max((v // modulus for v in residues if v >= 0), default=0) if modulus else 1


def is_keyed(classes: Mapping[str, Sequence[int]] | None, *, key_hash: str, tasks: int, partition: int,
             residues: Sequence[int] = ()) -> bool:
    """Whether a task with this report is keyed under ``key_hash`` modulo ``tasks`` (the attempt's modulus).

    ``key_hash`` "" is Spark's (records before it). Its keys must all hash to its own
    residue (:func:`own_class`; no residue and rank are ever given twice: :func:`choose_keying`).
    ``None``: the task wrote no key.
    Modulo 1 every key hashes to 0: task 0 is keyed with no hash (for any key type), and no other.
    """
    own = own_class(partition, tasks, residues)[0]
    if not 0 <= own < tasks or partition < 0:
        return False
    if tasks == 1 or classes is None:
        return True
    found = classes.get(key_hash or DEFAULT_HASH)
    return found is not None and found[1] % tasks == 0 and found[0] % tasks == own


MAX_RESIDUES = 4096  # the largest batch whose residues an attempt records (each task reads them)


def choose_keying(reports: Iterable[tuple[int, Mapping[str, Sequence[int]] | None]],
                  tasks: int) -> tuple[str, int, list[int]]:
    """The partitioner, modulus and residues that give the next batch the narrowest span (commit, driver).

    ``reports``: each task's partition id and :class:`KeyClasses` report (None: no key);
    ``tasks``: this batch's task count. Moduli tried: ``tasks``, and the gcd of every task's
    ``g`` (a topic's partition count when ``minPartitions`` splits its partitions). Under
    "task ``p`` holds residue ``p``" (modulus ``tasks``, nothing recorded) or recorded
    residues (up to :data:`MAX_RESIDUES` tasks): the tasks that held one residue get ranks
    0, 1, ... in partition order, block = rank, so no (residue, rank) is given twice and a
    later split of a partition writes above an earlier one. Ties go to the first in
    ``HASHES`` (Spark's), to no residues and to modulus ``tasks``. What it returns only
    decides which tasks share blocks, never exactness. Narrowest: the fewest blocks up to
    the highest a task would take, then the fewest tasks outside the keyed ranks.
    """
    reports = list(reports)
    best: tuple[int, int, int, str, int, list[int]] = (2 * tasks + 2, tasks, 0, next(iter(HASHES)), tasks, [])
    order = 0
    for name in HASHES:
        found = {p: c[name] for p, c in reports if c and name in c and 0 <= p < tasks}
        common = math.gcd(*(g for _, g in found.values()))
        for modulus in [tasks] + ([common] if common > 1 and common != tasks else []):
            held = {p: h0 % modulus for p, (h0, g) in found.items() if g % modulus == 0}
            ranked, seen = [-1] * tasks, Counter[int]()
            for p in sorted(p for p in held if found[p][1]):  # one key (g 0) shows no partitioner
                ranked[p] = held[p] + seen[held[p]] * modulus
                seen[held[p]] += 1
            options: list[list[int]] = ([[]] if modulus == tasks else []) + ([ranked] if tasks <= MAX_RESIDUES else [])
            for recorded in options:
                stray = [p for p in range(tasks) if (recorded[p] < 0 if recorded else held.get(p) != p)]
                order += 1
                span = levels(modulus, recorded) + (1 + max(stray) if stray else 0)
                best = min(best, (span, len(stray), order, name, modulus, recorded))
    return best[3], best[4], best[5]
