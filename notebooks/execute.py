"""Execute ``quickstart.ipynb`` top to bottom and write it back with its outputs.

    eval "$(python -m sparkbarrier.devstack env)"   # or export the SPARKBARRIER_* variables
    python notebooks/execute.py                     # rewrites notebooks/quickstart.ipynb

The committed notebook carries its outputs (plots included) so a reader on a code host sees
them; ``tests/test_notebook.py`` executes it again on every run with the same functions, so
the committed outputs cannot drift far from what the code produces.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent / "quickstart.ipynb"

# Words that must never appear in a stream or error output of the notebook.
NOISE = ("ERROR", "Exception", "Traceback", "WARN")


def execute(path: Path = NOTEBOOK, timeout: int = 300):
    """Run the notebook in a fresh ``python3`` kernel; return the executed ``NotebookNode``.

    The kernel inherits this process's environment (``SPARKBARRIER_*`` endpoints).
    """
    import nbclient
    import nbformat

    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def strip_volatile(nb):
    """Drop what changes on every run without changing what a reader sees."""
    nb.metadata.pop("widgets", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    return nb


def noise(nb) -> list[str]:
    """Every stream/error output of a code cell that contains one of ``NOISE``."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                text = output.text
            elif output.output_type == "error":
                text = "\n".join([output.ename, output.evalue, *output.traceback])
            else:
                continue
            hits = [word for word in NOISE if word in text]
            if hits:
                found.append(f"cell {index} {output.output_type} {hits}: {text[:2000]}")
    return found


def main(argv: list[str] | None = None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=NOTEBOOK, help="where to write (default: in place)")
    args = parser.parse_args(argv)
    nb = strip_volatile(execute(NOTEBOOK))
    problems = noise(nb)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        if args.out.resolve() == NOTEBOOK:
            print("not written: the outputs contain noise", file=sys.stderr)
            return 1
    nbformat.write(nb, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
