"""The README's "Inventory at scale" table is what benchmarks/inventory_scale.py prints.

Times and sizes are measurements of one machine and are not re-measured here (speed is the
benchmark's, never a test's); what the table states beyond them is checked: its header is
the benchmark's, it has a row for every example the benchmark measures, the host counts are
what `myriad render` writes for those examples, the targets are the benchmark's, and each
row's `ok` or `FAIL` is what the benchmark concludes from the figures shown.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

from benchmark_module import load_benchmark
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = "### Inventory at scale"


def benchmark() -> ModuleType:
    return load_benchmark("inventory_scale")


def table() -> list[str]:
    start = README.index(SECTION)
    end = README.index("\n#", start + len(SECTION))
    return [line for line in README[start:end].splitlines() if line.startswith("|")]


def test_the_table_is_the_benchmarks_output() -> None:
    bench = benchmark()
    lines = table()
    assert lines[:2] == bench.HEADER.splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    measured = {row[0]: row for row in rows if row[1] == "host_vars files"}
    assert set(measured) == {target.example for target in bench.TARGETS}
    for target in bench.TARGETS:
        example, _, hosts, _, wall, _, output_mb, _, wanted, result = measured[target.example]
        loaded = plan_loaded(load_spec(ROOT / "inventories" / example / "cluster.yaml"))
        assert loaded.plan is not None
        inventory = build_inventory(loaded.loaded.spec, loaded.loaded.catalog, loaded.plan)
        assert int(hosts.replace(",", "")) == len(inventory.host_vars)
        figures = bench.Measured(
            hosts=len(inventory.host_vars),
            render_s=0.0,
            wall_s=float(wall.removeprefix("> ")),
            cpu_s=0.0,
            output_bytes=int(float(output_mb) * bench.MB),
            peak_mb=0.0,
            finished=not wall.startswith(">"),
        )
        wanted_now, ok = bench.verdict(target, figures)
        # The README says what the run said, met or not.
        assert (wanted, result) == (wanted_now, "ok" if ok else "FAIL"), measured[example]


def test_the_section_names_the_command_and_the_extra_vars_file() -> None:
    start = README.index(SECTION)
    text = " ".join(README[start : README.index("\n#", start + len(SECTION))].split())
    assert "benchmarks/inventory_scale.py" in text
    assert re.search(r"-e @<inventory>/cluster_tables\.yml", text)
