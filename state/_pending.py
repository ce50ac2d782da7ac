"""The pending-checkpoints ledger: what to commit once a checkpoint completes.

After Flink's ``pendingOffsetsToCommit`` in the Kafka consumer: a snapshot
records the offsets it covers under its checkpoint id; when the checkpoint is
known complete, those offsets are committed and every older entry is dropped
(subsumed -- the newer offsets include them). Aborted checkpoints drop only
themselves. Offsets always mean *next offset to read*.

Who calls it: the driver side of a source (``latestOffset`` adds, ``commit``
completes). The ledger is thread-safe, including concurrent :meth:`PendingCheckpoints.save`
calls (ordered, newest state wins); one instance per source.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, overload

from .._exceptions import CorruptStateError, ProtocolError, StateCompatibilityError
from ._durable import SnapshotStore, read_checked, read_latest, remove_stale_temps, write_atomic, write_generation
from ._json import Json, json_int, json_object

__all__ = ["LEDGER_FILE", "LEDGER_VERSION", "PendingCheckpoint", "PendingCheckpoints"]

log = logging.getLogger(__name__)

LEDGER_FILE = "pending_checkpoints.json"
LEDGER_STEM = "pending_checkpoints"  # generations in a SnapshotStore: pending_checkpoints-<n>.json
LEDGER_VERSION = 1
DEFAULT_MAX_PENDING = 100


@overload
def _frozen_str_map(value: Mapping[str, object] | None, what: str, *, ints: Literal[True]) -> Mapping[str, int]: ...


@overload
def _frozen_str_map(value: Mapping[str, object] | None, what: str, *, ints: Literal[False]) -> Mapping[str, str]: ...


def _frozen_str_map(value: Mapping[str, object] | None, what: str, *,
                    ints: bool) -> Mapping[str, object]:
    """A read-only copy of ``value`` after checking every key and value at run time.

    Typed as taking any values because it is the check: callers pass what a caller or
    a parsed file handed them.
    """
    out: dict[str, object] = {}
    for key, item in (value or {}).items():
        if not isinstance(key, str):
            raise ProtocolError(f"{what} keys must be str, got {key!r}")
        if ints:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ProtocolError(f"{what}[{key!r}] must be a non-negative int, got {item!r}", channel=key)
        elif not isinstance(item, str):
            raise ProtocolError(f"{what}[{key!r}] must be str, got {item!r}")
        out[key] = item
    # Copy, so a caller mutating its dict later cannot change a recorded checkpoint.
    return MappingProxyType(out)


@dataclass(frozen=True)
class PendingCheckpoint:
    """Offsets (channel ``"topic:3"`` -> next offset to read) covered by one checkpoint."""

    checkpoint_id: int
    offsets: Mapping[str, int]
    timestamp_ms: int
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        # Validate and take read-only copies even when built directly.
        object.__setattr__(self, "checkpoint_id", int(self.checkpoint_id))
        object.__setattr__(self, "timestamp_ms", int(self.timestamp_ms))
        object.__setattr__(self, "offsets", _frozen_str_map(self.offsets, "offsets", ints=True))
        object.__setattr__(self, "metadata", _frozen_str_map(self.metadata, "metadata", ints=False))

    def __reduce__(self) -> tuple[Callable[[Mapping[str, Json]], PendingCheckpoint], tuple[dict[str, Json]]]:
        # mappingproxy does not pickle; rebuild from the JSON form instead.
        return (PendingCheckpoint.from_json, (self.to_json(),))

    def to_json(self) -> dict[str, Json]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "offsets": dict(self.offsets),
            "timestamp_ms": self.timestamp_ms,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> PendingCheckpoint:
        """The entry :meth:`to_json` wrote; ``TypeError``/``KeyError``/``ValueError`` on another layout."""
        return cls(
            checkpoint_id=json_int(data["checkpoint_id"]),
            offsets=_frozen_str_map(json_object(data["offsets"], "offsets"), "offsets", ints=True),
            timestamp_ms=json_int(data["timestamp_ms"]),
            metadata=_frozen_str_map(json_object(data.get("metadata") or {}, "metadata"), "metadata", ints=False),
        )


class PendingCheckpoints:
    """Checkpoint id -> offsets, oldest first, capped at ``max_pending`` entries.

    ``identity`` (str -> str, e.g. topics and group) names what the offsets
    belong to; :meth:`restore` refuses state saved under another identity.
    """

    def __init__(
        self, max_pending: int = DEFAULT_MAX_PENDING, identity: Mapping[str, str] | None = None
    ) -> None:
        if max_pending < 1:
            raise ProtocolError(f"max_pending must be >= 1, got {max_pending}")
        self._max_pending = max_pending
        self._identity = _frozen_str_map(identity, "identity", ints=False)
        self._entries: list[PendingCheckpoint] = []
        # Newest id ever added, kept after complete/abort so ids never go back.
        self._newest_id: int | None = None
        self._lock = threading.RLock()
        # Serialises save(); taken before (never while holding) _lock. See save().
        self._save_lock = threading.Lock()
        self._generation = 0  # the generation restored or last saved (SnapshotStore only)

    @property
    def identity(self) -> Mapping[str, str]:
        return self._identity

    @property
    def max_pending(self) -> int:
        return self._max_pending

    @property
    def pending(self) -> tuple[PendingCheckpoint, ...]:
        with self._lock:
            return tuple(self._entries)

    @property
    def newest_id(self) -> int | None:
        """Newest checkpoint id ever added (kept after complete/abort), or None."""
        with self._lock:
            return self._newest_id

    @property
    def latest(self) -> PendingCheckpoint | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        ids = [e.checkpoint_id for e in self.pending]
        return f"PendingCheckpoints(ids={ids}, max_pending={self._max_pending})"

    def add(
        self,
        checkpoint_id: int,
        offsets: Mapping[str, int],
        timestamp_ms: int,
        metadata: Mapping[str, str] | None = None,
    ) -> PendingCheckpoint:
        """Record the offsets of a new snapshot. Ids must strictly increase.

        The id must also be newer than the newest id ever added, even if that
        one was since completed or aborted, because a completed id subsumed all
        older ones. Past the cap the oldest entry is dropped with a warning: its
        offsets are then never committed on their own, only via a newer one.
        """
        entry = PendingCheckpoint(checkpoint_id, offsets, timestamp_ms, metadata or {})
        with self._lock:
            newest = self._newest_id
            if newest is not None and entry.checkpoint_id <= newest:
                raise ProtocolError(
                    f"checkpoint ids must strictly increase: got {entry.checkpoint_id} "
                    f"after {newest}",
                    checkpoint_id=entry.checkpoint_id,
                )
            self._entries.append(entry)
            self._newest_id = entry.checkpoint_id
            while len(self._entries) > self._max_pending:
                dropped = self._entries.pop(0)
                log.warning(
                    "more than %d pending checkpoints; dropping checkpoint %d (its offsets "
                    "will be committed with a newer checkpoint)",
                    self._max_pending,
                    dropped.checkpoint_id,
                )
            return entry

    def complete(self, checkpoint_id: int) -> PendingCheckpoint | None:
        """Entry to commit for ``checkpoint_id``; drops it and every older one.

        Idempotent: an unknown (already completed, subsumed, aborted, dropped or
        never added) id is a logged no-op returning None, as in Flink.
        """
        with self._lock:
            for pos, entry in enumerate(self._entries):
                if entry.checkpoint_id == checkpoint_id:
                    del self._entries[: pos + 1]
                    return entry
        log.warning(
            "checkpoint %d completed but is not pending (already committed, subsumed or "
            "dropped); nothing to commit",
            checkpoint_id,
        )
        return None

    def abort(self, checkpoint_id: int) -> None:
        """Forget ``checkpoint_id`` only; older entries stay pending. Idempotent."""
        with self._lock:
            self._entries = [e for e in self._entries if e.checkpoint_id != checkpoint_id]

    # -- durability ---------------------------------------------------------

    def save(self, directory: str | os.PathLike[str] | SnapshotStore) -> None:
        """Persist atomically to ``directory``; a crash leaves the old or new file.

        ``directory`` is a local path (one file, replaced atomically) or a
        :class:`SnapshotStore` on any file system (a new generation per save).

        Saves are ordered: concurrent calls run one at a time, and each captures
        the ledger only once it holds the save lock, so a save that finishes later
        always writes a state at least as new as every save before it. Without
        that, a slow save of an older state could land after a newer one, and a
        ledger restored from it would accept an already-added checkpoint id again.

        Only the payload capture takes the ledger lock: ``add``/``complete``/``abort``
        are not held up by disk I/O. Lock order is save lock, then ledger lock.
        """
        with self._save_lock:
            with self._lock:
                payload: dict[str, Json] = {
                    "ledger_version": LEDGER_VERSION,
                    "identity": dict(self._identity),
                    "max_pending": self._max_pending,
                    "newest_id": self._newest_id,
                    "entries": [e.to_json() for e in self._entries],
                }
            if isinstance(directory, (str, os.PathLike)):
                write_atomic(Path(directory) / LEDGER_FILE, payload)
            else:
                self._generation = write_generation(directory, LEDGER_STEM, payload, self._generation)

    @classmethod
    def restore(
        cls,
        directory: str | os.PathLike[str] | SnapshotStore,
        identity: Mapping[str, str] | None = None,
        allow_mismatch: bool = False,
        max_pending: int | None = None,
    ) -> PendingCheckpoints:
        """The ledger saved in ``directory`` (empty if nothing was saved).

        Raises :class:`StateCompatibilityError` when the saved identity differs
        from ``identity`` unless ``allow_mismatch`` (then the new identity is
        adopted, with a warning), and :class:`CorruptStateError` on a damaged file.
        Temp files of a save interrupted by a crash are deleted: call it only
        while no other process saves to ``directory``.
        """
        wanted = dict(_frozen_str_map(identity, "identity", ints=False))
        generation = 0
        if isinstance(directory, (str, os.PathLike)):
            path: str | Path = Path(directory) / LEDGER_FILE
            if remove_stale_temps(path):
                log.info("removed temp files of an interrupted save next to %s", path)
            payload = read_checked(path)
        else:
            path = f"{directory.location}/{LEDGER_STEM}-*.json"
            latest = read_latest(directory, LEDGER_STEM)
            generation, payload = latest if latest is not None else (0, None)
        if payload is None:
            return cls(max_pending or DEFAULT_MAX_PENDING, wanted)
        try:
            saved = json_object(payload, "the ledger")
            version = saved["ledger_version"]
            saved_identity = dict(json_object(saved["identity"], "identity"))
            listed = saved["entries"]
            if not isinstance(listed, Sequence) or isinstance(listed, str):
                raise TypeError(f"entries is a {type(listed).__name__}, not a JSON array")
            entries = [PendingCheckpoint.from_json(json_object(e, "an entry")) for e in listed]
            newest = saved.get("newest_id")
            saved_max = json_int(saved["max_pending"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"ledger {path} has an unexpected layout: {exc}", path=str(path)) from exc
        if version != LEDGER_VERSION:
            raise CorruptStateError(
                f"ledger {path} has version {version!r}; this build reads version {LEDGER_VERSION}",
                path=str(path),
            )
        if saved_identity != wanted:
            if not allow_mismatch:
                raise StateCompatibilityError(
                    f"ledger {path} was saved for {saved_identity} but is restored for "
                    f"{wanted}; point the query at a fresh checkpoint location or allow the "
                    "mismatch explicitly"
                )
            log.warning("restoring ledger saved for %s as %s (mismatch allowed)", saved_identity, wanted)
        ledger = cls(max_pending or saved_max, wanted)
        ledger._generation = generation
        ledger._entries = entries[-ledger._max_pending :]
        ledger._newest_id = json_int(newest) if newest is not None else None
        return ledger
