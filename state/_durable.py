"""Atomic, checksummed JSON files: a crash leaves the old or the new state.

On disk a state file is an envelope::

    {"version": 1, "sha256": "<hex of payload>", "payload": "<JSON text>"}

The payload is stored as text so the checksum covers exactly the bytes that
were written. Writing goes to a unique temporary file in the same directory,
which is flushed and ``fsync``-ed, then ``os.replace``-d over the target, and
the directory is ``fsync``-ed so the rename itself survives a power cut.

A file system that cannot replace a file atomically (HDFS through WebHDFS, object
stores) gets *generations* instead (:func:`write_generation`, :func:`read_latest`):
every save creates a new file ``<stem>-<generation>.json``, atomically and never over
an existing one, in a :class:`SnapshotStore`; a restore reads the highest. That is
how Spark keeps its own offset log on HDFS (a new file per batch). This module knows
only the store's four calls; ``connectors/storage/_files.py`` implements them on fsspec.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Protocol

from .._exceptions import CorruptStateError
from ._json import Json, parse_json

__all__ = [
    "ENVELOPE_VERSION",
    "SnapshotStore",
    "read_checked",
    "read_latest",
    "remove_stale_temps",
    "write_atomic",
    "write_generation",
]

ENVELOPE_VERSION = 1
_KEEP_GENERATIONS = 3


class SnapshotStore(Protocol):
    """A folder on some file system (``connectors.storage._files.Folder`` on fsspec)."""

    location: str

    def read(self, name: str) -> bytes | None: ...

    def names(self) -> list[str]: ...

    def create(self, name: str, data: bytes) -> None: ...

    def delete(self, name: str) -> None: ...


def _envelope(payload: Json) -> bytes:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    envelope = {
        "version": ENVELOPE_VERSION,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "payload": text,
    }
    return json.dumps(envelope).encode("utf-8")


def write_atomic(path: str | os.PathLike[str], payload: Json) -> None:
    """Replace ``path`` with ``payload`` in one atomic step."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = _envelope(payload)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        # The target is untouched; do not leave the half-written temp file behind.
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. platforms without directory fds; the rename is still atomic
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_checked(path: str | os.PathLike[str]) -> Json | None:
    """The payload stored at ``path``, or None when there is no file.

    Raises :class:`CorruptStateError` when the envelope is unreadable, has an
    unknown version or its checksum does not match.
    """
    target = Path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return None
    return _open_envelope(raw, str(target))


def _open_envelope(raw: bytes, target: str) -> Json:
    try:
        envelope = json.loads(raw)
        version = envelope["version"]
        digest = envelope["sha256"]
        text = envelope["payload"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptStateError(f"state file {target} is not a valid envelope: {exc}", path=str(target)) from exc
    if version != ENVELOPE_VERSION:
        raise CorruptStateError(
            f"state file {target} has envelope version {version!r}; this build reads "
            f"version {ENVELOPE_VERSION}",
            path=str(target),
        )
    actual = hashlib.sha256(str(text).encode("utf-8")).hexdigest()
    if actual != digest:
        raise CorruptStateError(
            f"state file {target} is corrupt: sha256 {actual} != recorded {digest}; "
            "restore from Spark's checkpoint or delete the file to start over",
            path=str(target),
        )
    return parse_json(text)


def remove_stale_temps(path: str | os.PathLike[str]) -> int:
    """Delete temp files a killed :func:`write_atomic` left next to ``path``.

    Only safe while no other process writes ``path`` (e.g. at restore time).
    Returns how many were removed.
    """
    target = Path(path)
    removed = 0
    for stale in target.parent.glob(f".{target.name}.*.tmp"):
        stale.unlink(missing_ok=True)
        removed += 1
    return removed


def _generation(name: str, stem: str) -> int | None:
    prefix, suffix = f"{stem}-", ".json"
    if name.startswith(prefix) and name.endswith(suffix) and name[len(prefix):-len(suffix)].isdigit():
        return int(name[len(prefix):-len(suffix)])
    return None


def read_latest(store: SnapshotStore, stem: str) -> tuple[int, Json] | None:
    """``(generation, payload)`` of the newest generation of ``stem`` in ``store``, or None.

    Raises :class:`CorruptStateError` when that file fails its checksum: an older
    generation is never read instead, since it may miss a batch the newer one records.
    """
    generations = sorted(g for g in (_generation(n, stem) for n in store.names()) if g is not None)
    if not generations:
        return None
    name = f"{stem}-{generations[-1]:012d}.json"
    raw = store.read(name)
    if raw is None:
        raise CorruptStateError(f"state file {store.location}/{name} vanished while it was read",
                                path=f"{store.location}/{name}")
    return generations[-1], _open_envelope(raw, f"{store.location}/{name}")


def write_generation(store: SnapshotStore, stem: str, payload: Json, after: int) -> int:
    """Save ``payload`` as the generation after ``after``; returns it. Keeps the last few.

    Creating never replaces: if that generation exists (another process saved meanwhile),
    the save fails with :class:`FileExistsError` rather than losing either state.
    """
    generation = after + 1
    store.create(f"{stem}-{generation:012d}.json", _envelope(payload))
    for name in store.names():
        old = _generation(name, stem)
        if old is not None and old <= generation - _KEEP_GENERATIONS:
            store.delete(name)
    return generation
