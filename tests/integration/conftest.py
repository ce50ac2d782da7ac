"""Fixtures of the integration tests (the shared servers come from tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_groups import stop_when_unused as _stop_when_unused


@pytest.fixture(scope="session")
def private_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    """A throw-away Kafka + HBase (own home, free ports): the only stack we kill or restart servers of.

    Session-scoped so the fault tests and the gateway-failover test share one start-up;
    stopped right after the last test that uses it (``tests/conftest.py``).
    """
    from sparkbarrier.devstack import ENV_HOME, Devstack

    home = tmp_path_factory.mktemp("fault-devstack")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKBARRIER_DEVSTACK_")}
    env[ENV_HOME] = str(home)
    stack = Devstack(home, environ=env)
    stop_once = _stop_when_unused("private_stack", stack.down)
    try:
        yield home, stack.up()
    finally:
        stop_once()
