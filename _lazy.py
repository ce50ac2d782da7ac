"""A package's names imported on first use (PEP 562's module ``__getattr__``).

Why: two packages re-export names whose modules are heavy. ``import sparkbarrier`` (which
the pure protocol core triggers) must not import pyspark or the clients that the status
readers need, and the devstack's ``faults`` module must load in a Spark worker without the
servers' code. One implementation serves both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: MutableMapping[str, object],
                 where: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: name -> the module (relative to the
    package) that defines it, imported at the first use and then kept in ``namespace``."""

    def get(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted(set(namespace) | set(where))

    return get, names
