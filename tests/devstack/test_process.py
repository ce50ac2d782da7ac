"""Ownership checks: ``down`` signals only processes that carry this stack's marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from polling import wait_for

from sparkbarrier.devstack._process import (
    ProcessRecord,
    is_ours,
    marker_for,
    spawn,
    stop_processes,
    stop_recorded,
)

pytestmark = [pytest.mark.timeout(60)]

_SLEEPER = "import time, sys; time.sleep(120)"


def test_foreign_pid_in_a_record_is_never_signalled(tmp_path: Path) -> None:
    foreign = subprocess.Popen([sys.executable, "-c", _SLEEPER])
    try:
        record = ProcessRecord(name="kafka", pid=foreign.pid,
                               marker=marker_for("kafka", tmp_path), log="")
        assert not is_ours(record)
        assert stop_processes([record], grace_s=1.0) == []
        assert foreign.poll() is None
    finally:
        foreign.kill()
        foreign.wait()


def test_marked_process_is_stopped_and_reaped(tmp_path: Path) -> None:
    marker = marker_for("kafka", tmp_path)
    # The marker rides in argv like the JVM's -D flag: python ignores extra args after -c.
    proc = spawn([sys.executable, "-c", _SLEEPER, marker], log_path=tmp_path / "x.log",
                 cwd=tmp_path)
    record = ProcessRecord(name="kafka", pid=proc.pid, marker=marker, log="")
    # Between fork and exec /proc shows the parent's command line: poll for the marker.
    wait_for(lambda: is_ours(record), 10, "the marker in the child's command line")
    assert [r.pid for r in stop_processes([record], grace_s=5.0)] == [proc.pid]
    assert proc.wait(timeout=5) is not None
    assert not is_ours(record)


def test_record_round_trips_through_its_json_file(tmp_path: Path) -> None:
    record = ProcessRecord(name="hbase-thrift", pid=42, marker="-Dm", log="l",
                           ports={"hbase_thrift": 9090}, started_at=1.5)
    record.save(tmp_path)
    assert ProcessRecord.load(tmp_path, "hbase-thrift") == record
    ProcessRecord.remove(tmp_path, "hbase-thrift")
    assert ProcessRecord.load(tmp_path, "hbase-thrift") is None


def test_stop_recorded_stops_ours_and_forgets_every_named_record(tmp_path: Path) -> None:
    """What each component's ``down`` does: stop what runs, drop stale and unreadable records too."""
    marker = marker_for("kdc", tmp_path)
    proc = spawn([sys.executable, "-c", _SLEEPER, marker], log_path=tmp_path / "x.log", cwd=tmp_path)
    live = ProcessRecord(name="kdc", pid=proc.pid, marker=marker, log="")
    wait_for(lambda: is_ours(live), 10, "the marker in the child's command line")
    live.save(tmp_path)
    ProcessRecord(name="gone", pid=proc.pid, marker="-Dnot-this-one", log="").save(tmp_path)
    (tmp_path / "garbled.json").write_text("{")
    stopped = stop_recorded(tmp_path, ["kdc", "gone", "garbled", "never-started"], grace_s=5.0)
    assert [r.name for r in stopped] == ["kdc"]
    assert proc.wait(timeout=5) is not None
    assert not list(tmp_path.glob("*.json"))
