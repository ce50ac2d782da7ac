"""The tests' Spark class archive (``spark_class_archive``): a failed build leaves the
drivers as they were, says so once, and is not retried by every process of the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import spark_class_archive


def test_a_failed_build_gives_no_flags_and_is_not_retried_within_the_hour(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []

    def failing_job(flags: str, checkpoint: Path) -> str:
        calls.append(flags)
        return "the JVM refused to start"

    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(spark_class_archive, "_run_job", failing_job)
    assert spark_class_archive.driver_flags("-XX:TieredStopAtLevel=1") == ""
    assert "without a class archive (dump: the JVM refused to start)" in capsys.readouterr().err
    assert spark_class_archive.driver_flags("-XX:TieredStopAtLevel=1") == ""  # not built again
    assert len(calls) == 1 and "-XX:ArchiveClassesAtExit=" in calls[0]
    assert not list((tmp_path / "sparkbarrier-class-archive").glob("*.jsa"))


def test_the_key_follows_the_flags(tmp_path: Path) -> None:
    from sparkbarrier.devstack._jvm import find_java

    java = find_java()
    assert spark_class_archive._key(java, tmp_path, "-XX:+UseSerialGC") != spark_class_archive._key(
        java, tmp_path, "-XX:+UseParallelGC")
