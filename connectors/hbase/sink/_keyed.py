"""Keyed tasks: a write task whose every row key falls into its own residue of one partitioner.

Why. Two write tasks of a batch that change one row key must be ordered: HBase masks
by timestamp, so their cells need distinct timestamps, and a task with its own 8 ms
block (``_timestamps``) spends 8 ms of clock per task and batch. Yet most wide batches
cannot put a key in two tasks: ``repartition(n, rowkey)`` or an aggregation grouped by
the row key sends ``k`` to partition ``pmod(murmur3(k), n)``; a topic read without a
shuffle gives each task the keys Kafka's producer sent to one partition (``minPartitions``:
to consecutive tasks, one range each). Tasks whose keys all hash to distinct residues of
one hash and modulus share no key, so they share a block. The tasks holding one residue
(the splits of one partition) take blocks by their distance from the first task the
attempt recorded holding it (:func:`keyed_block`): one block each, in partition order,
so a key's later split writes above its earlier one even when this batch split the
partitions otherwise than the last (a split that starts early goes below the recorded
ones). Only the other tasks need blocks of their own, above all these.

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

import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ...._exceptions import ProtocolError
from ..._partitioners import HASHES

__all__ = ["KeyClasses", "choose_keying", "keyed_block", "levels", "residue_runs", "residues_of_runs"]

_SLICE = 8192  # keys hashed at once
DEFAULT_HASH = "spark"  # an attempt that names none (records before key_hash)


class KeyClasses:
    """Per partitioner, ``(h0, g)`` of the keys fed to it (fed in slices; see the module doc)."""

    __slots__ = ("_kind", "_pending", "classes")

    def __init__(self, kind: str | None) -> None:
        self._kind = kind  # the row key's Spark hash kind (``hash_kind``)
        self.classes: dict[str, list[int]] | None = None  # None until the first slice is hashed
        self._pending: list[bytes] = []

    @property
    def empty(self) -> bool:
        """No key was fed (keys added but not yet hashed count: a task with a few keys is not empty)."""
        return self.classes is None and not self._pending

    def open(self) -> bool:
        """Whether a key can still change the report."""
        return self.classes is None or bool(self.classes)

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


@functools.lru_cache(maxsize=8)
def _layout(modulus: int, residues: tuple[int, ...]) -> tuple[dict[int, int], int]:
    """Residue -> the first task recorded holding it, and the largest distance from it (``R``);
    once per attempt in a task (a wide batch's tasks would redo O(tasks) each)."""
    first: dict[int, int] = {}
    deepest = 0
    for p, v in enumerate(residues):
        if v >= 0:
            deepest = max(deepest, p - first.setdefault(v % modulus, p))
    return first, deepest


def levels(modulus: int, residues: Sequence[int] = ()) -> int:
    """The blocks keyed tasks may take; every other task writes above them.

    One without recorded residues. With them, ``2R + 1`` for ``R`` the largest recorded
    rank (a task's distance from the first task of its residue): a residue's splits sit
    at ``R`` + their position, and the ``R`` blocks below take the splits of a range that
    starts earlier than recorded (a partition before it split in fewer tasks this batch),
    still in partition order.
    """
    if not modulus or not residues:
        return 1
    return 1 + 2 * _layout(modulus, tuple(residues))[1]


def keyed_block(classes: Mapping[str, Sequence[int]] | None, *, key_hash: str, tasks: int, partition: int,
                residues: Sequence[int] = ()) -> int | None:
    """The block a task with this report writes in if it is keyed under ``key_hash`` modulo
    ``tasks`` (the attempt's modulus), else None (then it writes above :func:`levels`).

    Keyed: all its keys hash to one residue ``c`` (``key_hash`` "": Spark's; modulo 1 all
    keys are 0, for any key type; no report: no key, the residue recorded for it). It writes
    at ``R + partition - first(c)`` if that lies in ``[0, 2R]``, ``first(c)`` the first task
    recorded holding ``c`` (``c`` itself when none are recorded, ``R`` then 0): for one
    residue each block is one task's, in partition order; other residues share no key.
    """
    recorded = residues[partition] if 0 <= partition < len(residues) else -1
    found = classes.get(key_hash or DEFAULT_HASH) if classes is not None else None
    if tasks == 1:
        held = 0
    elif classes is None:
        held = recorded % tasks if recorded >= 0 else (-1 if residues else partition)
    elif found is None or found[1] % tasks:
        return None
    else:
        held = found[0] % tasks
    holders, deepest = _layout(tasks, tuple(residues)) if residues else ({held: held}, 0)
    first = holders.get(held) if 0 <= held < tasks else None
    if first is None or partition < 0:
        return None
    block = deepest + partition - first
    return block if 0 <= block <= 2 * deepest else None


def residue_runs(residues: Sequence[int], step: int) -> list[int]:
    """``residues`` as ``[length, v, start, count, ...]``: each run the ``count`` tasks from ``start``
    holding ``v, v + step, ...`` (the splits of one partition), -1 left out. Lossless, and
    O(partitions) for a topic's splits where the list is O(tasks)."""
    out = [len(residues)]
    for p, v in enumerate(residues):
        if len(out) > 1 and out[-2] + out[-1] == p and v == out[-3] + out[-1] * step and v >= 0:
            out[-1] += 1
        elif v >= 0:
            out += [v, p, 1]
    return out


def residues_of_runs(runs: Sequence[int], step: int) -> list[int]:
    """The list :func:`residue_runs` encodes; a malformed one is a ProtocolError."""
    try:
        out = [-1] * int(runs[0])
        for i in range(1, len(runs), 3):
            v, start, count = (int(x) for x in runs[i:i + 3])
            if v < 0 or start < 0 or count < 1 or start + count > len(out):
                raise ValueError(f"run {[v, start, count]} outside {len(out)} tasks")
            for j in range(count):
                out[start + j] = v + j * step
    except (IndexError, ValueError, TypeError) as exc:
        raise ProtocolError(f"key_runs of a record is malformed: {exc}") from exc
    return out


# The most ints recorded residues take on the wire: each task reads them with the attempt. A
# list of one per task, or runs (``residue_runs``, three ints each) where shorter: 2,048 runs,
# about a topic's partitions, for a topic split by ``minPartitions`` into any number of tasks.
MAX_RESIDUE_INTS = 6145


def choose_keying(reports: Iterable[tuple[int, Mapping[str, Sequence[int]] | None]],
                  tasks: int) -> tuple[str, int, list[int]]:
    """The partitioner, modulus and residues that give the next batch the narrowest span (commit, driver).

    ``reports``: each task's partition id and :class:`KeyClasses` report (None: no key);
    ``tasks``: this batch's task count. Moduli tried: ``tasks``, and the gcd of every task's
    ``g`` (a topic's partition count when ``minPartitions`` splits its partitions). Under
    "task ``p`` holds residue ``p``" (modulus ``tasks``, nothing recorded) or recorded
    residues (up to :data:`MAX_RESIDUE_INTS` on the wire), recorded as ``residue + rank * modulus``, the
    rank a task's distance from the first task that held its residue (:func:`levels`). Ties
    go to the first in ``HASHES`` (Spark's), to no residues and to modulus ``tasks``. What
    it returns only decides which tasks share blocks, never exactness (:func:`keyed_block`
    gives one residue's tasks distinct blocks whatever was recorded). Narrowest: the fewest
    blocks up to the highest a task would take, then the fewest tasks outside the keyed blocks.
    """
    reports = list(reports)
    best: tuple[int, int, int, str, int, list[int]] = (2 * tasks + 2, tasks, 0, next(iter(HASHES)), tasks, [])
    order = 0
    for name in HASHES:
        found = {p: c[name] for p, c in reports if c and name in c and 0 <= p < tasks}
        common = math.gcd(*(g for _, g in found.values()))
        for modulus in [tasks] + ([common] if common > 1 and common != tasks else []):
            held = {p: h0 % modulus for p, (h0, g) in found.items() if g % modulus == 0}
            ranked, first = [-1] * tasks, dict[int, int]()
            for p in sorted(p for p in held if found[p][1]):  # one key (g 0) shows no partitioner
                ranked[p] = held[p] + (p - first.setdefault(held[p], p)) * modulus
            fits = min(tasks, len(residue_runs(ranked, modulus))) <= MAX_RESIDUE_INTS
            options: list[list[int]] = ([[]] if modulus == tasks else []) + ([ranked] if fits else [])
            for recorded in options:
                stray = [p for p in range(tasks) if (recorded[p] < 0 if recorded else held.get(p) != p)]
                order += 1
                span = levels(modulus, recorded) + (1 + max(stray) if stray else 0)
                best = min(best, (span, len(stray), order, name, modulus, recorded))
    return best[3], best[4], best[5]
