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


_PYTHON = re.compile(r"```python\n(.*?)```", re.DOTALL)
# Example files whose text a page shows and whose tests run them on the devstack, each as a
# fresh user's shell would (tests/examples/): the README's Kafka -> HBase example (the venv's
# Python by its path, no PYSPARK_PYTHON) and the checkpointed file sink.
_RUN_EXAMPLES = {"kafka_to_hbase.py": "tests/examples/test_kafka_to_hbase_example.py",
                 "files/file_sink.py": "tests/examples/test_file_sink.py"}


def _snippets() -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}:{page.read_text()[:m.start()].count(chr(10)) + 1}", m[1])
            for page in _pages() for m in _PYTHON.finditer(page.read_text())]


def test_every_python_snippet_runs_in_a_test_or_says_what_the_reader_must_define() -> None:
    # Issue 59: a snippet either runs as pasted (an example file a test runs, its text shown
    # verbatim) or its first line says plainly what the reader defines first ("# Needs: ...").
    examples = {name: (ROOT / "examples" / name).read_text() for name in _RUN_EXAMPLES}
    assert all((ROOT / test).exists() for test in _RUN_EXAMPLES.values())
    unmarked = []
    for where, code in _snippets():
        body = code.split("\n", 1)[1] if code.startswith("# Needs: ") else code
        if any(body in text for text in examples.values()):
            continue  # run by its example's test
        if not code.startswith("# Needs: "):
            unmarked.append(where)
            continue
        # What is shown parses: a fragment of chained options is checked inside parentheses.
        source = f"x = (x\n{body})" if body.lstrip().startswith(".") else body
        compile(source.replace("\n...\n", "\n"), where, "exec")
    assert unmarked == [], f"snippets that neither run in a test nor say what they need: {unmarked}"
    assert any(where.startswith("README.md") for where, _ in _snippets())


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
