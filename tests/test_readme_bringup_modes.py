"""The README's bring-up modes table is what `benchmarks/bringup.py --modes` prints, and the
statements drawn from it follow from its figures.

The figures are one machine's measurements and are not re-measured here (speed is the
benchmark's); checked: the header is the benchmark's, each mode and size it names has a
first and a no-change row, the ratios and per-node figures the text quotes are the table's,
and the node count the text gives for the default mode is the spec's.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from benchmark_module import load_benchmark
from myriad.spec.bringup import IMAGE_MODE_MIN_NODES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = "### Bring-up modes: push or image"
TIMES = "\N{MULTIPLICATION SIGN}"


def benchmark() -> ModuleType:
    return load_benchmark("bringup")


def section() -> str:
    start = README.index(SECTION)
    return README[start : README.index("\n#", start + len(SECTION))]


def rows() -> dict[tuple[str, int, str], list[str]]:
    lines = [line for line in section().splitlines() if line.startswith("|")]
    found = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found[(cells[0], int(cells[1]), cells[2])] = cells[3:]
    return found


def test_the_table_is_the_benchmarks_output() -> None:
    lines = [line for line in section().splitlines() if line.startswith("|")]
    assert "\n".join(lines[:2]) == benchmark().MODES_HEADER
    table = rows()
    for mode, sizes in (("image", (4, 16, 32)), ("push", (4, 16))):
        for nodes in sizes:
            assert (mode, nodes, "first up") in table and (mode, nodes, "no-change up") in table


def test_the_text_quotes_the_table() -> None:
    table = rows()
    text = " ".join(section().split())
    ratio = float(table["image", 16, "first up"][0]) / float(table["image", 4, "first up"][0])
    assert f"takes {ratio:.1f}{TIMES} the 4-node one" in text
    per_node = [table["image", n, "first up"][2] for n in (4, 32)]
    assert f"({per_node[0]} → {per_node[1]} s from 4 to 32 nodes" in text
    assert f"1,250 {TIMES} {float(table['image', 32, 'first up'][2]):.2f} s" in text


def test_the_default_mode_threshold_is_the_specs() -> None:
    text = " ".join(section().split())
    assert f"fewer than {IMAGE_MODE_MIN_NODES} nodes use push" in text
    assert f"Below {IMAGE_MODE_MIN_NODES} nodes push mode stays the default" in text
