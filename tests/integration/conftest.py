"""Fixtures of the integration tests (the shared servers come from tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from server_groups import stop_when_unused as _stop_when_unused

if TYPE_CHECKING:
    from sparkbarrier.devstack import Devstack


@pytest.fixture(scope="session")
def private_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    """A throw-away Kafka + HBase (own home, free ports): the only stack we kill or restart servers of.

    Session-scoped so the fault tests and the gateway-failover test share one start-up;
    stopped right after the last test that uses it (``tests/conftest.py``). Runs what
    ``devstack up`` starts; ``private_stack_every_gateway`` adds the on-demand gateways.
    """
    home = tmp_path_factory.mktemp("fault-devstack")
    stack = _devstack(home)
    stop_once = _stop_when_unused("private_stack", stack.down)
    try:
        yield home, stack.up()
    finally:
        stop_once()


@pytest.fixture
def private_stack_every_gateway(private_stack: tuple[Path, object]) -> tuple[Path, object]:
    """``private_stack`` with its second Thrift1 gateway and its TLS one running too
    (started beside its HBase the first time a test asks; ``up`` is idempotent)."""
    home, _ = private_stack
    return home, _devstack(home).up(all_gateways=True)


def _devstack(home: Path) -> Devstack:
    from sparkbarrier.devstack import ENV_HOME, Devstack

    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKBARRIER_DEVSTACK_")}
    env[ENV_HOME] = str(home)
    return Devstack(home, environ=env)
