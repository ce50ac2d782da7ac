"""What ``import sparkbarrier`` and ``sparkbarrier.register`` do for a driver (issue 59)."""

from __future__ import annotations

import os
import subprocess
import sys

import sparkbarrier

_SHOW = "import os, sparkbarrier; print(os.environ.get('PYSPARK_PYTHON'))"


def _import_with(path: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    out = subprocess.run([sys.executable, "-c", _SHOW], env={**clean, "PATH": path, **env},
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_a_venv_python_run_by_its_path_points_spark_at_itself() -> None:
    # Not activated: PATH's python3 is another interpreter, which lacks sparkbarrier.
    assert _import_with("/usr/local/bin:/usr/bin:/bin") == sys.executable


def test_an_activated_venv_and_a_set_pyspark_python_are_left_alone() -> None:
    here = os.path.dirname(sys.executable)
    assert os.path.exists(os.path.join(here, "python3"))
    assert _import_with(f"{here}:/usr/bin:/bin") == "None"  # Spark's python3 is this one
    assert _import_with("/usr/bin:/bin", PYSPARK_PYTHON="/opt/other/python") == "/opt/other/python"


class _Registry:
    def __init__(self) -> None:
        self.names: list[str] = []

    def register(self, source: type) -> None:
        self.names.append(source.name())


class _Session:
    def __init__(self) -> None:
        self.dataSource = _Registry()


def test_register_registers_each_format_once_per_session() -> None:
    # Spark warns at every registration that replaces one ("replaced a statically registered
    # data source"): checkpointed_sink calls register for every sink it registers.
    first, second = _Session(), _Session()
    for _ in range(3):
        sparkbarrier.register(first)  # type: ignore[arg-type]
    sparkbarrier.register(second)  # type: ignore[arg-type]
    assert first.dataSource.names == second.dataSource.names == ["barrier-kafka", "barrier-hbase"]
