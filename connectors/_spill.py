"""Sorted runs of ``(key, value)`` on local disk, merged back by key within a memory bound.

Why. A sink task that nets its whole input per key before it writes (``hbase/sink/_buffer``)
holds more keys than fit in memory on a skewed or wide batch. This is the external sort
under it, with no knowledge of what a value means: the caller spills sorted runs, and
:meth:`SortedRuns.drain` gives every key once, its values combined in run order (the
caller's ``combine``, which must be associative: the merge may combine any consecutive
runs first).

The memory bound holds for any value size and any number of runs:

* runs are written in chunks cut where they reach ``chunk_bytes`` by the caller's
  ``cost`` (one item, when a single one is bigger), each chunk ``marshal``-led by its
  length, and read back one chunk per run;
* a merge pass reads as many consecutive runs as their largest chunks fit in
  ``max_memory`` (at most :data:`MAX_FAN_IN`, at least two); passes repeat until one can
  read every run;
* all runs live in one unlinked temporary file read with ``pread`` (plus the spare a pass
  writes into): two open files whatever the number of runs, and nothing left behind by a
  killed worker (one file per run ran out of descriptors at about 1,024 runs).
"""

from __future__ import annotations

import heapq
import itertools
import marshal
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._exceptions import SinkError

__all__ = ["MAX_FAN_IN", "SortedRuns"]

MAX_FAN_IN = 64  # the most runs one merge pass reads (more runs: another pass)
_LENGTH = struct.Struct(">Q")

V = TypeVar("V")
Item = tuple[bytes, Any]


class SortedRuns(Generic[V]):
    """Runs spilled in key order (oldest first), merged into one key-ordered stream.

    ``cost(key, value)``: what an item takes in memory once read back; ``combine(earlier,
    later)``: one key's values of two runs; ``max_memory``: what the merge may hold.
    """

    def __init__(self, *, max_memory: int, chunk_bytes: int, cost: Callable[[bytes, V], int],
                 combine: Callable[[V, V], V]) -> None:
        self.max_memory, self._chunk_bytes = max_memory, chunk_bytes
        self._cost, self._combine = cost, combine
        self._runs: list[_Run] = []
        self._file = _RunFile()  # holds the runs (a file is created by the first spill)
        self._spare = _RunFile()  # a merge pass writes here, then the two swap
        self._last: _Run | None = None
        self.spilled = 0  # runs written by :meth:`spill`
        self.passes = 0  # passes before the last: 0 up to MAX_FAN_IN runs

    def __bool__(self) -> bool:
        return bool(self._runs)

    def spill(self, items: Iterable[tuple[bytes, V]]) -> None:
        """Append a run: ``items`` in key order, each key once."""
        self._runs.append(self._write(self._file, items))
        self.spilled += 1

    def drain(self) -> Iterator[tuple[bytes, V]]:
        """Every key once, in key order, combined in run order; copied as it goes into a last run.

        Merge passes first leave runs one pass can read; that pass is the stream. Once it
        ended, :meth:`replay` reads its copy (the caller then reads the keys twice, one
        chunk at a time, with the runs' disk given back).
        """
        while len(groups := self._groups()) > 1:
            src, out = self._file, self._spare
            self._runs = [self._write(out, self._merged([src.read(r) for r in g])) for g in groups]
            src.clear()
            self._file, self._spare = out, src
            self.passes += 1
        writer = _RunWriter(self._spare, self._chunk_bytes, self._cost)
        for item in self._merged([self._file.read(r) for r in self._runs]):
            writer.add(item)
            yield item
        self._last = writer.done()
        self._file.clear()
        self._runs = []

    def replay(self) -> Iterator[tuple[bytes, V]]:
        """The stream :meth:`drain` gave, read back from its copy."""
        if self._last is None:
            raise SinkError("internal: SortedRuns.replay() before drain() ended")
        return self._spare.read(self._last)

    def close(self) -> None:
        """Drop the files (unlinked from the start: they vanish when closed, or when the process dies)."""
        self._file.close()
        self._spare.close()
        self._runs = []

    def _write(self, file: _RunFile, items: Iterable[tuple[bytes, V]]) -> _Run:
        writer = _RunWriter(file, self._chunk_bytes, self._cost)
        for item in items:
            writer.add(item)
        return writer.done()

    def _groups(self) -> list[list[_Run]]:
        """The runs cut into consecutive groups one pass can read: their largest chunks fit in
        ``max_memory`` besides the pass's own (its output, its marshalled copy, one being read)."""
        budget = self.max_memory - 3 * self._chunk_bytes
        groups: list[list[_Run]] = [[]]
        size = 0
        for run in self._runs:
            if len(groups[-1]) >= 2 and (len(groups[-1]) >= MAX_FAN_IN or size + run.largest > budget):
                groups.append([])
                size = 0
            groups[-1].append(run)
            size += run.largest
        return groups

    def _merged(self, streams: list[Iterator[tuple[bytes, V]]]) -> Iterator[tuple[bytes, V]]:
        """Runs (each in key order, oldest first) merged by key: every key once, combined in run order."""
        if len(streams) == 1:
            yield from streams[0]
            return
        current: tuple[bytes, V] | None = None
        for key, _, value in heapq.merge(*map(_numbered, itertools.count(), streams)):  # (key, run): input order
            if current is not None and current[0] == key:
                current = (key, self._combine(current[1], value))
                continue
            if current is not None:
                yield current
            current = (key, value)
        if current is not None:
            yield current


def _numbered(n: int, items: Iterable[tuple[bytes, V]]) -> Iterator[tuple[bytes, int, V]]:
    return ((k, n, v) for k, v in items)


@dataclass(frozen=True)
class _Run:
    """A run's bytes in its file, and its largest chunk's cost (what reading the run holds)."""

    start: int
    end: int
    largest: int


class _RunFile:
    """Runs back to back in one unlinked temporary file in the local temporary directory."""

    def __init__(self) -> None:
        self._fd: int | None = None  # opened by the first append: most tasks never spill
        self.size = 0

    def _opened(self) -> int:
        if self._fd is None:
            with tempfile.TemporaryFile(prefix="sparkbarrier-run-", buffering=0) as f:
                self._fd = os.dup(f.fileno())  # the descriptor outlives the wrapper; the file is unlinked already
        return self._fd

    def append(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._opened(), view, self.size)
            self.size += n
            view = view[n:]

    def read(self, run: _Run) -> Iterator[Item]:
        """A run's items in key order, one chunk in memory at a time (an item handed out is
        dropped from the chunk, so what the merge has passed on is freed as it goes)."""
        fd, pos = self._opened(), run.start
        while pos < run.end:
            (n,) = _LENGTH.unpack(_pread(fd, _LENGTH.size, pos))
            chunk: list[Item] = marshal.loads(_pread(fd, n, pos + _LENGTH.size))
            pos += _LENGTH.size + n
            chunk.reverse()
            while chunk:
                yield chunk.pop()

    def clear(self) -> None:
        """Every run read: give the disk back."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        self.size = 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.size = 0


class _RunWriter:
    """Appends one run to a :class:`_RunFile`, in chunks cut by cost, not by count (4,096
    values of 100 KB would hold 400 MB)."""

    def __init__(self, file: _RunFile, chunk_bytes: int, cost: Callable[[bytes, Any], int]) -> None:
        self._file, self._chunk_bytes, self._cost_of, self._start = file, chunk_bytes, cost, file.size
        self._chunk: list[Item] = []
        self._cost = self._largest = 0

    def add(self, item: Item) -> None:
        self._chunk.append(item)
        self._cost += self._cost_of(*item)
        if self._cost >= self._chunk_bytes:
            self._dump()

    def _dump(self) -> None:
        data = marshal.dumps(self._chunk)
        self._chunk = []
        self._file.append(_LENGTH.pack(len(data)))
        self._file.append(data)
        self._largest, self._cost = max(self._largest, self._cost), 0

    def done(self) -> _Run:
        if self._chunk:
            self._dump()
        return _Run(self._start, self._file.size, self._largest)


def _pread(fd: int, n: int, pos: int) -> bytes:
    data = os.pread(fd, n, pos)
    while len(data) < n:  # a short read (Linux reads at most ~2 GiB at once)
        more = os.pread(fd, n - len(data), pos + len(data))
        if not more:
            raise SinkError(f"a spill file ended at {pos + len(data)} bytes, {n - len(data)} early")
        data += more
    return data
