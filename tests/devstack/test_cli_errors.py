"""A bad environment ends in ONE clear line naming cause and fix, nothing left running.

These use throw-away homes and never touch the shared stack.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sparkbarrier.devstack import DevstackError
from sparkbarrier.devstack._config import Paths
from sparkbarrier.devstack._jvm import find_java
from sparkbarrier.devstack._maven import resolve_classpath

from devstack_helpers import run_cli, stack_pids

pytestmark = [pytest.mark.timeout(120)]


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("devstack: ")]
    errors = [line for line in lines if "; fix: " in line]
    assert len(errors) == 1, stderr
    assert stderr.rstrip().splitlines()[-1] == errors[0]
    return errors[0]


def test_busy_explicit_port_fails_with_one_line_and_starts_nothing(
    scratch_home: Path, scratch_env: dict[str, str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        result = run_cli("up", "--kafka-port", str(taken), env=scratch_env)
    assert result.returncode == 1
    assert result.stdout == ""
    line = _one_error_line(result.stderr)
    assert f"port {taken} requested for kafka is already in use" in line
    assert "--kafka-port" in line
    assert stack_pids(scratch_home) == []


def test_bogus_java_home_fails_with_one_line(
    scratch_home: Path, scratch_env: dict[str, str]
) -> None:
    env = dict(scratch_env, JAVA_HOME=str(scratch_home / "no-such-jdk"))
    result = run_cli("up", env=env)
    assert result.returncode == 1
    line = _one_error_line(result.stderr)
    assert "JAVA_HOME=" in line and "no executable bin/java" in line
    assert stack_pids(scratch_home) == []


def test_java_missing_from_path_fails_with_one_line(
    scratch_home: Path, scratch_env: dict[str, str], tmp_path: Path
) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in scratch_env.items() if k != "JAVA_HOME"}
    env["PATH"] = str(empty_bin)
    result = run_cli("up", env=env)
    assert result.returncode == 1
    line = _one_error_line(result.stderr)
    assert "Java not found" in line and "JDK 17" in line
    assert stack_pids(scratch_home) == []


def test_status_and_env_of_a_stopped_stack_exit_3(scratch_env: dict[str, str]) -> None:
    status = run_cli("status", env=scratch_env)
    assert status.returncode == 3
    assert "kafka" in status.stdout and "down" in status.stdout
    env = run_cli("env", env=scratch_env)
    assert env.returncode == 3
    assert env.stdout == ""
    _one_error_line(env.stderr)


def test_down_of_a_stopped_stack_is_harmless(scratch_env: dict[str, str]) -> None:
    result = run_cli("down", env=scratch_env)
    assert result.returncode == 0
    assert "nothing was running" in result.stderr


@pytest.mark.slow
def test_unreachable_maven_central_is_one_clear_error(tmp_path: Path) -> None:
    # A mirror on a closed local port stands in for "Maven Central unreachable";
    # the empty local repository forces Maven to go to the network.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    settings = tmp_path / "settings.xml"
    settings.write_text(
        "<settings><mirrors><mirror><id>dead</id><mirrorOf>*</mirrorOf>"
        f"<url>http://127.0.0.1:{dead_port}/maven2</url></mirror></mirrors></settings>"
    )
    paths = Paths(home=tmp_path / "home", cache=tmp_path / "cache",
                  maven_repo=tmp_path / "m2", maven_settings=settings)
    paths.ensure()
    with pytest.raises(DevstackError) as info:
        resolve_classpath("kafka", paths, find_java())
    assert "cannot reach Maven Central" in info.value.cause
    assert "repo.maven.apache.org" in info.value.fix
    assert "\n" not in str(info.value)


def test_cached_classpath_needs_no_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever cache the shared stack filled: with mvn off PATH it must still resolve.
    paths = Paths.resolve(environ={})
    java = find_java()
    # ./dev test starts the stack before pytest, so the cache is filled: a missing one is a
    # failure of the set-up, not a reason to skip.
    assert any(paths.cache.glob("kafka-*.classpath")), \
        "jar cache not filled (run `python -m sparkbarrier.devstack up`)"
    monkeypatch.setenv("PATH", str(tmp_path))
    classpath = resolve_classpath("kafka", paths, java)
    assert any(jar.name.startswith("kafka_2.13-4.") for jar in classpath.jars)


def test_kerberos_env_without_a_kdc_says_how_to_start_it(scratch_env: dict[str, str]) -> None:
    result = run_cli("kerberos", "env", env=scratch_env)
    assert result.returncode == 3 and result.stdout == ""
    assert "fix: python -m sparkbarrier.devstack kerberos up" in result.stderr
