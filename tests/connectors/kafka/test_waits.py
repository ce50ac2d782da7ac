"""Named waits on Kafka (issue 50): one WARNING when a wait passes its threshold, saying
what waits (call, partition, broker, seconds so far), one WARNING when it ended, saying how
long it lasted and how it ended (issue 58: at INFO that line never reached the driver's
log), and slow calls recorded for the failover bench. No server: the waits here are plain blocks; the
failover bench and tests/integration/test_kafka_leader_kill_liveness.py see real ones.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from sparkbarrier.connectors.kafka.client import _waits
from polling import wait_for


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thresholds of tenths of a second instead of 10 s, so the test takes under one."""
    monkeypatch.setattr(_waits, "WARN_AFTER_S", 0.3)
    monkeypatch.setattr(_waits, "RECORD_AFTER_S", 0.2)
    monkeypatch.setattr(_waits, "_TICK_S", 0.05)


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and r.name == "sparkbarrier.connectors.kafka"]


def test_a_long_wait_is_logged_once_while_it_lasts_and_once_when_it_ends(
        fast: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sparkbarrier.connectors.kafka")
    asked: list[str] = []

    def broker() -> str:
        asked.append("x")
        return "node 3 (127.0.0.1:19094)"

    with _waits.waiting("look up latest offsets", "t:0", broker) as w:
        wait_for(lambda: _lines(caplog, logging.WARNING), 5, "the wait's warning")
        # several more ticks of the watchdog: still one line
        wait_for(lambda: time.monotonic() - w.started > 0.8, 5, "twice the threshold")
        took = time.monotonic() - w.started
    warnings = _lines(caplog, logging.WARNING)
    assert len(warnings) == 2, warnings
    assert "look up latest offsets of t:0 on node 3 (127.0.0.1:19094)" in warnings[0]
    assert " s so far" in warnings[0]
    # the end, at the start's level: what waited, on which broker, how long, how it ended
    assert warnings[1].startswith("barrier-kafka: driver waited on Kafka "), warnings[1]
    assert warnings[1].endswith(": look up latest offsets of t:0 on node 3 (127.0.0.1:19094); "
                                "answered"), warnings[1]
    lasted = float(warnings[1].split("waited on Kafka ")[1].split(" s:")[0])
    assert took - 0.1 <= lasted <= took + 1.0, (lasted, took)
    assert len(asked) == 2  # the broker is asked only when a line names it


def test_a_long_wait_that_fails_says_so_when_it_ends(
        fast: None, caplog: pytest.LogCaptureFixture, tmp_path, monkeypatch) -> None:
    record = tmp_path / "waits.jsonl"
    monkeypatch.setenv(_waits.ENV, str(record))
    caplog.set_level(logging.WARNING, logger="sparkbarrier.connectors.kafka")
    with pytest.raises(TimeoutError, match="password=hunter2"), \
            _waits.waiting("look up latest offsets", "t:4", "node 2"):
        wait_for(lambda: _lines(caplog, logging.WARNING), 5, "the wait's warning")
        raise TimeoutError("password=hunter2")
    ended = _lines(caplog, logging.WARNING)[1]
    assert ended.endswith("look up latest offsets of t:4 on node 2; ended with TimeoutError")
    assert "hunter2" not in ended  # only the error's type: a client's message may hold secrets
    assert json.loads(record.read_text())["outcome"] == "ended with TimeoutError"


def test_a_short_wait_logs_nothing_and_records_nothing(
        fast: None, caplog: pytest.LogCaptureFixture, tmp_path, monkeypatch) -> None:
    record = tmp_path / "waits.jsonl"
    monkeypatch.setenv(_waits.ENV, str(record))
    caplog.set_level(logging.DEBUG, logger="sparkbarrier.connectors.kafka")
    with _waits.waiting("Fetch", "t:1", "node 1"):
        pass
    assert _lines(caplog, logging.WARNING) == [] and _lines(caplog, logging.INFO) == []
    assert not record.exists()


def test_a_slow_call_is_recorded_as_one_json_line(fast: None, tmp_path, monkeypatch) -> None:
    record = tmp_path / "waits.jsonl"
    monkeypatch.setenv(_waits.ENV, str(record))
    w = _waits.begin("ListOffsets (earliest)", "t:2", "node 2", where="read task of t:2")
    started = time.monotonic()
    wait_for(lambda: time.monotonic() - started >= 0.25, 5, "a slow call")
    w.on("node 1")  # the wait moved to another broker
    _waits.end(w)
    _waits.end(w)  # idempotent
    lines = record.read_text().splitlines()
    assert len(lines) == 1
    found = json.loads(lines[0])
    assert found["call"] == "ListOffsets (earliest)" and found["partition"] == "t:2"
    assert found["broker"] == "node 1" and found["where"] == "read task of t:2"
    assert found["took_s"] >= 0.25 and found["outcome"] == "answered"


def test_waits_on_several_threads_are_each_warned_about(
        fast: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sparkbarrier.connectors.kafka")
    release = threading.Event()

    def one(partition: str) -> None:
        with _waits.waiting("Fetch", partition, "node 1"):
            release.wait(5)

    threads = [threading.Thread(target=one, args=(f"t:{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    wait_for(lambda: len(_lines(caplog, logging.WARNING)) == 3, 5, "three warnings")
    started = [m for m in _lines(caplog, logging.WARNING) if "so far" in m]
    release.set()
    for t in threads:
        t.join(5)
    assert sorted(m.split(" of ")[1].split(" on ")[0] for m in started) == ["t:0", "t:1", "t:2"]
    ended = [m for m in _lines(caplog, logging.WARNING) if "waited on Kafka" in m]
    assert sorted(m.split(" of ")[1].split(" on ")[0] for m in ended) == ["t:0", "t:1", "t:2"]


def test_a_broker_that_cannot_be_told_never_fails_the_wait(
        fast: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sparkbarrier.connectors.kafka")

    def broken() -> str:
        raise RuntimeError("closed")

    with _waits.waiting("Fetch", "t:3", broken):
        wait_for(lambda: _lines(caplog, logging.WARNING), 5, "the wait's warning")
    assert "on unknown broker" in _lines(caplog, logging.WARNING)[0]
