"""`myriad validate` and `myriad health` through the CLI, with the gathering faked: the
verbs' results drawn on a terminal or printed as a `format`ted JSON document, and the exit
code the CLI picks from them (0 only when everything passed / every node is healthy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from myriad import JSON_FORMAT
from myriad.bringup import flow
from myriad.cli import main
from myriad.health import report as health
from myriad.node.checks import CheckResult
from myriad.validate import service
from myriad.validate.report import ValidationReport, read_last

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "inventories" / "local" / "cluster.yaml"
NOW = 1_800_000_000.0


def report(status: str) -> ValidationReport:
    results = (
        CheckResult("node01", "node.reachable", "pass", "facts gathered", "gathered", "pools"),
        CheckResult("node02", "time.sync", status, "chrony active", "chrony off", "pools"),  # type: ignore[arg-type]
    )
    return ValidationReport("local", str(LOCAL), results, gather_seconds=0.5)


@pytest.fixture
def validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `validate_cluster` is asked and answers: the report set by the test."""
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path / "state"))
    seen: dict[str, Any] = {"report": report("pass")}

    def validate_cluster(*args: Any, **kwargs: Any) -> ValidationReport:
        seen.update(kwargs)
        kwargs["on_event"]({"event": "runner_on_ok"})
        result: ValidationReport = seen["report"]
        return result

    monkeypatch.setattr(service, "validate_cluster", validate_cluster)
    return seen


def test_a_passing_validation_is_drawn_kept_and_exits_0(
    validated: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(LOCAL)]) == 0
    out = capsys.readouterr().out
    assert "Validation of local: facts from 2 of 2 nodes in 0.5 s" in out
    assert "the cluster matches its spec: 2 passed, 0 failed" in out
    kept = read_last(flow.cluster_state("local").root)
    assert kept is not None and kept["format"] == JSON_FORMAT and kept["ok"] is True


def test_json_is_the_only_thing_on_stdout_and_a_failure_exits_1(
    validated: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    validated["report"] = report("fail")
    junit = tmp_path / "validate.xml"
    assert main(["validate", str(LOCAL), "--json", "--junit", str(junit)]) == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert (document["format"], document["ok"], document["counts"]["fail"]) == (
        JSON_FORMAT,
        False,
        1,
    )
    assert junit.is_file() and f"JUnit XML written to {junit}" in captured.err


def test_an_error_is_a_failure_too_and_a_limited_run_is_not_kept(
    validated: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    validated["report"] = report("error")
    assert main(["validate", str(LOCAL), "--limit", "node02"]) == 1
    assert validated["limit"] == ["node02"]
    assert "the cluster differs from its spec" in capsys.readouterr().out
    assert read_last(flow.cluster_state("local").root) is None


def _health(*rows: health.NodeHealth) -> health.HealthReport:
    return health.HealthReport("local", NOW, 90, rows)


FINE = health.NodeHealth("node01", True, False, None, None, None, NOW - 10, False)
DRAINED = health.NodeHealth(
    "node02", True, True, "other", "admin: fan", None, NOW - 10, False, failing=["gpu.count"]
)


@pytest.mark.parametrize(("rows", "code"), [((FINE,), 0), ((FINE, DRAINED), 1)])
def test_health_json_has_a_format_and_the_exit_code_follows_the_nodes(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rows: tuple[health.NodeHealth, ...],
    code: int,
) -> None:
    monkeypatch.setattr(health, "health_report", lambda spec, **kw: _health(*rows))
    assert main(["health", str(LOCAL), "--json"]) == code
    document = json.loads(capsys.readouterr().out)
    assert document["format"] == JSON_FORMAT and document["healthy"] is (code == 0)
    assert [n["node"] for n in document["nodes"]] == [r.node for r in rows]


def test_health_on_a_terminal_shows_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(health, "health_report", lambda spec, **kw: _health(FINE, DRAINED))
    assert main(["health", str(LOCAL)]) == 1
    out = capsys.readouterr().out
    assert "Node health of local" in out and "other: admin: fan" in out
    assert "1 of 2 nodes healthy; not: node02" in out
