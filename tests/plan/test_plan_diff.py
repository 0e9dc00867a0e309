"""`myriad plan SPEC --diff OLD.json`: the figures a spec change moves, before and after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.plan.diff import diff_plans

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def _plan_json(spec: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["plan", str(spec), "--json"]) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def test_sixteen_nodes_instead_of_eight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_plan_json(STARTER, capsys)))
    bigger = tmp_path / "cluster.yaml"
    text = STARTER.read_text()
    assert "count: 8, role: compute" in text
    bigger.write_text(text.replace("count: 8, role: compute", "count: 16, role: compute"))
    changes = {
        c.what: c for c in diff_plans(json.loads(old.read_text()), _plan_json(bigger, capsys))
    }
    # 2 controllers + 1 login + 8 -> 16 GPU nodes; 64 -> 128 GPUs, one rail cable per GPU.
    assert (changes["nodes"].before, changes["nodes"].after) == (11, 19)
    assert changes["GPUs"].delta == 64
    assert changes["pool gpu nodes"].delta == 8
    assert "pool ctl nodes" not in changes
    assert changes["fabric cables"].delta is not None and changes["fabric cables"].delta >= 64

    assert main(["plan", str(bigger), "--diff", str(old)]) == 0
    out = capsys.readouterr().out
    assert "Changes against" in out
    assert "pool gpu nodes" in out and "+8" in out


def test_the_same_spec_has_no_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "plan.json"
    assert main(["plan", str(STARTER), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["plan", str(STARTER), "--diff", str(old), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["diff"] == []
    assert main(["plan", str(STARTER), "--diff", str(old)]) == 0
    assert "no change against" in capsys.readouterr().out


def test_a_finding_that_came_is_listed() -> None:
    old = {"plan": {"nodes": 1}, "findings": []}
    new = {"plan": {"nodes": 1}, "findings": [{"severity": "warning", "id": "x", "path": "a"}]}
    [change] = diff_plans(old, new)
    assert (change.what, change.before, change.after) == ("finding x at a", None, "warning")


def test_a_file_that_is_not_a_plan_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"results": []}')
    assert main(["plan", str(STARTER), "--diff", str(other)]) == 2
    assert "not a plan document" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert main(["plan", str(STARTER), "--diff", str(broken)]) == 2
    assert "is not JSON" in capsys.readouterr().err


def test_a_float_change_is_rounded_like_the_figures() -> None:
    old = {"plan": {"power": {"it_kw": 86.3}}, "findings": []}
    new = {"plan": {"power": {"it_kw": 93.1}}, "findings": []}
    [change] = diff_plans(old, new)
    # 93.1 - 86.3 in floating point is 6.799999999999997.
    assert change.delta == 6.8
