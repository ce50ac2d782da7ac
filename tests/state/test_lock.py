"""CheckpointLock: emit + advance offset is atomic w.r.t. snapshots; reentrant."""

from __future__ import annotations

import threading

from sparkbarrier.state import CheckpointLock


def test_lock_is_reentrant():
    lock = CheckpointLock()
    with lock:
        with lock:
            assert True


def test_snapshot_never_sees_emit_without_offset_advance():
    lock = CheckpointLock()
    state = {"emitted": 0, "offset": 0}
    torn: list[tuple[int, int]] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            with lock:
                state["emitted"] += 1
                for _ in range(50):  # widen the window between the two steps
                    pass
                state["offset"] += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(2000):
            with lock:
                if state["emitted"] != state["offset"]:
                    torn.append((state["emitted"], state["offset"]))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert torn == []
    assert state["emitted"] > 0


def test_acquire_with_timeout_fails_while_held_elsewhere():
    lock = CheckpointLock()
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            release.wait(timeout=10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(timeout=10)
        assert lock.acquire(timeout=0.01) is False
    finally:
        release.set()
        thread.join(timeout=10)
    assert lock.acquire(timeout=1) is True
    lock.release()
