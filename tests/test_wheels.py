"""The product wheel holds no test machinery; the sparkbarrier-devstack wheel holds all of it.

Issue 27: the local servers (``sparkbarrier.devstack``), the fault firing and the jar
finder for Spark's own Kafka source are dev and test code, so they live in a second
distribution (``devstack/pyproject.toml``) and the product keeps only the fault-point
hook ``_faults.py``. Both wheels are built from the checkout with the venv's setuptools
(no build isolation: offline, a few seconds each) and installed side by side, and the
product alone, into throwaway directories.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import sparkbarrier

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Functions of the test machinery: none may be defined anywhere in the product wheel.
DEV_FUNCTIONS = {"fire", "armed", "fired", "find_jvm_ancestor", "jvm_kafka_jars"}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"product": ..., "devstack": ...}``: the two wheels built from the checkout's files.

    Built from a copy of the files git tracks or would track (edits included), not from the
    checkout itself: setuptools packs whatever its ``build/lib`` holds, so files left there by
    an earlier build (a module since moved to the devstack) would reach the wheel.
    """
    out = tmp_path_factory.mktemp("wheels")
    source = tmp_path_factory.mktemp("source")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    for project in (source, source / "devstack"):
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(out), str(project)], check=True, capture_output=True, timeout=240)
    built = {path.name.split("-")[0]: path for path in out.glob("*.whl")}
    return {"product": built["sparkbarrier"], "devstack": built["sparkbarrier_devstack"]}


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as whl:
        return whl.namelist()


def _defined_functions(wheel: Path) -> dict[str, set[str]]:
    """Python file in the wheel -> the names of the functions it defines (at any depth)."""
    with zipfile.ZipFile(wheel) as whl:
        return {name: {node.name for node in ast.walk(ast.parse(whl.read(name), name))
                       if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
                for name in whl.namelist() if name.endswith(".py")}


def test_the_product_wheel_ships_no_test_machinery(wheels: dict[str, Path]) -> None:
    names = _names(wheels["product"])
    assert "sparkbarrier/_faults.py" in names and "sparkbarrier/connectors/kafka/planner/_planner.py" in names
    assert "sparkbarrier/setup.py" not in names  # the build script is not a module of the package
    assert [n for n in names if n.startswith("sparkbarrier/devstack/") or "jvm_kafka" in n
            or n.startswith("sparkbarrier/tests/")] == []
    functions = _defined_functions(wheels["product"])
    assert {name: sorted(defs & DEV_FUNCTIONS) for name, defs in functions.items() if defs & DEV_FUNCTIONS} == {}
    assert functions["sparkbarrier/_faults.py"] == {"fault_point"}  # only the hook


def test_the_devstack_wheel_holds_the_machinery_and_needs_this_product(wheels: dict[str, Path]) -> None:
    names = _names(wheels["devstack"])
    assert {"sparkbarrier/devstack/__init__.py", "sparkbarrier/devstack/__main__.py",
            "sparkbarrier/devstack/faults.py", "sparkbarrier/devstack/jvm_kafka.py",
            "sparkbarrier/devstack/conf/log4j2.properties", "sparkbarrier/devstack/poms/kafka/pom.xml",
            "sparkbarrier/devstack/poms/hbase/pom.xml"} <= set(names)
    # it adds a subpackage and nothing else: no second sparkbarrier/__init__.py to clash
    assert [n for n in names if not n.startswith(("sparkbarrier/devstack/", "sparkbarrier_devstack-"))] == []
    functions = _defined_functions(wheels["devstack"])
    assert {"fire", "armed", "fired", "find_jvm_ancestor"} <= functions["sparkbarrier/devstack/faults.py"]
    assert "jvm_kafka_jars" in functions["sparkbarrier/devstack/jvm_kafka.py"]
    with zipfile.ZipFile(wheels["devstack"]) as whl:
        metadata = whl.read("sparkbarrier_devstack-0.1.0.dist-info/METADATA").decode()
    assert re.findall(r"^Requires-Dist: (.*)$", metadata, re.M) == [f"sparkbarrier=={sparkbarrier.__version__}"]


def _run(target: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a Python that sees only the stdlib and ``target``: ``-S`` leaves out the
    venv's site-packages, whose editable installs the product's ``extend_path`` would add."""
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=target.parent, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(target), **env})


def test_installed_side_by_side_the_devstack_cli_and_the_faults_work(wheels: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheels["product"]), str(wheels["devstack"])], check=True, capture_output=True, timeout=120)
    cli = _run(target, "import runpy; runpy.run_module('sparkbarrier.devstack', run_name='__main__')")
    # no arguments: argparse's usage line and exit 2 show the CLI loaded from the target
    assert "usage: python -m sparkbarrier.devstack" in cli.stderr, cli.stderr
    fired = _run(target, "import sparkbarrier.devstack as d; print(d.__file__); "
                         "from sparkbarrier._faults import fault_point; fault_point('p', fail=RuntimeError)",
                 SPARKBARRIER_FAULT="p")
    assert fired.stdout.startswith(str(target)), fired
    assert "RuntimeError: fault injected at 'p' (SPARKBARRIER_FAULT)" in fired.stderr, fired.stderr


def test_the_product_alone_refuses_an_armed_fault(wheels: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheels["product"])], check=True, capture_output=True, timeout=120)
    code = "from sparkbarrier._faults import fault_point; fault_point('sink.before_flush'); print('ok')"
    assert _run(target, code, SPARKBARRIER_FAULT="").stdout == "ok\n"  # unarmed: nothing to import
    armed = _run(target, code, SPARKBARRIER_FAULT="sink.before_flush")
    assert armed.returncode == 1 and "ConfigError: SPARKBARRIER_FAULT is set" in armed.stderr, armed.stderr
    assert "sparkbarrier-devstack distribution" in armed.stderr
