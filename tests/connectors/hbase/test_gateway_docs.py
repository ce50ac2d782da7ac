"""docs/hbase-gateways.md carries the gateway option table generated from the specs."""

from __future__ import annotations

from pathlib import Path

from sparkbarrier.connectors._options import options_table
from sparkbarrier.connectors.hbase.client._options import GATEWAY_OPTION_SPECS

PAGE = Path(__file__).resolve().parents[2].parent / "docs" / "hbase-gateways.md"


def test_gateway_page_has_the_generated_option_table() -> None:
    assert options_table(GATEWAY_OPTION_SPECS) in PAGE.read_text(), "regenerate the table in docs/hbase-gateways.md"


def test_readme_points_to_the_gateway_page() -> None:
    assert "docs/hbase-gateways.md" in (PAGE.parent.parent / "README.md").read_text()
