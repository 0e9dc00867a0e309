"""`myriad health --explain CHECK`: the action map on the terminal and as JSON."""

from __future__ import annotations

import json

import pytest

from myriad.cli import main


def test_one_xid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--explain", "xid:79"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpu.xid:79: reboot\n")
    assert "what: GPU has fallen off the bus" in out
    assert "source: nvidia-xid-catalog (bucket RESTART_BM)" in out


def test_a_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--explain", "hca.counter-growth"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hca.counter-growth: needs-hardware\n")
    assert "source: myriad" in out


def test_a_table_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--explain", "gpu.xid", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["catalog"].startswith("docs.nvidia.com/deploy/xid-errors")
    entries = {e["entry"]: e for e in document["entries"]}
    assert len(entries) == 172
    assert entries["gpu.xid:95"]["action"] == "reset-gpu"
    assert entries["gpu.xid:95"]["bucket"] == "RESET_GPU"
    assert entries["gpu.xid:13"]["action"] == "none"


def test_the_recovery_actions_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Off a terminal the console is wide unless COLUMNS (80 under pytest-xdist) says otherwise.
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["health", "--explain", "gpu.recovery-action"]) == 0
    out = capsys.readouterr().out
    assert "gpu.recovery-action:Drain and Reset" in out and "reset-gpu" in out


def test_an_unknown_name_suggests_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--explain", "hca.stat"]) == 2
    assert "did you mean 'hca.state'?" in capsys.readouterr().err


def test_health_without_a_spec_or_explain_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health"]) == 2
    assert "health needs a spec" in capsys.readouterr().err
