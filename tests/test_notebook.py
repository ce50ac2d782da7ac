"""The quickstart notebook runs top to bottom on the real servers (so it never rots)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.timeout(420)]

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_executes(kafka_bootstrap, hbase_thrift, monkeypatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The kernel inherits these: same servers as the rest of the suite, no GUI backend.
    monkeypatch.setenv("SPARKBARRIER_KAFKA_BOOTSTRAP", kafka_bootstrap)
    monkeypatch.setenv("SPARKBARRIER_HBASE_THRIFT", f"{hbase_thrift[0]}:{hbase_thrift[1]}")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook with outputs cleared"
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    texts = [o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any("exactly as produced" in t for t in texts)
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert images, "the plots were not drawn"
    assert os.path.exists(NOTEBOOK)
