"""`myriad accept` from the command line: the table failures first, --json, --junit, and the
exit codes (0 all passed, 1 a node failed, 2 bad input with one line and no traceback). The
controller is a fake (tests/accept_fakes.py); the cluster the local twin's spec
with GPU nodes (tests/accept_stubs.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from accept_fakes import Controller
from accept_stubs import gpu_twin_spec
from myriad import JSON_FORMAT
from myriad.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr("myriad.ops.accept.SERVER_START_S", 0.0)
    path = tmp_path / "cluster.yaml"
    path.write_text(gpu_twin_spec((ROOT / "inventories/local/cluster.yaml").read_text(), "cli"))
    return path


def _controller(monkeypatch: pytest.MonkeyPatch, ctl: Controller) -> None:
    monkeypatch.setattr("myriad.ops.accept_cluster.Slurm.of", lambda inventory: ctl.slurm())
    monkeypatch.setattr("myriad.ops.accept_cluster.SlurmCommands", lambda prefix, slurm: ctl)


def test_a_slow_node_exits_1_and_leads_the_table(
    spec: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _controller(monkeypatch, Controller(slow="node02"))
    assert main(["accept", str(spec), "--level", "quick"]) == 1
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "node0" in line]
    assert "node02" in rows[0] and "FAILED" in rows[0] and "360.0" in rows[0]
    assert "node02: drained (myriad-accept: nccl all_reduce, one node 150.0 GB/s" in out
    assert "FAILED: 3 of 4 nodes passed" in out


def test_all_passed_exits_0_with_json_and_junit(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _controller(monkeypatch, Controller())
    junit = tmp_path / "accept.xml"
    assert main(["accept", str(spec), "--level", "full", "--json", "--junit", str(junit)]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["format"] == JSON_FORMAT and document["passed"] is True
    assert document["level"] == "full" and document["nodes"] == dict.fromkeys(
        ("node01", "node02", "node03", "node04")
    )
    assert document["search"]["findings"] == 0
    suites = ET.parse(junit).getroot()
    assert suites.get("failures") == "0" and len(suites) == 4
    assert "JUnit XML written to" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--level quick|full|burn-in is required (or --resume)"),
        (["--level", "quick", "--limit", "node09"], "not compute nodes: node09"),
        (["--resume"], "no unfinished acceptance"),
        (["--level", "quick", "--junit", "out.txt"], "--junit writes XML"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    spec: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    _controller(monkeypatch, Controller())
    assert main(["accept", str(spec), *argv, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err
    assert "Traceback" not in captured.err
    assert json.loads(captured.out)["error"]["exit_code"] == 2


def test_a_fail_slow_signal_is_a_line_of_its_own_in_the_report_json_and_junit(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # node03's GPU sample: the A5000 capture with its first GPU's link at x8 of x16.
    monkeypatch.delenv("COLUMNS", raising=False)
    finding = "GPU 0 PCIe x8 of x16"
    _controller(monkeypatch, Controller(narrow="node03"))
    assert main(["accept", str(spec), "--level", "quick"]) == 1
    out = capsys.readouterr().out
    assert f"node03 gpu sample: {finding}\n" in out
    assert f"node03: drained (myriad-accept: gpu sample failed: {finding})" in out

    _controller(monkeypatch, Controller(narrow="node03"))
    junit = tmp_path / "accept.xml"
    assert main(["accept", str(spec), "--level", "quick", "--json", "--junit", str(junit)]) == 1
    document = json.loads(capsys.readouterr().out)
    (row,) = [r for r in document["steps"] if r["test"] == "gpu sample" and not r["passed"]]
    assert row["node"] == "node03" and row["findings"] == [finding]
    assert document["nodes"]["node03"] == f"myriad-accept: gpu sample failed: {finding}"
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert failure.get("type") == "gpu sample" and failure.text == finding
