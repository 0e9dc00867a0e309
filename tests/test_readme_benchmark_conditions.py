"""Every timing table in the README states the conditions its benchmark measured under.

A timing without its machine and load misleads: the no-change `up` the README gave as 26 s
measured 42 s at a load of 1.6. Each benchmark prints `conditions()` first
(benchmarks/conditions.py); the README quotes that line beside each table it measured.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The README's sections with a benchmark's timings, and the benchmark each quotes.
TIMED_SECTIONS = {
    "### Inventory at scale": "inventory_scale",
    "### Bring-up modes: push or image": "bringup",
    "### The cabling sheet at scale": "cabling_scale",
}


def _section(heading: str) -> str:
    start = README.index(heading)
    return README[start : README.index("\n#", start + len(heading))]


def test_conditions_are_one_line_in_the_quoted_form() -> None:
    conditions = load_benchmark("conditions")
    line = conditions.conditions()
    assert conditions.PATTERN.fullmatch(line), line
    assert f"{os.cpu_count()} cores" in line
    assert re.fullmatch(r"load after: [\d.]+/[\d.]+/[\d.]+", conditions.load_after())


@pytest.mark.parametrize(("heading", "benchmark"), sorted(TIMED_SECTIONS.items()))
def test_each_timed_section_quotes_its_conditions(heading: str, benchmark: str) -> None:
    text = " ".join(_section(heading).split())
    pattern = load_benchmark("conditions").PATTERN
    assert f"benchmarks/{benchmark}.py" in text
    assert pattern.search(text), f"{heading}: no `conditions: ...` line from the benchmark"
    assert re.search(r"load after: [\d.]+/[\d.]+/[\d.]+", text), heading


def test_every_benchmark_prints_its_conditions() -> None:
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.name == "conditions.py":
            continue
        assert "raise SystemExit(measured(main))" in path.read_text(), path.name
