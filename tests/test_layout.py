"""The repository layout cannot shadow the installed package (a regular, non-editable install)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
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
    # With the confluent-kafka wheel beside it, as on a cluster node: the compiled module
    # finds the wheel's librdkafka by its rpath, before anything imported confluent_kafka.
    # The test machinery (devstack/) is a second distribution, installed beside it as ./dev does.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(ROOT),
                    str(ROOT / "devstack"), f"confluent-kafka=={version('confluent-kafka')}"],
                   check=True, timeout=300, capture_output=True)
    code = ("import sys, sparkbarrier.connectors.kafka.reader._rdkafka_arrow_c as n; "
            "assert 'confluent_kafka' not in sys.modules and n.librdkafka_version_int >= 0x020601ff; "
            "import pkgutil, sparkbarrier, sparkbarrier.devstack, sparkbarrier.connectors.kafka.planner._planner, "
            "pyspark_barrier_kafka, pyspark_barrier_hbase; "
            "print(sparkbarrier.__file__); print(sparkbarrier.devstack.__file__); "
            "print(sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_barrier')))")
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True,
                         text=True, timeout=120).stdout.splitlines()
    assert out[0].startswith(str(target)), out  # the installed copy, not a folder of the checkout
    assert out[1].startswith(str(target)), out  # ... and its devstack, not the editable one
    assert out[2] == "['pyspark_barrier_hbase', 'pyspark_barrier_kafka']"  # what Spark's discovery lists
    cli = subprocess.run([sys.executable, "-m", "sparkbarrier.devstack", "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr


def test_an_install_that_cannot_compile_still_works_and_reads_with_confluent(tmp_path: Path) -> None:
    """The compiled reader is optional: no C toolchain (CC=false) -> install succeeds, the
    default client falls back, and asking for ``native`` fails at query start with the fix."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.so", "__pycache__", "*.egg-info", ".pytest_cache",
        ".hypothesis", "spark-warehouse", "metastore_db"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(src)],
                   check=True, timeout=300, capture_output=True, env=dict(os.environ, CC="false"))
    assert not list(target.rglob("_rdkafka_arrow*.so"))
    code = ("from sparkbarrier.connectors.kafka import parse_source_options as p; "
            "from sparkbarrier.connectors.kafka.reader._native_reader import available; "
            "print(available()); "
            "base = {'kafka.bootstrap.servers': 'h:9092', 'subscribe': 't', 'commitOffsets': 'false'}; "
            "print(p(base).consumer_client.value); "
            "p({**base, 'kafkaConsumer.client': 'native'})")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(target)),
                         capture_output=True, text=True, timeout=120)
    out = run.stdout.splitlines()
    assert out[0].startswith("the compiled module is not built"), run
    assert out[1] == "auto"
    assert "ConfigError: option 'kafkaConsumer.client' is native, but the compiled module" in run.stderr
    assert "apt-get install librdkafka-dev" in run.stderr
