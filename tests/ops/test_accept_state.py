"""An acceptance run's state: kept after every step, resumed where it stopped, verdicts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from myriad.errors import OpsError
from myriad.ops.accept_plan import Step, StepResult
from myriad.ops.accept_state import AcceptRun, step_key, summary_rows, to_junit, unfinished
from myriad.plan.acceptance import Expected

NVLINK = Expected("nccl all_reduce, one node", 360.0, 0.10, "catalog", "hand")
DIAG1 = Step("dcgm diag", ("n1",), (), None)
NCCL1 = Step("nccl all_reduce, one node", ("n1",), (), NVLINK)
DIAG2 = Step("dcgm diag", ("n2",), (), None)
RDMA2 = Step("rdma rail 0", ("n2", "n1"), (), None)
STEPS = [DIAG1, NCCL1, DIAG2, RDMA2]
# 2026-12-04T23:00:00Z
AT = 1_796_425_200.0


def test_a_killed_run_resumes_with_only_the_steps_it_had_not_judged(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = AcceptRun.create(runs, "quick", ["n1", "n2"], "myriad-accept-1", at=AT)
    assert run.run_dir.name == "20261204T230000Z-accept"
    run.record(StepResult(DIAG1, True, None, None))
    run.record(StepResult(NCCL1, False, 300.0, "myriad-accept: nccl ... 300.0 GB/s"))
    # Killed here: a new process finds the run and loads it from disk.
    found = unfinished(runs)
    assert found == run.run_dir
    again = AcceptRun.load(found)
    assert again.remaining(STEPS) == [DIAG2, RDMA2]
    record = again.data["steps"][step_key(NCCL1)]
    # 0.90 x 360.0 = 324.0
    assert record["expected_gbs"] == 360.0 and record["gate_gbs"] == pytest.approx(324.0)
    assert record["measured_gbs"] == 300.0 and record["passed"] is False
    again.record(StepResult(DIAG2, True, None, None))
    again.record(StepResult(RDMA2, False, None, "myriad-accept: rdma rail 0 could not read"))
    again.finish()
    assert unfinished(runs) is None
    assert AcceptRun.load(found).verdicts() == {
        "n1": "myriad-accept: nccl ... 300.0 GB/s",
        "n2": "myriad-accept: rdma rail 0 could not read",
    }


def test_a_node_with_every_step_passed_has_no_reason(tmp_path: Path) -> None:
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r", at=AT)
    run.record(StepResult(DIAG1, True, None, None))
    run.record(StepResult(RDMA2, True, None, None))  # judges n2, the sender, not n1
    assert run.verdicts() == {"n1": None, "n2": None}


def test_damaged_or_foreign_state_is_an_error(tmp_path: Path) -> None:
    run = AcceptRun.create(tmp_path, "quick", ["n1"], "r", at=AT)
    run.path.write_text("{")
    with pytest.raises(OpsError, match="is damaged"):
        AcceptRun.load(run.run_dir)
    run.path.write_text(json.dumps({"version": 99}))
    with pytest.raises(OpsError, match="not an acceptance state"):
        AcceptRun.load(run.run_dir)
    with pytest.raises(OpsError, match="no acceptance state here"):
        AcceptRun.load(tmp_path / "elsewhere")


def test_summary_puts_failures_first_and_junit_names_the_reason(tmp_path: Path) -> None:
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r", at=AT)
    run.record(StepResult(DIAG1, True, None, None))
    run.record(StepResult(DIAG2, True, None, None))
    reason = "myriad-accept: nccl all_reduce, one node 300.0 GB/s < 0.90 x 360.0 GB/s expected"
    run.record(StepResult(NCCL1, False, 300.0, reason))
    rows = summary_rows(run)
    assert [(r["node"], r["test"], r["passed"]) for r in rows] == [
        ("n1", "nccl all_reduce, one node", False),
        ("n1", "dcgm diag", True),
        ("n2", "dcgm diag", True),
    ]
    assert rows[0]["ratio"] == pytest.approx(300.0 / 360.0)
    assert rows[1]["ratio"] is None
    root = ET.fromstring(to_junit(run, "lab").split("\n", 1)[1])
    assert root.get("tests") == "3" and root.get("failures") == "1"
    n1 = root.find("testsuite[@name='n1']")
    assert n1 is not None and n1.get("failures") == "1"
    failure = n1.find("testcase[@name='nccl all_reduce, one node']/failure")
    assert failure is not None and failure.get("message") == reason
    assert "measured: 300.0 GB/s" in (failure.text or "")
    assert root.find("testsuite[@name='n2']/testcase/failure") is None


def test_junit_gives_the_reason_where_a_failed_test_has_no_figure(tmp_path: Path) -> None:
    """A DCGM failure or output that could not be read has no GB/s to show: its text is the
    reason, not `expected: None GB/s`."""
    run = AcceptRun.create(tmp_path, "quick", ["n1"], "r", at=AT)
    reason = "myriad-accept: dcgm diag could not read: dcgmi diag: no JSON document"
    run.record(StepResult(DIAG1, False, None, reason))
    root = ET.fromstring(to_junit(run, "lab").split("\n", 1)[1])
    failure = root.find("testsuite[@name='n1']/testcase[@name='dcgm diag']/failure")
    assert failure is not None and failure.text == reason
