"""Every measured number the README quotes is one that benchmarks/RESULTS.md records.

The README is the front page and quotes a few results (speed ratios, listener cost,
sink speed); RESULTS.md holds the dated runs. A number edited on one side only is how
the two came to disagree (issue 27): each quoted number must appear in RESULTS.md.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a number followed by a unit of a measurement: ×, %, ms, s, µs
_MEASURED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:[–-](\d+(?:\.\d+)?))?\s?(×|%|ms\b|µs\b|s\b)")


def _sections(text: str) -> str:
    """The parts that quote measurements: the source table and its paragraph, 'Measured'."""
    start = text.index("## Which source should I use?")
    end = text.index("## Secured clusters")
    measured = text[text.index("## Measured"):]
    return text[start:end] + measured


def quoted_numbers(readme: str) -> list[str]:
    found = []
    for match in _MEASURED.finditer(_sections(readme)):
        found += [n for n in match.group(1, 2) if n is not None]
    return found


def test_the_pattern_finds_ranges_and_units() -> None:
    assert quoted_numbers("## Which source should I use?\n0.6–0.8× at 1.3 ms, 4 %\n"
                          "## Secured clusters\n## Measured\n≥ 1.27× and 24 rounds") == \
        ["0.6", "0.8", "1.3", "4", "1.27"]


def test_every_number_the_readme_quotes_is_in_results() -> None:
    readme = (ROOT / "README.md").read_text()
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    numbers = quoted_numbers(readme)
    assert len(numbers) >= 5, numbers
    missing = [n for n in numbers if not re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", results)]
    assert missing == [], f"README quotes {missing}, which benchmarks/RESULTS.md does not record"
