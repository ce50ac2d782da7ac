"""No import circles in the package (house style 18), read from the source with ``ast``.

Every ``import`` counts, lazy ones inside functions too: a lazy import hides a circle
from the interpreter, not from the reader, and the next refactoring that hoists it
fails at import time. So do the imports Python makes implicitly: importing ``a.b.c``
runs ``a/b/__init__.py`` first, so an import from outside package ``a.b`` also depends
on that package's ``__init__`` (the edge that hid ``connectors/storage/_checkpoint_log.py`` →
``connectors/kafka`` → back, until the offset format moved a floor down). Modules are the ``.py`` files under the repository root (the
root is the ``sparkbarrier`` package), tests excluded. Folders without an
``__init__.py`` (``benchmarks/``, ``demo/``, ``examples/...``) are script folders: a
bare ``import x`` there means the sibling ``x.py``, as when the script runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "sparkbarrier"
SKIP = {"tests", ".venv", "build", ".git", ".hypothesis", ".pytest_cache"}

KNOWN_CIRCLES: list[set[str]] = []


def _modules() -> dict[str, Path]:
    """Dotted name → file; package modules as ``sparkbarrier.a.b``, script-folder modules as ``<dir>:name``."""
    out: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if SKIP & set(rel.parts):
            continue
        if all((ROOT.joinpath(*rel.parts[:i]) / "__init__.py").exists() for i in range(1, len(rel.parts))):
            parts = [PACKAGE, *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
        else:
            out[f"{rel.parent}:{rel.stem}"] = path
    return out


def _target(name: str, modules: dict[str, Path], script_dir: str | None) -> str | None:
    """The module an absolute import name refers to, if it is one of ours."""
    if script_dir is not None and f"{script_dir}:{name.split('.')[0]}" in modules:
        return f"{script_dir}:{name.split('.')[0]}"
    return name if name in modules else None


def _edges(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    script_dir = module.split(":")[0] if ":" in module else None
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(_target(alias.name, modules, script_dir) or "")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            for alias in node.names:  # ``from pkg import mod`` imports the module pkg.mod
                found.add(_target(f"{src}.{alias.name}", modules, script_dir)
                          or _target(src, modules, script_dir) or "")
    found.discard("")
    found |= _implicit_packages(module, path, found, modules)
    found.discard(module)
    return found


def _implicit_packages(module: str, path: Path, targets: set[str],
                       modules: dict[str, Path]) -> set[str]:
    """The package ``__init__`` modules that importing ``targets`` runs first: every
    ancestor package of a target that is not an ancestor (or the package) of ``module``."""
    own = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    mine = {".".join(own[:i]) for i in range(1, len(own) + 1)}
    out = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts)):
            package = ".".join(parts[:i])
            if package in modules and package not in mine:
                out.add(package)
    return out


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _edges(m, p, modules) for m, p in modules.items()}


def test_the_graph_sees_the_package_and_lazy_imports() -> None:
    graph = import_graph()
    assert "sparkbarrier.barrier._sink" in graph["sparkbarrier.connectors.checkpointed._driver_commit"]
    assert "sparkbarrier.connectors.hbase.sink._writer" in graph["sparkbarrier.connectors.hbase.sink._sink_function"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_graph_sees_the_package_init_an_import_runs() -> None:
    """``from .kafka._x import y`` in ``connectors/`` runs ``connectors/kafka/__init__.py``."""
    graph = import_graph()
    assert "sparkbarrier.connectors.kafka" in graph["sparkbarrier.connectors.resume"]
    # inside its own package a module does not depend on the package's __init__
    assert "sparkbarrier.connectors.kafka" not in graph["sparkbarrier.connectors.kafka.planner._planner"]


def test_no_import_circles() -> None:
    graph = import_graph()
    circles = [c for c in _circles(graph) if c not in KNOWN_CIRCLES]
    described = ["; ".join(f"{m} -> {', '.join(sorted(graph[m] & c))}" for m in sorted(c)) for c in circles]
    assert described == [], "import circles (move what both need one floor down):\n" + "\n".join(described)


def test_the_product_never_imports_the_devstack_distribution() -> None:
    """``devstack/`` is the separate distribution sparkbarrier-devstack, absent from the
    product wheel: no product module imports it. The fault hook finds the firing code
    through an entry point the devstack registers, so the arrow runs from the devstack
    to the product (issue 59)."""
    graph = import_graph()
    dev = "sparkbarrier.devstack"
    product = [m for m in graph if m.startswith("sparkbarrier") and not (m == dev or m.startswith(dev + "."))]
    reaching = {m: sorted(t for t in graph[m] if t == dev or t.startswith(dev + ".")) for m in product}
    assert {m: t for m, t in reaching.items() if t} == {}
    # and the firing module stays light: a Spark worker that fires loads none of the servers' code
    assert graph["sparkbarrier.devstack.faults"] <= {"sparkbarrier._exceptions", "sparkbarrier._faults"}
    assert graph[dev] <= {"sparkbarrier._exceptions", "sparkbarrier._lazy"}  # _lazy: importlib only
