"""`myriad bringup` composed (myriad.lifecycle.bringup) with the site playbook faked: the
health documents written first, the run's result, and through the CLI its drawing and exit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from myriad.bringup import flow, verbs
from myriad.cli import main
from myriad.lifecycle.bringup import bringup
from myriad.provision import local
from myriad.runner import HostFailure, RunResult
from myriad.views.progress import Phases

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "local" / "cluster.yaml"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The site playbook's outcome (set by the test) and the options it was run with."""
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path / "state"))
    monkeypatch.setattr(local, "status", lambda spec: [])
    # The local example with node health on, whatever the example says.
    text = EXAMPLE.read_text(encoding="utf-8")
    spec = tmp_path / "cluster.yaml"
    spec.write_text(text if "\nhealth:" in text else text + "health: {}\n", encoding="utf-8")
    seen: dict[str, Any] = {
        "spec": spec,
        "outcome": RunResult("successful", 0, tmp_path, {}, (), ("node01",), 1.0),
    }

    def run_site(*args: Any, **kwargs: Any) -> RunResult:
        seen.update(kwargs)
        # The health role reads its documents while the roles run: they are there already.
        seen["documents"] = sorted(p.name for p in (tmp_path / "state/local/health").iterdir())
        outcome: RunResult = seen["outcome"]
        return outcome

    monkeypatch.setattr(verbs, "run_site", run_site)
    return seen


def test_the_health_documents_come_before_the_run(site: dict[str, Any]) -> None:
    done = bringup(site["spec"], Console(), reporter=Phases(Console()), check=True)
    assert done.health_documents == flow.cluster_state("local").root / "health"
    assert "node01.json" in site["documents"] and "myriad-node.pyz" in site["documents"]
    assert site["check"] is True and done.run.check and done.run.ok
    assert done.run.advice == ()


def test_cli_check_mode_says_what_would_change(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bringup", str(site["spec"]), "--check"]) == 0
    assert "check mode: a run would change node01; nothing was changed" in capsys.readouterr().out


def test_cli_a_node_that_did_not_answer_gets_advice_and_exit_1(
    site: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = HostFailure("node02", "Gathering Facts", "unreachable", True)
    site["outcome"] = RunResult("failed", 2, tmp_path, {}, (failure,), (), 1.0)
    assert main(["bringup", str(site["spec"])]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "node02 did not answer: no container; check it with `ansible -i" in out
