"""Figures the README states about the examples come from the plan, not from memory.

The README's `myriad plan inventories/starter-64/cluster.yaml` block is regenerated here at
the width it was captured (100 columns) and compared line by line; the example sizes in the
prose (nodes, GPUs, islands) are read out of the README and checked against each example's
plan.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from myriad.plan.pipeline import plan_spec
from myriad.views.plan import print_plan

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PLAN_COMMAND = "$ myriad plan inventories/starter-64/cluster.yaml"


def _readme_block(command: str) -> list[str]:
    """The lines a README code block shows after `command`, up to the closing fence."""
    start = README.index(command)
    end = README.index("\n```", start)
    return README[start:end].splitlines()[1:]


def _printed_plan(spec: Path) -> list[str]:
    buffer = io.StringIO()
    console = Console(file=buffer, width=100, force_terminal=False, color_system=None)
    print_plan(console, plan_spec(spec))
    return buffer.getvalue().splitlines()


def test_the_starter_plan_block_is_what_myriad_plan_prints() -> None:
    shown = [line.rstrip() for line in _readme_block(PLAN_COMMAND)]
    starter = ROOT / "inventories" / "starter-64" / "cluster.yaml"
    printed = [line.rstrip() for line in _printed_plan(starter)]
    assert shown == printed, (
        "README.md's `myriad plan inventories/starter-64` block differs from the plan; "
        "regenerate it with COLUMNS=100 myriad plan inventories/starter-64/cluster.yaml"
    )


def _example_sentence() -> str:
    start = README.index("Examples in `inventories/`")
    return " ".join(README[start : README.index("\n\n", start)].split())


TIMES = "\N{MULTIPLICATION SIGN}"


@pytest.mark.parametrize(
    ("example", "pattern"),
    [
        ("starter-64", rf"`starter-64` \((?P<nodes>[\d,]+) {TIMES} HGX H100"),
        (
            "roce-10k",
            rf"`roce-10k` \((?P<nodes>[\d,]+) {TIMES} (?P<gpus>\d+) A800 in islands of "
            r"(?P<island_nodes>[\d,]+)",
        ),
        (
            "h100-100k",
            rf"`h100-100k` \((?P<nodes>[\d,]+) {TIMES} HGX H100 in (?P<islands>[\d,]+) islands",
        ),
    ],
)
def test_example_sizes_in_the_readme_match_their_plans(example: str, pattern: str) -> None:
    match = re.search(pattern, _example_sentence())
    assert match is not None, f"the README no longer describes {example} as {pattern!r}"
    stated = {key: int(value.replace(",", "")) for key, value in match.groupdict().items()}
    result = plan_spec(ROOT / "inventories" / example / "cluster.yaml")
    plan = result.plan
    assert plan is not None and plan.fabric is not None
    compute_nodes = sum(p.nodes for p in plan.pools if p.role == "compute")
    actual = {
        "nodes": compute_nodes,
        "gpus": plan.gpus // compute_nodes,
        "island_nodes": plan.fabric.island_nodes,
        "islands": len(plan.fabric.islands),
    }
    assert {key: actual[key] for key in stated} == stated


BAD_SPEC_COMMAND = "$ myriad plan tests/spec/bad/43-several-problems.yaml"


def test_the_bad_spec_block_is_what_myriad_plan_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from myriad.cli import main

    monkeypatch.chdir(ROOT)
    code = main(["plan", "tests/spec/bad/43-several-problems.yaml"])
    captured = capsys.readouterr()
    assert code == 2
    printed = [line.rstrip() for line in (captured.out + captured.err).splitlines()]
    assert [line.rstrip() for line in _readme_block(BAD_SPEC_COMMAND)] == printed
