"""Keyed tasks: a write task whose every row key falls into its own partition of one partitioner.

Why. Two write tasks of a batch that change one row key must be ordered: HBase masks
by timestamp, so their cells need distinct timestamps, and a layout that gives every
task its own 8 ms (``_timestamps``) spends 8 ms of clock per task and batch. Yet most
wide batches cannot put a key in two tasks at all: a ``repartition(n, rowkey)`` or an
aggregation grouped by the row key sends key ``k`` to partition ``pmod(murmur3(k), n)``,
and a topic read without a shuffle gives task ``p`` the keys Kafka's producer sent to
partition ``p``. A task all of whose keys hash to its own partition id under one hash and
one modulus (a *keyed* task) shares no key with any other keyed task of that hash and
modulus: their keys hash to other residues. So keyed tasks share the batch's first
block of timestamps, and only the others need blocks of their own, above it.

Nothing here trusts the data to be partitioned: the test is per task, on the keys it
writes, under one hash and modulus every task and try of the attempt shares
(``Placement.key_hash`` and ``Placement.keyed_tasks``, recorded in the attempt: the
commit it builds on chose them). The commit chooses from what the tasks report: for each
partitioner of ``.._partitioners`` a task reports the first key's hash ``h0`` and the
greatest common divisor ``g`` of every key's difference from it. The keys then all hash
to one residue modulo ``n`` exactly when ``n`` divides ``g``, and that residue is
``h0 mod n``, whatever ``n`` the next batch turns out to need. What it says is the same for every
try of a task, whatever order it saw its keys in: the gcd of the differences from one key
is the gcd of all pairwise differences, so ``g`` and ``h0 mod n`` (for ``n`` dividing
``g``) do not depend on which key came first. A hash is dropped as soon
as ``g`` is 1 (no modulus above 1 keeps the keys together), and the keys stop being read
once every hash is dropped. A wrong choice only costs timestamps.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..._partitioners import HASHES

__all__ = ["KeyClasses", "choose_keying", "is_keyed"]

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


def is_keyed(classes: Mapping[str, Sequence[int]] | None, *, key_hash: str, tasks: int, partition: int,
             residues: Sequence[int] = ()) -> bool:
    """Whether a task with this report is keyed under ``key_hash`` modulo ``tasks``.

    ``key_hash`` "" is Spark's (records before it). Its keys must all hash to its own
    residue: ``residues[partition]`` where the attempt recorded residues (one residue per
    task, -1 for none, never one residue twice: :func:`choose_keying`), else its partition
    id. ``None``: the task wrote no key.
    Modulo 1 every key hashes to 0: task 0 is keyed with no hash (for any key type), and no other.
    """
    own = (residues[partition] if partition < len(residues) else -1) if residues else partition
    if not 0 <= own < tasks or partition < 0:
        return False
    if tasks == 1 or classes is None:
        return True
    found = classes.get(key_hash or DEFAULT_HASH)
    return found is not None and found[1] % tasks == 0 and found[0] % tasks == own


MAX_RESIDUES = 4096  # the largest batch whose residues an attempt records (each task reads them)


def choose_keying(reports: Iterable[tuple[int, Mapping[str, Sequence[int]] | None]],
                  tasks: int) -> tuple[str, list[int]]:
    """The partitioner, and the residues, under which most of the next batch's tasks would be keyed (commit, driver).

    ``reports``: each task's partition id and :class:`KeyClasses` report (None: no key);
    ``tasks``: this batch's task count, the next attempt's modulus. Residues are recorded
    (task ``p`` -> the residue its keys hashed to) only where that keys more tasks than
    "task ``p`` holds residue ``p``" (a topic read by Spark's own source, whose tasks are not in
    partition order), each residue given to the one task that held it, so no residue is
    given twice. Ties go to the first in ``HASHES`` (Spark's) and to no residues. What it
    returns only decides which tasks of the next batch share a block, never exactness.
    """
    reports = list(reports)
    best: tuple[int, str, list[int]] = (-1, next(iter(HASHES)), [])
    for name in HASHES:
        held: dict[int, int] = {}
        for p, c in reports:
            found = (c or {}).get(name)
            if found is not None and 0 <= p < tasks and found[1] % tasks == 0:
                held[p] = found[0] % tasks
        identity = sum(1 for p, r in held.items() if r == p)
        counts = Counter(held.values())
        unique = {p: r for p, r in held.items() if counts[r] == 1}
        if len(unique) > identity and tasks <= MAX_RESIDUES:
            choice = (len(unique), name, [unique.get(p, -1) for p in range(tasks)])
        else:
            choice = (identity, name, [])
        if choice[0] > best[0]:
            best = choice
    return best[1], best[2]
