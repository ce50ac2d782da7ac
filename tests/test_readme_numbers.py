"""Every measured number the README and docs/performance.md quote is one that benchmarks/RESULTS.md records.

The README is the front page and quotes a headline or two (the suite's time, the sink's
and the commit listener's cost); docs/performance.md quotes the rest, section by section;
RESULTS.md holds the dated runs. A number edited on one side only is how the two came to
disagree (issue 27), so each number with a unit that the README's "The two commands"
section (the suite's time), its "Which source should I use?" section and its "Measured"
section quote must appear in RESULTS.md with the same unit: ``0.62–0.81×`` needs ``0.62×``
and ``0.81×`` there (alone or as the ends of a range), ``3.6 ms`` needs ``3.6 ms``. A rounded quote (``1.04×`` for
RESULTS' ``1.039×``) fails: quote what was recorded. docs/performance.md is held closer:
each of its sections links the RESULTS sections it quotes, and every number with a unit in
it must be in one of those (issue 51). No server needed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("The two commands", "Which source should I use?", "Measured")
# A value or a range of two ("0.62–0.81"), then its unit. Not a unit: "3-broker", "24 rounds".
_MEASURED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?[–-]\s?(\d+(?:\.\d+)?))?\s?(×|%|ms|µs|min|s)(?![A-Za-z])")


def sections(readme: str, names: tuple[str, ...] = SECTIONS) -> str:
    """The text of the README's ``## <name>`` sections, each up to the next ``## `` heading."""
    parts = []
    for name in names:
        start = readme.find(f"\n## {name}\n")
        assert start >= 0, f"README has no section '## {name}'"
        end = readme.find("\n## ", start + 1)
        parts.append(readme[start:] if end < 0 else readme[start:end])
    return "\n".join(parts)


def measured(text: str) -> list[tuple[str, str, str]]:
    """(number, unit, where) for every number with a unit; both ends of a range count."""
    found = []
    for m in _MEASURED.finditer(text):
        where = " ".join(text[max(0, m.start() - 40):m.end() + 10].split())
        found += [(n, m[3], where) for n in m.group(1, 2) if n is not None]
    return found


def test_the_pattern_finds_values_ranges_and_units() -> None:
    text = "0.62–0.81× at 3.6 ms, ≤ 2 % of a 3-broker cluster over 24 rounds, 0.8–1.1 µs/record, 0.2 s batches"
    assert [(n, u) for n, u, _ in measured(text)] == [
        ("0.62", "×"), ("0.81", "×"), ("3.6", "ms"), ("2", "%"), ("0.8", "µs"), ("1.1", "µs"), ("0.2", "s")]


def test_sections_end_at_the_next_heading() -> None:
    readme = ("# t\n\n## The two commands\n24.7 min\n\n## Which source should I use?\n1.5×\n\n## Other\n9×\n\n"
              "## Measured\n2.5 ms\n")
    assert [n for n, _, _ in measured(sections(readme))] == ["24.7", "1.5", "2.5"]


def test_every_number_the_readme_quotes_is_in_results() -> None:
    readme = (ROOT / "README.md").read_text()
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    quoted = measured(sections(readme))
    assert len(quoted) >= 4, f"the pattern found too few numbers in the README: {quoted}"
    recorded = {(n, u) for n, u, _ in measured(results)}
    missing = [f"{n}{u} (in: ...{where}...)" for n, u, where in quoted if (n, u) not in recorded]
    assert not missing, ("README quotes numbers that benchmarks/RESULTS.md does not record with that unit "
                         "(quote RESULTS.md as it stands, or append a dated run there):\n  " + "\n  ".join(missing))


# -- every benchmark figure in README.md and docs/*.md (issue 43) -------------------------
# A ratio (``1.23×``, ``0.62–0.81×``) anywhere, and a percent in a clause that carries a
# date, is a benchmark figure: benchmarks/RESULTS.md must hold it with its unit, and when its
# clause names a date (``(2026-11-26)``), in a section of that date. So a figure re-measured
# in RESULTS cannot be quoted with a number or a date RESULTS does not hold; the way to
# quote less is to link RESULTS instead.
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# A ratio's × follows its number ("1.2×"); "8 × id" is arithmetic, not a figure.
_RATIO_OR_PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?[–-]\s?(\d+(?:\.\d+)?))?(×|\s?%)(?![A-Za-z])")
# Clauses end at ';', at a sentence's '. ' and at a table cell's '|' (not at a decimal point).
_CLAUSE_END = re.compile(r";|\.\s|\|")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def results_sections(results: str) -> list[tuple[set[str], str]]:
    """(dates in the heading, text) of each ``## `` section of RESULTS.md."""
    parts = re.split(r"\n(?=## )", results)
    return [(set(_DATE.findall(p.split("\n", 1)[0])), p) for p in parts]


def quoted_figures(text: str) -> list[tuple[str, str, str | None, str]]:
    """(number, unit, date or None, where) for each ratio, and each percent with a date.

    The date is the one nearest the figure in its clause; paragraphs and table rows are
    separate texts (a date never reaches across a blank line or a row).
    """
    found = []
    for block in re.split(r"\n\s*\n|\n(?=\|)", text):
        starts = [0, *(m.end() for m in _CLAUSE_END.finditer(block)), len(block)]
        for begin, end in zip(starts, starts[1:], strict=False):
            clause = block[begin:end]
            dates = [(m.start(), m.group()) for m in _DATE.finditer(clause)]
            for m in _RATIO_OR_PERCENT.finditer(clause):
                date = min(dates, key=lambda d: abs(d[0] - m.start()))[1] if dates else None
                unit = m[3].strip()
                if unit == "%" and date is None:
                    continue
                where = " ".join(clause[max(0, m.start() - 40):m.end() + 10].split())
                found += [(n, unit, date, where) for n in m.group(1, 2) if n is not None]
    return found


def test_figures_take_the_date_of_their_clause() -> None:
    text = ("On 2026-11-22 it cost 0.97–1.11×; on 2026-11-26, 0.97× that. | 1.2× (2026-11-23) | 3 % |\n\n"
            "Over 24 rounds (2026-11-23), ±3.4 % and 2×, not base + 8 × id. Within 10 % of it.")
    assert [(n, u, d) for n, u, d, _ in quoted_figures(text)] == [
        ("0.97", "×", "2026-11-22"), ("1.11", "×", "2026-11-22"), ("0.97", "×", "2026-11-26"),
        ("1.2", "×", "2026-11-23"), ("3.4", "%", "2026-11-23"), ("2", "×", "2026-11-23")]


def test_every_benchmark_figure_in_the_readme_and_docs_is_in_results_under_its_date() -> None:
    sections = results_sections((ROOT / "benchmarks" / "RESULTS.md").read_text())
    anywhere = {(n, u) for _, body in sections for n, u, _ in measured(body)}
    missing = []
    for page in _pages():
        for n, u, date, where in quoted_figures(page.read_text()):
            if date is None:
                ok = (n, u) in anywhere
            else:
                ok = any(date in dates and (n, u) in {(a, b) for a, b, _ in measured(body)}
                         for dates, body in sections)
            if not ok:
                missing.append(f"{page.relative_to(ROOT)}: {n}{u}" + (f" of {date}" if date else "")
                               + f" (in: ...{where}...)")
    assert not missing, ("README/docs quote benchmark figures that benchmarks/RESULTS.md does not hold (under "
                         "that date): quote RESULTS as it stands, or link it instead:\n  " + "\n  ".join(missing))


# -- docs/performance.md: each section quotes the RESULTS sections it links (issue 51) ----
# The page that took the README's ratios. Any number with a unit counts here (not only
# ratios and dated percents), and it must be in a RESULTS section that its own section
# links, so a figure cannot drift to another run's, nor keep a link to a run it no longer
# quotes. Links into RESULTS from any page must name a heading RESULTS has.
PERFORMANCE = ROOT / "docs" / "performance.md"
_RESULTS_ANCHOR = re.compile(r"RESULTS\.md#([^)\s]+)\)")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def results_by_anchor(results: str) -> dict[str, str]:
    """RESULTS.md's ``## `` sections by anchor; the title's (``# ``) is the header before the first."""
    return {github_anchor(part.split("\n", 1)[0].lstrip("#")): part for part in re.split(r"\n(?=## )", results)}


def test_anchors_are_githubs() -> None:
    assert github_anchor("`commit_kafka_offsets` overhead, 24 rounds — 2026-11-23 (fourth run)") == (
        "commit_kafka_offsets-overhead-24-rounds--2026-11-23-fourth-run")
    assert github_anchor("barrier-hbase's path, 2 cores / 24 GiB (load 5–13)") == (
        "barrier-hbases-path-2-cores--24-gib-load-513")
    assert list(results_by_anchor("# Benchmark results\nhead\n## A — 1\nx\n## B\ny\n")) == [
        "benchmark-results", "a--1", "b"]


def test_links_into_results_name_its_headings() -> None:
    anchors = results_by_anchor((ROOT / "benchmarks" / "RESULTS.md").read_text())
    broken = [f"{page.relative_to(ROOT)}: #{a}" for page in _pages()
              for a in _RESULTS_ANCHOR.findall(page.read_text()) if a not in anchors]
    assert not broken, "links to RESULTS.md sections that do not exist:\n  " + "\n  ".join(broken)


def test_every_number_on_the_performance_page_is_in_a_results_section_it_links() -> None:
    anchors = results_by_anchor((ROOT / "benchmarks" / "RESULTS.md").read_text())
    checked, missing = 0, []
    for section in re.split(r"\n(?=## )", PERFORMANCE.read_text()):
        title = section.split("\n", 1)[0]
        linked = [anchors[a] for a in _RESULTS_ANCHOR.findall(section) if a in anchors]
        recorded = {(n, u) for body in linked for n, u, _ in measured(body)}
        for n, u, where in measured(_LINK_TARGET.sub("]", section)):
            checked += 1
            if (n, u) not in recorded:
                missing.append(f"{title}: {n}{u} (in: ...{where}...)")
    assert checked >= 40, f"the pattern found too few numbers in docs/performance.md: {checked}"
    assert not missing, ("docs/performance.md quotes numbers that no RESULTS section its section links records "
                         "(quote that section as it stands, or link the section that holds it):\n  "
                         + "\n  ".join(missing))
