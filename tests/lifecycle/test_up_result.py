"""`myriad up` composed (myriad.lifecycle.up), with Docker, Ansible and the gathering faked:
the `UpResult` it returns (phases as they ran, the bring-up, the settle wait, validation,
the health documents), and, through the CLI, how the result is drawn and its exit code."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from myriad.bringup import flow
from myriad.cli import _up_exit, main
from myriad.errors import OpsError
from myriad.lifecycle import up as lifecycle
from myriad.node.checks import CheckResult
from myriad.ops.roll_result import NodeOutcome, RollResult
from myriad.plan.pipeline import plan_spec
from myriad.provision import local, node_image
from myriad.runner import HostFailure, RunResult
from myriad.validate.report import ValidationReport
from myriad.validate.service import Gathering
from myriad.views.progress import Phases
from myriad.views.up import print_up

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "local" / "cluster.yaml"
NODES = ("ctl01", "node01", "node02", "node03")


def run(state: Path, **changes: Any) -> RunResult:
    values: dict[str, Any] = {
        "status": "successful",
        "rc": 0,
        "run_dir": state / "runs" / "x-bringup",
        "stats": {n: {"ok": 3} for n in NODES},
        "failures": (),
        "changed_hosts": (),
        "seconds": 1.0,
    }
    return RunResult(**{**values, **changes})


def with_health(folder: Path) -> Path:
    """The local example with node health on, whatever the example says."""
    text = EXAMPLE.read_text(encoding="utf-8")
    spec = folder / "cluster.yaml"
    spec.write_text(text if "\nhealth:" in text else text + "health: {}\n", encoding="utf-8")
    return spec


def report(status: str = "pass") -> ValidationReport:
    results = tuple(
        CheckResult(n, "node.reachable", status, "facts gathered", "gathered", "pools")  # type: ignore[arg-type]
        for n in NODES
    )
    return ValidationReport("local", "cluster.yaml", results, gather_seconds=0.5)


class Fakes:
    """Docker, the site playbook, Slurm's settle wait and the gathering, as `up` calls them."""

    def __init__(self, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spec = EXAMPLE
        self.calls: list[str] = []
        self.outcome = run(state)
        self.waiting: list[str] | Exception = []
        self.report = report()
        self.gathering: Gathering | None = None
        monkeypatch.setattr(node_image, "ensure_node_image", lambda recipe: "sha256:" + "ab" * 32)
        monkeypatch.setattr(node_image, "node_image_recipe", lambda: None)
        monkeypatch.setattr(local, "container_states", lambda spec: {})
        monkeypatch.setattr(local, "converge", self.converge)
        monkeypatch.setattr(lifecycle, "run_site", self.run_site)
        monkeypatch.setattr(lifecycle, "wait_settled", self.wait_settled)
        monkeypatch.setattr(lifecycle, "validate_after_bringup", self.validate)
        monkeypatch.setattr(local, "status", lambda spec: [])

    def converge(self, spec: Any, **options: Any) -> dict[str, str]:
        self.calls.append("converge")
        return dict.fromkeys(NODES, "created")

    def run_site(self, *args: Any, **kwargs: Any) -> RunResult:
        self.calls.append("site")
        return self.outcome

    def wait_settled(self, slurm: Any, nodes: Sequence[str]) -> list[str]:
        self.calls.append("settle")
        if isinstance(self.waiting, Exception):
            raise self.waiting
        return self.waiting

    def validate(self, result: Any, state: Any, gathering: Gathering) -> ValidationReport:
        self.calls.append("validate")
        self.gathering = gathering
        return self.report


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fakes:
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path / "state"))
    made = Fakes(tmp_path / "state" / "local", monkeypatch)
    made.spec = with_health(tmp_path)
    return made


class Watching:
    @contextmanager
    def gathering(self, nodes: int) -> Iterator[Any]:
        yield lambda event: None


def test_a_passing_up_returns_every_phase_the_validation_and_the_health_documents(
    fakes: Fakes,
) -> None:
    watching = Watching()
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()), gathering=watching)
    assert [p.name for p in result.phases] == ["plan", "node image", "containers", "inventory"]
    phases = {p.name: p for p in result.phases}
    assert phases["plan"].notes == ("4 nodes",)
    assert phases["containers"].notes == ("4 created",)
    assert phases["node image"].notes == ("sha256:abababababab",)
    assert all(p.seconds >= 0 for p in result.phases)
    assert fakes.calls == ["converge", "site", "settle", "validate"]
    assert result.validation is fakes.report and fakes.gathering is watching
    assert result.validation_seconds is not None and result.unsettled == ()
    # The local example has a health section: each node's document, beside the node package.
    assert result.health_documents == flow.cluster_state("local").root / "health"
    assert sorted(p.name for p in result.health_documents.glob("*.json")) == [
        f"{n}.json" for n in NODES
    ]
    assert (result.health_documents / "myriad-node.pyz").is_file()
    assert _up_exit(result) == 0


def test_a_failed_bringup_stops_before_validation_with_advice(fakes: Fakes) -> None:
    state = flow.cluster_state("local")
    fakes.outcome = run(
        state.root,
        status="failed",
        rc=2,
        failures=(HostFailure("node02", "Gathering Facts", "unreachable", True),),
    )
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()))
    assert result.bringup_failed and result.validation is None
    assert fakes.calls == ["converge", "site"]
    assert result.advice == (
        f"node02 did not answer: no container; check it with `ansible -i "
        f"{state.inventory / 'hosts.yml'} node02 -m ansible.builtin.ping`",
    )
    assert _up_exit(result) == 1


def test_no_validate_stops_after_the_bringup(fakes: Fakes) -> None:
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()), validate=False)
    assert fakes.calls == ["converge", "site"]
    assert result.validation is None and not result.bringup_failed
    assert _up_exit(result) == 0


def test_nodes_slurm_has_not_heard_from_are_validated_as_they_are(fakes: Fakes) -> None:
    fakes.waiting = ["node03"]
    fakes.report = report("fail")
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()))
    assert result.unsettled == ("node03",)
    assert result.validation is fakes.report and _up_exit(result) == 1


def test_a_controller_that_does_not_answer_goes_straight_to_validation(fakes: Fakes) -> None:
    fakes.waiting = OpsError("could not reach the controller")
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()))
    assert fakes.calls[-2:] == ["settle", "validate"]
    assert result.unsettled == () and result.validation is fakes.report


def test_off_slurm_nothing_is_waited_for(fakes: Fakes) -> None:
    result = plan_spec(fakes.spec)
    spec = result.loaded.spec
    software = spec.software.model_copy(update={"orchestrator": "kubernetes"})
    loaded = replace(result.loaded, spec=spec.model_copy(update={"software": software}))
    assert (
        lifecycle.slurm_unsettled(replace(result, loaded=loaded), flow.cluster_state("local")) == []
    )
    assert "settle" not in fakes.calls


@pytest.mark.parametrize("roll_code", [0, 1])
def test_image_mode_rolls_the_nodes_on_an_older_image_before_validating(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch, roll_code: int
) -> None:
    rolled: list[Sequence[str]] = []
    built = SimpleNamespace(manifest=SimpleNamespace(tag="myriad-local-image:abc"))
    monkeypatch.setattr(lifecycle, "resolved_mode", lambda bringup, nodes: "image")
    monkeypatch.setattr(lifecycle, "build_images", lambda *a, **k: {"container": built})
    monkeypatch.setattr(
        local, "converge", lambda spec, **o: {**dict.fromkeys(NODES, "running"), "node02": "stale"}
    )
    monkeypatch.setattr(lifecycle, "run_image_mode", lambda *a, **k: fakes.outcome)

    def reimage(result: Any, state: Any, stale: Sequence[str], progress: Any) -> RollResult:
        rolled.append(stale)
        status = "failed" if roll_code else "done"
        node = NodeOutcome("node02", 1, status, "validation: x" if roll_code else "", "", None)
        return RollResult("image rollout", "local", "finished", (node,), Path("roll.log"), 1.0)

    monkeypatch.setattr(lifecycle, "reimage", reimage)
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()))
    assert rolled == [("node02",)] and result.stale == ("node02",)
    assert result.rollout is not None and result.rollout.ok == (not roll_code)
    if roll_code:
        # A failed rollout is the run's outcome: nothing is validated on half-rolled nodes.
        assert result.validation is None and _up_exit(result) == roll_code
        console = Console(record=True, width=200)
        print_up(console, result)
        text = console.export_text()
        assert "node02 failed: validation: x" in text and "roll log: roll.log" in text
    else:
        assert result.validation is fakes.report and _up_exit(result) == 0


# --- through the CLI: what is drawn and the exit code -------------------------------------------


def test_cli_up_draws_the_report_and_the_verdict(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.waiting = ["node03"]
    assert main(["up", str(fakes.spec)]) == 0
    out = capsys.readouterr().out
    assert "✓ plan — 4 nodes" in out
    assert "not answering slurmctld after 120 s: node03; validating as they are" in out
    assert "the cluster matches its spec: 4 passed" in out
    assert "✓ validation — the cluster matches its spec (" in out


def test_cli_up_says_how_to_retry_a_failed_bringup(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.outcome = run(
        flow.cluster_state("local").root,
        status="failed",
        rc=2,
        failures=(HostFailure("node01", "Install munge", "No package matching 'x'", False),),
    )
    assert main(["up", str(fakes.spec)]) == 1
    out = capsys.readouterr().out
    assert (
        f"bring-up failed on node01: fix the cause, then `myriad up {fakes.spec} --retry-failed`"
        in (" ".join(out.split()))
    )
    assert "validation" not in out


def test_a_failing_validation_is_drawn_and_exits_1(fakes: Fakes) -> None:
    fakes.report = report("fail")
    result = lifecycle.up(fakes.spec, Console(), reporter=Phases(Console()))
    console = Console(record=True, width=200)
    print_up(console, result)
    text = console.export_text()
    assert "the cluster differs from its spec: 0 passed, 4 failed" in text
    assert "✗ validation — the cluster differs from its spec (" in text
    assert _up_exit(result) == 1
