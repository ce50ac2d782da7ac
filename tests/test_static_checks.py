"""The product code passes the linter and the type checker (ruff and mypy, configured in
pyproject.toml).

Product code = what the product wheel ships: ``barrier/``, ``state/``, ``connectors/``,
``shims/`` and the top-level modules. The test machinery (the ``sparkbarrier-devstack``
distribution, ``devstack/``) is linted and type-checked too; only the rule against
``assert`` is the product's alone. Run by ``./dev unit`` and ``./dev test`` alike
(no server).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ["barrier", "state", "connectors", "shims", "__init__.py", "__main__.py",
           "_endpoints.py", "_exceptions.py", "_faults.py", "_lazy.py"]
CHECKED = PRODUCT + ["devstack"]


def test_product_code_passes_ruff() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *CHECKED],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_assert_in_product_code() -> None:
    """``assert`` vanishes under ``python -O``: product code raises explicit errors."""
    import ast

    found = []
    for name in PRODUCT:
        path = ROOT / name
        for file in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            for node in ast.walk(ast.parse(file.read_text(), str(file))):
                if isinstance(node, ast.Assert):
                    found.append(f"{file.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_product_code_passes_mypy(tmp_path: Path) -> None:
    """mypy needs the package under its own name: the repository root *is* ``sparkbarrier``,
    so it runs from a directory holding a ``sparkbarrier`` link to the root. The shims are
    top-level modules (``pyspark_barrier_kafka``): found through MYPYPATH."""
    (tmp_path / "sparkbarrier").symlink_to(ROOT, target_is_directory=True)
    targets = ["-p", "sparkbarrier.barrier", "-p", "sparkbarrier.state", "-p", "sparkbarrier.connectors",
               "-p", "sparkbarrier.devstack",
               *(arg for name in PRODUCT if name.endswith(".py")
                 for arg in ("-m", "sparkbarrier" if name == "__init__.py"
                             else "sparkbarrier." + name[:-3].replace("/", "."))),
               *(arg for shim in sorted((ROOT / "shims").glob("*.py")) for arg in ("-m", shim.stem))]
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(ROOT / ".mypy_cache"), *targets],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MYPYPATH": str(ROOT / "shims")})
    assert done.returncode == 0, done.stdout + done.stderr

