"""Lint rules: every id the planner yields is explained (`myriad plan --explain RULE`), and a
spec can accept a warning with a reason, which the plan shows instead of hiding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.errors import SpecError
from myriad.plan.pipeline import plan_loaded
from myriad.spec import load_spec_text
from myriad.spec.rules import RULES

ROOT = Path(__file__).resolve().parents[2]
LINTS = ROOT / "src" / "myriad" / "plan"
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def _yielded_ids() -> set[str]:
    """Every id literal a Finding is built with in the planner, fabric limits included."""
    ids: set[str] = set()
    for source in LINTS.glob("*.py"):
        text = source.read_text()
        ids |= set(re.findall(r'\bid="([a-z0-9-]+)"', text))
        ids |= {f"fabric-{what}" for what in re.findall(r'\bwhat="([a-z0-9-]+)"', text)}
    return ids


def test_every_lint_has_a_rule_and_every_rule_a_lint() -> None:
    assert _yielded_ids() == set(RULES)


def test_explain_prints_why_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--explain", "rack-cooling"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rack-cooling (warning; can be accepted)")
    assert "why: Air cooling is commonly limited" in out
    assert "fix: Liquid cooling" in out


def test_explain_an_unknown_rule_suggests_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--explain", "rack-colling"]) == 2
    assert "did you mean 'rack-cooling'?" in capsys.readouterr().err


def test_plan_without_a_spec_or_explain_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 2
    assert "plan needs a spec" in capsys.readouterr().err


def _hot(extra: str = "") -> str:
    # 45 kW racks on air, past the ~40 kW air cooling carries: rack-cooling warns.
    text = STARTER.read_text().replace("rack_kw: 25, cooling: air", "rack_kw: 45, cooling: air")
    assert "rack_kw: 45" in text
    return text + extra


ACCEPT = (
    "lints:\n  accept:\n"
    "    - {rule: rack-cooling, reason: the hall has rear-door heat exchangers}\n"
)


def test_an_accepted_warning_is_shown_with_its_reason_and_not_counted() -> None:
    before = plan_loaded(load_spec_text(_hot(), "c.yaml"))
    [warning] = [f for f in before.findings if f.id == "rack-cooling"]
    assert warning.accepted is None
    after = plan_loaded(load_spec_text(_hot(ACCEPT), "c.yaml"))
    [accepted] = [f for f in after.findings if f.id == "rack-cooling"]
    assert accepted.accepted == "the hall has rear-door heat exchangers"
    assert accepted.to_dict(after.loaded)["accepted"] == "the hall has rear-door heat exchangers"


def test_the_plan_prints_accepted_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Piped output keeps every cell whole; a COLUMNS from the environment (pytest-xdist's
    # workers have one) would fold the reason across lines.
    monkeypatch.delenv("COLUMNS", raising=False)
    spec = tmp_path / "c.yaml"
    spec.write_text(_hot(ACCEPT))
    assert main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "accepted: the hall has rear-door heat exchangers" in out
    assert "0 error(s), 0 warning(s), 1 accepted" in out
    assert main(["plan", str(spec), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f["accepted"] for f in findings if f["id"] == "rack-cooling"] == [
        "the hall has rear-door heat exchangers"
    ]


def test_an_acceptance_that_no_longer_applies_is_reported() -> None:
    result = plan_loaded(load_spec_text(STARTER.read_text() + ACCEPT, "c.yaml"))
    [unused] = [f for f in result.findings if f.id == "accept-unused"]
    assert unused.severity == "info"
    assert "rack-cooling" in unused.message
    assert unused.path == ("lints", "accept", 0)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{rule: rack-colling, reason: a long enough reason}", "unknown lint rule 'rack-colling'"),
        ("{rule: rack-power, reason: a long enough reason}", "rack-power is an error"),
        ("{rule: rack-cooling, reason: ok}", "at least 10 characters"),
    ],
)
def test_a_bad_acceptance_is_a_located_spec_error(entry: str, message: str) -> None:
    text = STARTER.read_text() + f"lints:\n  accept:\n    - {entry}\n"
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, "c.yaml")
    rendered = caught.value.render()
    assert message in rendered
    line = text.splitlines().index(f"    - {entry}") + 1
    assert f"c.yaml:{line}:" in rendered


def test_the_readmes_acceptance_is_the_one_tested_here() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```yaml\nlints:\n") + len("```yaml\n")
    assert readme[start : readme.index("```", start)] == ACCEPT
