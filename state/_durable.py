"""Atomic, checksummed JSON files: a crash leaves the old or the new state.

On disk a state file is an envelope::

    {"version": 1, "sha256": "<hex of payload>", "payload": "<JSON text>"}

The payload is stored as text so the checksum covers exactly the bytes that
were written. Writing goes to a unique temporary file in the same directory,
which is flushed and ``fsync``-ed, then ``os.replace``-d over the target, and
the directory is ``fsync``-ed so the rename itself survives a power cut.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .._exceptions import CorruptStateError

__all__ = ["ENVELOPE_VERSION", "write_atomic", "read_checked", "remove_stale_temps"]

ENVELOPE_VERSION = 1


def write_atomic(path: str | os.PathLike[str], payload: Any) -> None:
    """Replace ``path`` with ``payload`` (JSON-able) in one atomic step."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    envelope = {
        "version": ENVELOPE_VERSION,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "payload": text,
    }
    data = json.dumps(envelope).encode("utf-8")
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


def read_checked(path: str | os.PathLike[str]) -> Any | None:
    """The payload stored at ``path``, or None when there is no file.

    Raises :class:`CorruptStateError` when the envelope is unreadable, has an
    unknown version or its checksum does not match.
    """
    target = Path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return None
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
    return json.loads(text)


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
