"""Acceptance through a fake Slurm: reserve, steps, record, drain, resume, release."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from accept_stubs import dcgm_output, nccl_output
from myriad.errors import OpsError
from myriad.ops.accept import carry_out, group_measure
from myriad.ops.accept_plan import Step
from myriad.ops.accept_state import AcceptRun
from myriad.plan.acceptance import Expected
from myriad.plan.slow_nodes import GroupTest

NVLINK = Expected("nccl all_reduce, one node", 360.0, 0.10, "catalog", "hand")


class FakeSlurm:
    """Answers each argv from a table of outputs keyed by (tool, node); records the rest."""

    def __init__(self, outputs: dict[tuple[str, str], str], fail_reserve: str = "") -> None:
        self.outputs = outputs
        self.fail_reserve = fail_reserve
        self.calls: list[tuple[str, ...]] = []
        self.drained: dict[str, str] = {}
        self.resumed: list[str] = []
        self.status: dict[tuple[str, str], int] = {}

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(tuple(argv))
        if argv[0] == "scontrol":
            if argv[1] == "create" and self.fail_reserve:
                return 1, self.fail_reserve
            return 0, ""
        node = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1]
        tool = next(a for a in argv if not a.startswith("-") and a != "srun")
        key = (tool, node)
        if key not in self.outputs:
            raise KeyError(key)
        return self.status.get(key, 0), self.outputs[key]

    def drain(self, node: str, reason: str) -> None:
        self.drained[node] = reason

    def resume(self, node: str) -> None:
        self.resumed.append(node)


def _step(test: str, node: str, tool: str, expected: Expected | None) -> Step:
    return Step(test, (node,), ("srun", "--reservation=r", f"--nodelist={node}", tool), expected)


STEPS = [
    _step("dcgm diag", "n1", "dcgmi", None),
    _step("nccl all_reduce, one node", "n1", "all_reduce_perf", NVLINK),
    _step("dcgm diag", "n2", "dcgmi", None),
    _step("nccl all_reduce, one node", "n2", "all_reduce_perf", NVLINK),
]


def _outputs(n2_busbw: float) -> dict[tuple[str, str], str]:
    return {
        ("dcgmi", "n1"): dcgm_output(),
        ("all_reduce_perf", "n1"): nccl_output(350.0),
        ("dcgmi", "n2"): dcgm_output(),
        ("all_reduce_perf", "n2"): nccl_output(n2_busbw),
    }


def test_the_slow_node_is_drained_with_its_figures(tmp_path: Path) -> None:
    slurm = FakeSlurm(_outputs(200.0))
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    result = carry_out(slurm, run, STEPS, duration_s=600)
    assert not result.passed
    assert result.drained == ("n2",)
    # gate 0.90 x 360.0 = 324.0 GB/s
    assert slurm.drained == {
        "n2": "myriad-accept: nccl all_reduce, one node 200.0 GB/s < 0.90 x 360.0 GB/s expected"
    }
    assert slurm.resumed == []
    assert slurm.calls[0][:3] == ("scontrol", "create", "reservation")
    assert slurm.calls[-1] == ("scontrol", "delete", "ReservationName=r")
    assert AcceptRun.load(run.run_dir).data["finished"] is True


def test_retest_resumes_nodes_that_now_pass(tmp_path: Path) -> None:
    slurm = FakeSlurm(_outputs(340.0))
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    result = carry_out(slurm, run, STEPS, duration_s=600, retest=True)
    assert result.passed and result.drained == ()
    assert slurm.resumed == ["n1", "n2"]


def test_a_resumed_run_skips_judged_steps_and_keeps_their_verdicts(tmp_path: Path) -> None:
    first = FakeSlurm(_outputs(200.0))
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    del first.outputs[("all_reduce_perf", "n2")]
    with pytest.raises(KeyError):  # killed at n2's nccl step: no answer for it
        carry_out(first, run, STEPS, duration_s=600)
    assert first.calls[-1] == ("scontrol", "delete", "ReservationName=r")  # released anyway
    second = FakeSlurm(_outputs(200.0), fail_reserve="Reservation request: exists")
    again = AcceptRun.load(run.run_dir)
    result = carry_out(second, again, STEPS, duration_s=600)
    steps_run = [c for c in second.calls if c[0] == "srun"]
    assert steps_run == [STEPS[3].argv]
    assert result.drained == ("n2",)


def test_a_reservation_refused_is_an_error(tmp_path: Path) -> None:
    slurm = FakeSlurm(_outputs(340.0), fail_reserve="Access/permission denied")
    run = AcceptRun.create(tmp_path, "quick", ["n1"], "r")
    with pytest.raises(OpsError, match="could not reserve the nodes under test"):
        carry_out(slurm, run, STEPS[:2], duration_s=60)
    assert not [c for c in slurm.calls if c[0] == "srun"]


def test_group_measure_reads_busbw_and_unreadable_is_zero() -> None:
    slurm = FakeSlurm({("all_reduce_perf", "n1,n2"): nccl_output(123.45)})
    measure = group_measure(slurm, "r", 8)
    assert measure(GroupTest("nccl", ("n1", "n2"), "leaf")) == pytest.approx(123.45)
    assert "--nodes=2" in slurm.calls[0] and "--gpus-per-node=8" in slurm.calls[0]
    slurm.outputs[("all_reduce_perf", "n1,n2")] = nccl_output(123.45)[:200]
    assert measure(GroupTest("nccl", ("n1", "n2"), "leaf")) == 0.0


def test_a_step_that_exits_non_zero_fails_whatever_it_printed(tmp_path: Path) -> None:
    slurm = FakeSlurm(_outputs(350.0))
    slurm.status[("all_reduce_perf", "n2")] = 137  # killed after printing a full table
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    result = carry_out(slurm, run, STEPS, duration_s=600)
    assert result.verdicts == {
        "n1": None,
        "n2": "myriad-accept: nccl all_reduce, one node exited 137",
    }
