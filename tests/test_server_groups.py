"""The suite's own scheduling data (``server_groups``) names files that exist."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import server_groups

ROOT = Path(__file__).resolve().parents[1]


def test_every_measured_file_exists() -> None:
    missing = [f for f in server_groups._MEASURED_S if not (ROOT / f).is_file()]
    assert not missing, f"renamed or removed: update server_groups._MEASURED_S: {missing}"


def test_xdist_keeps_the_chosen_group_order() -> None:
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    server_groups.configure_xdist(config)  # type: ignore[arg-type]
    assert config.option.loadscopereorder is False
