"""Fault points: the product's hook ``sparkbarrier._faults`` and the firing code behind it,
``sparkbarrier.devstack.faults`` (arming, hit counting, fail-instead-of-kill, killing the
JVM ancestor). The points are called through the hook, as library code calls them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sparkbarrier import ConfigError
from sparkbarrier import _faults
from sparkbarrier._faults import fault_point
from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV, armed, fired

pytestmark = pytest.mark.timeout(60)


class Boom(Exception):
    pass


def test_unarmed_point_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    fault_point("sink.before_flush", fail=Boom)


def test_armed_parses_comma_list_and_hit_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "a.b, sink.before_flush@3")
    assert armed("a.b") == 1
    assert armed("sink.before_flush") == 3
    assert armed("sink") is None
    monkeypatch.setenv(FAULT_ENV, "x@two")
    with pytest.raises(ConfigError):
        armed("x")


def test_nth_hit_fires_once_per_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(FAULT_ENV, "p@2")
    monkeypatch.setenv(FAULT_STATE_DIR_ENV, str(tmp_path))
    fault_point("p", fail=Boom)
    assert not fired("p", tmp_path)
    with pytest.raises(Boom, match="fault injected at 'p'"):
        fault_point("p", fail=Boom)
    assert fired("p", tmp_path)
    fault_point("p", fail=Boom)  # fired already: never again


def test_hit_number_without_state_dir_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "p@2")
    monkeypatch.delenv(FAULT_STATE_DIR_ENV, raising=False)
    with pytest.raises(ConfigError, match=FAULT_STATE_DIR_ENV):
        fault_point("p")


def test_kill_takes_down_the_java_ancestor_and_the_caller(tmp_path: Path) -> None:
    # A stand-in "driver JVM": a process whose argv[0] is java, parent of the worker.
    worker = textwrap.dedent("""
        import os, sys
        from sparkbarrier._faults import fault_point
        os.environ["SPARKBARRIER_FAULT"] = "driver.dies"
        fault_point("driver.dies")
        sys.exit(3)  # not reached
    """)
    jvm = textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.run([{sys.executable!r}, "-c", {worker!r}])
        time.sleep(30)  # only reached if the fault did not kill us
    """)
    java = tmp_path / "java"
    java.symlink_to(os.path.realpath(sys.executable))
    proc = subprocess.Popen([str(java), "-c", jvm], start_new_session=True)
    try:
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _fault_point_calls() -> list[tuple[str, str]]:
    """(point name, file) for every ``fault_point("...")`` call with a literal name in the package."""
    import ast

    root = Path(__file__).resolve().parents[1]
    calls = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if {"tests", ".venv", "build"} & set(rel.parts) or rel.name == "_faults.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "fault_point" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                calls.append((node.args[0].value, str(rel)))
    return calls


def test_each_fault_point_has_one_owner() -> None:
    # A point placed in two layers of one path (the adapter and the sink it runs) fires
    # twice per step, and ``@N`` then counts both.
    calls = _fault_point_calls()
    names = [name for name, _ in calls]
    assert {"sink.before_flush", "sink.after_flush_before_commit", "sink.after_commit_before_commitlog"} <= set(names)
    assert [c for c in calls if names.count(c[0]) > 1] == []


def test_hook_and_firing_code_read_the_same_variable() -> None:
    # One constant: the firing code imports the hook's (the hook imports nothing of it).
    assert _faults.FAULT_ENV is FAULT_ENV and FAULT_ENV == "SPARKBARRIER_FAULT"


def test_the_devstack_registers_its_firing_code_for_the_hook() -> None:
    from importlib.metadata import entry_points

    from sparkbarrier.devstack.faults import fire

    assert [ep.load() for ep in entry_points(group=_faults.FIRING_GROUP)] == [fire]


def test_unarmed_hook_does_not_load_the_firing_code() -> None:
    # The product's cost of a point: one environment lookup, no import of the dev distribution.
    code = ("import os, sys; os.environ.pop('SPARKBARRIER_FAULT', None); "
            "from sparkbarrier._faults import fault_point; fault_point('sink.before_flush'); "
            "print('sparkbarrier.devstack' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_armed_fault_without_the_devstack_distribution_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A group nobody registers stands for a product installed without sparkbarrier-devstack
    # (tests/test_wheels.py checks the same against the real product wheel).
    monkeypatch.setattr(_faults, "FIRING_GROUP", "sparkbarrier.no_such_group")
    monkeypatch.setenv(FAULT_ENV, "some.other.point")
    with pytest.raises(ConfigError, match="sparkbarrier-devstack distribution") as err:
        fault_point("sink.before_flush", fail=Boom)
    assert err.value.option == FAULT_ENV
