"""The README stays true where it can be checked mechanically."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_option_tables_match_the_option_specs() -> None:
    from sparkbarrier.connectors.hbase import hbase_options_table, hbase_read_options_table
    from sparkbarrier.connectors.kafka import kafka_options_table

    assert kafka_options_table() in README, "regenerate the barrier-kafka options table"
    assert hbase_options_table() in README, "regenerate the barrier-hbase options table"
    assert hbase_read_options_table() in README, "regenerate the barrier-hbase reader options table"
    from sparkbarrier.connectors.checkpointed._source import checkpointed_options_table

    assert checkpointed_options_table() in README, "regenerate the checkpointed-sink options table"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert "./dev test     # set up" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "exec ./dev test\n" in ci
