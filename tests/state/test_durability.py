"""Saving and restoring the ledger: atomic, checksummed, identity-checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from sparkbarrier import CorruptStateError, StateCompatibilityError
from sparkbarrier.state import PendingCheckpoints
from sparkbarrier.state._pending import LEDGER_FILE

IDENTITY = {"topics": "orders,payments", "group": "g1"}


def saved(tmp_path, *ids: int) -> PendingCheckpoints:
    ledger = PendingCheckpoints(max_pending=7, identity=IDENTITY)
    for cid in ids:
        ledger.add(cid, {"orders:0": cid * 10}, 1000 + cid, {"batch": str(cid)})
    ledger.save(tmp_path)
    return ledger


def test_restore_of_empty_directory_gives_empty_ledger(tmp_path):
    ledger = PendingCheckpoints.restore(tmp_path / "nothing-here", identity=IDENTITY)
    assert len(ledger) == 0 and ledger.identity == IDENTITY


def test_save_then_restore_round_trips(tmp_path):
    original = saved(tmp_path, 1, 2, 5)
    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY)
    assert restored.pending == original.pending
    assert restored.max_pending == 7


def test_restored_ledger_keeps_ids_increasing(tmp_path):
    ledger = saved(tmp_path, 1, 2)
    ledger.complete(2)
    ledger.save(tmp_path)
    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY)
    with pytest.raises(Exception, match="strictly increase"):
        restored.add(2, {}, 0)


def test_identity_mismatch_is_refused_naming_both(tmp_path):
    saved(tmp_path, 1)
    other = {"topics": "orders", "group": "g1"}
    with pytest.raises(StateCompatibilityError) as info:
        PendingCheckpoints.restore(tmp_path, identity=other)
    message = str(info.value)
    assert "orders,payments" in message and "'topics': 'orders'" in message


def test_identity_mismatch_can_be_overridden(tmp_path):
    saved(tmp_path, 1, 2)
    other = {"topics": "orders", "group": "g2"}
    restored = PendingCheckpoints.restore(tmp_path, identity=other, allow_mismatch=True)
    assert restored.identity == other and [e.checkpoint_id for e in restored.pending] == [1, 2]


def test_checksum_mismatch_is_a_clear_error(tmp_path):
    saved(tmp_path, 1)
    path = tmp_path / LEDGER_FILE
    envelope = json.loads(path.read_text())
    envelope["payload"] = envelope["payload"].replace('"orders:0":10', '"orders:0":99')
    path.write_text(json.dumps(envelope))
    with pytest.raises(CorruptStateError, match="corrupt: sha256") as info:
        PendingCheckpoints.restore(tmp_path, identity=IDENTITY)
    assert info.value.path == str(path)


def test_truncated_file_is_a_clear_error(tmp_path):
    saved(tmp_path, 1, 2)
    path = tmp_path / LEDGER_FILE
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CorruptStateError, match="not a valid envelope"):
        PendingCheckpoints.restore(tmp_path, identity=IDENTITY)


def test_unknown_envelope_version_is_rejected(tmp_path):
    saved(tmp_path, 1)
    path = tmp_path / LEDGER_FILE
    envelope = json.loads(path.read_text())
    envelope["version"] = 2
    path.write_text(json.dumps(envelope))
    with pytest.raises(CorruptStateError, match="version 2"):
        PendingCheckpoints.restore(tmp_path, identity=IDENTITY)


WRITER = r"""
import os, sys, time
from sparkbarrier.state import PendingCheckpoints
directory, stall_at = sys.argv[1], int(sys.argv[2])
real_fsync, calls = os.fsync, 0

def fsync(fd):
    # Each save fsyncs the temp file (odd calls) then the directory (even calls).
    global calls
    calls += 1
    if calls == stall_at:
        print("STALL", flush=True)
        time.sleep(600)  # the parent kills us here
    real_fsync(fd)

os.fsync = fsync
ledger = PendingCheckpoints(max_pending=5, identity={"topics": "orders", "group": "g1"})
channels = [f"orders:{p}" for p in range(3000)]
cid = 0
while True:
    cid += 1
    ledger.add(cid, {ch: cid for ch in channels}, cid)
    ledger.save(directory)
    print(cid, flush=True)
"""
IDENTITY_W = {"topics": "orders", "group": "g1"}


def run_writer_and_kill(directory, *, stall_at: int, saves_before_kill: int) -> list[int]:
    """Start WRITER, kill it with SIGKILL at the chosen point, return ids it reported saved."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), str(stall_at)], stdout=subprocess.PIPE, text=True
    )
    reported: list[int] = []
    try:
        while True:
            line = proc.stdout.readline().strip()
            assert line, "writer subprocess died on its own"
            if line == "STALL":
                break
            reported.append(int(line))
            if not stall_at and len(reported) == saves_before_kill:
                break  # the writer is now somewhere inside its next add/save
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    reported += [int(line) for line in proc.stdout.read().split() if line != "STALL"]
    proc.stdout.close()
    return reported


def assert_valid_ledger(restored: PendingCheckpoints, newest: int) -> None:
    ids = [e.checkpoint_id for e in restored.pending]
    assert ids == list(range(max(1, newest - 4), newest + 1))
    for entry in restored.pending:
        assert set(entry.offsets.values()) == {entry.checkpoint_id} and len(entry.offsets) == 3000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("saves_before_kill", [1, 4, 9])
def test_kill_at_arbitrary_point_leaves_old_or_new_state(tmp_path, saves_before_kill):
    reported = run_writer_and_kill(tmp_path, stall_at=0, saves_before_kill=saves_before_kill)
    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY_W)
    newest = restored.latest.checkpoint_id
    assert newest in (max(reported), max(reported) + 1)  # the last reported save is durable
    assert_valid_ledger(restored, newest)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("save", [1, 3])
def test_kill_between_write_and_rename_keeps_old_state(tmp_path, save):
    # Stall inside the fsync of the temp file of save number `save`: written, not renamed.
    run_writer_and_kill(tmp_path, stall_at=2 * save - 1, saves_before_kill=0)
    assert list(tmp_path.glob(f".{LEDGER_FILE}.*.tmp")), "the kill should leave a half-done temp file"
    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY_W)
    if save == 1:
        assert len(restored) == 0  # nothing was ever saved completely
    else:
        assert_valid_ledger(restored, save - 1)
    assert not list(tmp_path.glob(f".{LEDGER_FILE}.*.tmp"))


@pytest.mark.timeout(120)
def test_kill_after_rename_before_directory_fsync_keeps_new_state(tmp_path):
    run_writer_and_kill(tmp_path, stall_at=2 * 3, saves_before_kill=0)
    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY_W)
    assert_valid_ledger(restored, 3)


def test_restore_removes_temp_files_left_by_a_crash(tmp_path):
    saved(tmp_path, 1)
    stale = tmp_path / f".{LEDGER_FILE}.abc123.tmp"
    stale.write_text("half a write")
    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY)
    assert len(restored) == 1 and not stale.exists()


def test_overlapping_saves_never_leave_the_older_state_on_disk(tmp_path, monkeypatch):
    """A save that started first but writes slowly must not overwrite a newer save.

    Before saves were ordered, thread A captured {1} under the lock, thread B
    captured {1, 2} and wrote it, then A's late write put {1} back on disk; a
    ledger restored from it accepted checkpoint 2 a second time.
    """
    import threading

    from sparkbarrier.state import _pending

    real_write = _pending.write_atomic
    first_entered, release_first = threading.Event(), threading.Event()
    calls = []

    def slow_first_write(path, payload):
        calls.append(payload["newest_id"])
        if len(calls) == 1:
            first_entered.set()
            assert release_first.wait(10), "test hung"
        real_write(path, payload)

    monkeypatch.setattr(_pending, "write_atomic", slow_first_write)
    ledger = PendingCheckpoints(max_pending=7, identity=IDENTITY)
    ledger.add(1, {"orders:0": 10}, 1001)
    errors: list[BaseException] = []

    def save() -> None:
        try:
            ledger.save(tmp_path)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    older = threading.Thread(target=save)
    older.start()
    assert first_entered.wait(10)
    ledger.add(2, {"orders:0": 20}, 1002)  # the ledger itself is not held up by the slow write
    newer = threading.Thread(target=save)
    newer.start()
    newer.join(0.5)  # unordered saves finish here, before the older one
    release_first.set()
    older.join(10)
    newer.join(10)
    assert not older.is_alive() and not newer.is_alive() and errors == []

    restored = PendingCheckpoints.restore(tmp_path, identity=IDENTITY)
    assert [e.checkpoint_id for e in restored.pending] == [1, 2]
    with pytest.raises(Exception, match="strictly increase"):
        restored.add(2, {"orders:0": 20}, 1002)
