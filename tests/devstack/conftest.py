"""Fixtures for devstack tests: throw-away stack homes.

Throw-away stacks get their own ``SPARKBARRIER_DEVSTACK_HOME`` under ``tmp_path`` but
share the default jar cache (``SPARKBARRIER_DEVSTACK_CACHE`` unset), so they never
call Maven once the shared stack has run. They never touch the shared stack.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack_helpers import stack_pids

from sparkbarrier.devstack import ENV_HOME, Devstack


@pytest.fixture
def scratch_home(tmp_path: Path) -> Iterator[Path]:
    """A separate stack home; whatever a test starts there is stopped afterwards."""
    home = tmp_path / "devstack-home"
    yield home
    Devstack(home).down()
    assert stack_pids(home) == []


@pytest.fixture
def scratch_env(scratch_home: Path) -> dict[str, str]:
    """Environment for the CLI pointing at ``scratch_home`` (ports unset)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKBARRIER_DEVSTACK_")}
    env[ENV_HOME] = str(scratch_home)
    return env
