"""The quickstart notebook: committed executed and quiet, and it still runs top to bottom.

A reader on a code host sees the committed outputs, so they must be there (plots included)
and free of Spark's log noise; the suite executes the notebook again on the real servers so
the code cannot rot and the committed outputs keep the shape of what the code produces
(``python notebooks/execute.py`` regenerates them).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK = NOTEBOOKS / "quickstart.ipynb"
REGENERATE = "regenerate it: python notebooks/execute.py (with the SPARKBARRIER_* endpoints set)"


def _helper():
    spec = importlib.util.spec_from_file_location("quickstart_execute", NOTEBOOKS / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def _texts(nb) -> list[str]:
    return [o.get("text", "") for c in _code(nb) for o in c.get("outputs", [])]


def _images(nb) -> list:
    return [o for c in _code(nb) for o in c.get("outputs", []) if "image/png" in o.get("data", {})]


def _shape(cell) -> set[tuple[str, ...]]:
    """What kinds of output a cell shows (stream names, MIME types), not their values."""
    kinds = set()
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            kinds.add(("stream", o.name))
        else:
            kinds.add((o.output_type, *sorted(o.get("data", {}))))
    return kinds


def test_committed_notebook_is_executed_and_quiet() -> None:
    import nbformat  # the test extra installs it: missing is a failure, not a skip
    helper = _helper()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = _code(nb)
    assert any(c.get("outputs") for c in code), \
        f"commit the notebook executed, with its outputs; {REGENERATE}"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
        f"the committed outputs are not from one top-to-bottom run; {REGENERATE}"
    assert any("exactly as produced" in t for t in _texts(nb)), REGENERATE
    images = _images(nb)
    assert len(images) == 1, f"expected the one figure, found {len(images)}; {REGENERATE}"
    assert not helper.noise(nb), "\n".join(helper.noise(nb))
    assert all("execution" not in c.metadata for c in code), \
        "volatile metadata committed (execute.py strips it)"


@pytest.mark.kafka
@pytest.mark.hbase
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_quickstart_notebook_executes(servers, monkeypatch) -> None:
    import nbformat  # the test extra installs it: missing is a failure, not a skip
    import nbclient  # noqa: F401 -- the test extra installs it
    helper = _helper()
    # The kernel inherits these: same servers as the rest of the suite, no GUI backend.
    monkeypatch.setenv("SPARKBARRIER_KAFKA_BOOTSTRAP", servers.kafka_bootstrap)
    monkeypatch.setenv("SPARKBARRIER_HBASE_THRIFT", "%s:%d" % servers.hbase_thrift)
    if servers.hbase_thrift2 is not None:
        monkeypatch.setenv("SPARKBARRIER_HBASE_THRIFT2", "%s:%d" % servers.hbase_thrift2)
    else:
        monkeypatch.delenv("SPARKBARRIER_HBASE_THRIFT2", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    committed = nbformat.read(NOTEBOOK, as_version=4)
    fresh = helper.execute(NOTEBOOK)

    assert [c.source for c in _code(fresh)] == [c.source for c in _code(committed)], \
        "the executed sources differ from the committed ones"
    assert any("exactly as produced" in t for t in _texts(fresh))
    assert _images(fresh), "the plots were not drawn"
    noise = helper.noise(fresh)
    assert not noise, "Spark's log reached the notebook's outputs:\n" + "\n".join(noise)
    # Fresh enough: every cell shows the same kinds of output as the committed run.
    stale = [i for i, (old, new) in enumerate(zip(_code(committed), _code(fresh)))
             if _shape(old) != _shape(new)]
    assert not stale, f"code cells {stale} now show different outputs than committed; {REGENERATE}"
