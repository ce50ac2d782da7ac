"""The repository layout cannot shadow the installed package (a regular, non-editable install)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["barrier", "state", "connectors", "devstack"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_no_folder_named_like_the_package_sits_at_the_root() -> None:
    assert not (ROOT / "sparkbarrier").exists()
    assert all((ROOT / p / "__init__.py").exists() for p in PACKAGES)
    assert (ROOT / "__init__.py").exists()  # the root is the package: sparkbarrier.a.b == a/b.py


def test_regular_install_works_when_run_from_the_repository_root(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(ROOT)],
                   check=True, timeout=300, capture_output=True)
    code = ("import pkgutil, sparkbarrier, sparkbarrier.devstack, sparkbarrier.connectors.kafka._planner, "
            "pyspark_barrier_kafka, pyspark_barrier_hbase; "
            "print(sparkbarrier.__file__); "
            "print(sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_barrier')))")
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True,
                         text=True, timeout=120).stdout.splitlines()
    assert out[0].startswith(str(target)), out  # the installed copy, not a folder of the checkout
    assert out[1] == "['pyspark_barrier_hbase', 'pyspark_barrier_kafka']"  # what Spark's discovery lists
    cli = subprocess.run([sys.executable, "-m", "sparkbarrier.devstack", "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
