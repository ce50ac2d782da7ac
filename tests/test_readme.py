"""The README and the manual in docs/ stay true where it can be checked mechanically.

The option tables in ``docs/`` are generated from the option specs: run
``python tests/test_readme.py`` to rewrite them after changing a spec.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_TABLE = re.compile(r"(<!-- generated table: ([\w-]+) [^>]*-->\n)(.*?)(<!-- end of generated table -->)", re.DOTALL)


def _generators() -> dict[str, Callable[[], str]]:
    from sparkbarrier.connectors.checkpointed._source import checkpointed_options_table
    from sparkbarrier.connectors.hbase import (
        hbase_kerberos_options_table,
        hbase_options_table,
        hbase_read_options_table,
    )
    from sparkbarrier.connectors._options import options_table
    from sparkbarrier.connectors.hbase.batch._options import BATCH_WRITE_OPTION_SPECS
    from sparkbarrier.connectors.hbase.client._options import GATEWAY_OPTION_SPECS
    from sparkbarrier.connectors.kafka import kafka_options_table

    return {"kafka": kafka_options_table, "hbase": hbase_options_table,
            "hbase-read": hbase_read_options_table, "hbase-kerberos": hbase_kerberos_options_table,
            "hbase-gateways": lambda: options_table(GATEWAY_OPTION_SPECS),
            "hbase-batch": lambda: options_table(BATCH_WRITE_OPTION_SPECS),
            "checkpointed": checkpointed_options_table}


def _regenerated(text: str) -> str:
    tables = _generators()
    return _TABLE.sub(lambda m: m[1] + tables[m[2]]().rstrip("\n") + "\n" + m[4], text)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_option_tables_match_the_option_specs() -> None:
    found = set()
    for page in _pages():
        text = page.read_text()
        found |= {m[2] for m in _TABLE.finditer(text)}
        assert _regenerated(text) == text, f"{page.name}: regenerate the option tables (python tests/test_readme.py)"
    assert found == set(_generators()), f"every option table is in the manual once: {sorted(found)}"


def test_relative_links_point_to_files_that_exist() -> None:
    for page in _pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_every_manual_page_is_reachable_from_the_readme() -> None:
    readme = README.read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in readme, f"README links no docs/{page.name}"


def test_readme_is_a_front_page() -> None:
    # Issue 21: what a newcomer needs in five minutes; the manual lives in docs/. Issue 59
    # made its example pasteable (imports, command-line options): 12,000 became 14,000.
    assert len(README.read_text().encode()) < 14_000


def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert "./dev test     # set up" in README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "exec ./dev test\n" in ci


if __name__ == "__main__":
    for page in _pages():
        text = page.read_text()
        if (new := _regenerated(text)) != text:
            page.write_text(new)
            print(f"rewrote the option tables of {page.relative_to(ROOT)}")
