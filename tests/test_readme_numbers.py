"""Every measured number the README quotes is one that benchmarks/RESULTS.md records.

The README is the front page and quotes a few results (speed and CPU ratios of the two
Kafka sources, the commit listener's cost, the sink's speed); RESULTS.md holds the dated
runs. A number edited on one side only is how the two came to disagree (issue 27), so
each number with a unit that the README's "Which source should I use?" section (its
table and the listener paragraph) and its "Measured" section quote must appear in
RESULTS.md with the same unit: ``0.62–0.81×`` needs ``0.62×`` and ``0.81×`` there (alone
or as the ends of a range), ``3.6 ms`` needs ``3.6 ms``. A rounded quote (``1.04×`` for
RESULTS' ``1.039×``) fails: quote what was recorded. No server needed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("Which source should I use?", "Measured")
# A value or a range of two ("0.62–0.81"), then its unit. Not a unit: "3-broker", "24 rounds".
_MEASURED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?[–-]\s?(\d+(?:\.\d+)?))?\s?(×|%|ms|µs|s)(?![A-Za-z])")


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
    readme = "# t\n\n## Which source should I use?\n1.5×\n\n## Other\n9×\n\n## Measured\n2.5 ms\n"
    assert [n for n, _, _ in measured(sections(readme))] == ["1.5", "2.5"]


def test_every_number_the_readme_quotes_is_in_results() -> None:
    readme = (ROOT / "README.md").read_text()
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    quoted = measured(sections(readme))
    assert len(quoted) >= 10, f"the pattern found too few numbers in the README: {quoted}"
    recorded = {(n, u) for n, u, _ in measured(results)}
    missing = [f"{n}{u} (in: ...{where}...)" for n, u, where in quoted if (n, u) not in recorded]
    assert not missing, ("README quotes numbers that benchmarks/RESULTS.md does not record with that unit "
                         "(quote RESULTS.md as it stands, or append a dated run there):\n  " + "\n  ".join(missing))
