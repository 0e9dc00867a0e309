"""Acceptance through a fake Slurm: reserve, steps, record, drain, resume, release."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from accept_stubs import dcgm_output, ib_write_bw_output, nccl_output
from myriad.errors import OpsError
from myriad.ops.accept import (
    RETEST_INTERRUPTED,
    AcceptResult,
    SearchPlan,
    carry_out,
    group_measure,
)
from myriad.ops.accept_plan import Step, judge, rdma_argv
from myriad.ops.accept_state import AcceptRun, summary_rows
from myriad.plan.acceptance import Expected, ProfileFigures
from myriad.plan.slow_nodes import AcceptNode, AcceptTopology, GroupTest

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

    def run_lanes(self, lanes: Sequence[Sequence[Sequence[str]]]) -> list[list[tuple[int, str]]]:
        self.calls.append(("lanes", str(len(lanes))))
        return [[self.run(argv) for argv in lane] for lane in lanes]

    def start(self, argv: Sequence[str]) -> object:
        self.calls.append(("start", *argv))
        return len(self.calls)

    def reap(self, handle: object) -> None:
        self.calls.append(("reap", str(handle)))

    def drain(self, node: str, reason: str) -> None:
        self.calls.append(("drain", node))
        self.drained[node] = reason

    def resume(self, node: str) -> None:
        self.calls.append(("resume", node))
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
    assert [c for c in slurm.calls if c[0] == "scontrol"][-1] == (
        "scontrol",
        "delete",
        "ReservationName=r",
    )
    assert AcceptRun.load(run.run_dir).data["finished"] is True


def test_a_wave_runs_each_nodes_steps_as_a_lane_and_skips_judged_ones(tmp_path: Path) -> None:
    slurm = FakeSlurm(_outputs(200.0))
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    run.record(judge(STEPS[0], dcgm_output()))  # n1's DCGM judged before a resume
    result = carry_out(slurm, run, [tuple(STEPS)], duration_s=600)
    # One call for the wave, two lanes: n1 with its NVLink step only, n2 with both.
    lanes = [c for c in slurm.calls if c[0] in ("lanes", "srun")]
    assert lanes[0] == ("lanes", "2")
    assert [c[2] for c in lanes[1:]] == ["--nodelist=n1", "--nodelist=n2", "--nodelist=n2"]
    assert result.drained == ("n2",) and len(run.data["steps"]) == 4


def test_retest_resumes_nodes_that_now_pass(tmp_path: Path) -> None:
    slurm = FakeSlurm(_outputs(340.0))
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    result = carry_out(slurm, run, STEPS, duration_s=600, retest=True)
    assert result.passed and result.drained == () and result.resumed == ("n1", "n2")
    # Slurm runs no step on a drained node: both come back inside the reservation, before
    # the first step, and only once.
    assert slurm.calls[:3] == [slurm.calls[0], ("resume", "n1"), ("resume", "n2")]
    assert slurm.calls[0][:3] == ("scontrol", "create", "reservation")
    assert slurm.resumed == ["n1", "n2"]


def test_a_retest_drains_again_what_fails_and_everything_if_it_is_interrupted(
    tmp_path: Path,
) -> None:
    slurm = FakeSlurm(_outputs(200.0))
    run = AcceptRun.create(tmp_path / "a", "quick", ["n1", "n2"], "r")
    result = carry_out(slurm, run, STEPS, duration_s=600, retest=True)
    # n1 passes and stays in service; n2, slow, goes out again with its figures.
    assert result.resumed == ("n1",) and set(slurm.drained) == {"n2"}
    assert slurm.drained["n2"].startswith("myriad-accept: nccl all_reduce, one node 200.0 GB/s")

    killed = FakeSlurm(_outputs(340.0))
    del killed.outputs[("all_reduce_perf", "n2")]
    run = AcceptRun.create(tmp_path / "b", "quick", ["n1", "n2"], "r")
    with pytest.raises(KeyError):
        carry_out(killed, run, STEPS, duration_s=600, retest=True)
    assert killed.drained == {"n1": RETEST_INTERRUPTED, "n2": RETEST_INTERRUPTED}
    # Its --resume brings them back in for the steps left, and returns both once they pass.
    again = FakeSlurm(_outputs(340.0))
    result = carry_out(again, AcceptRun.load(run.run_dir), STEPS, duration_s=600, retest=True)
    assert again.resumed == ["n1", "n2"] and result.resumed == ("n1", "n2")
    # A run killed outright left them in service inside its reservation: not resumed twice
    # (scontrol refuses to resume an idle node).
    killed_outright = AcceptRun.create(tmp_path / "c", "quick", ["n1", "n2"], "r")
    killed_outright.data["retest_in_service"] = True
    killed_outright.save()
    last = FakeSlurm(_outputs(340.0))
    carry_out(last, killed_outright, STEPS, duration_s=600, retest=True)
    assert last.resumed == []


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
    assert "--mpi=pmix" in slurm.calls[0]  # one MPI job over the group, not a test per node
    slurm.outputs[("all_reduce_perf", "n1")] = nccl_output(300.0)
    assert measure(GroupTest("nvlink", ("n1",), "node")) == pytest.approx(300.0)
    assert "--mpi=pmix" not in slurm.calls[-1]
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


def _no_wait() -> None:
    pass


def test_ib_write_bw_starts_its_server_first_and_reaps_it_after(tmp_path: Path) -> None:
    rdma = Expected("ib_write_bw, one port", 48.0, 0.10, "catalog", "hand")
    server, client = rdma_argv("r", "mlx5_0", "n1", "n2")
    step = Step("rdma rail 0", ("n1", "n2"), client, rdma, server)
    # 200 Gb/s = 25.0 GB/s < 0.90 x 48.0 = 43.2 GB/s
    slurm = FakeSlurm({("ib_write_bw", "n1"): ib_write_bw_output(200.0)})
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    result = carry_out(slurm, run, [step], duration_s=600, settle=_no_wait)
    assert slurm.calls[1:4] == [("start", *server), client, ("reap", "2")]
    assert server[-4:] == ("ib_write_bw", "--report_gbits", "-d", "mlx5_0")
    assert "--nodelist=n2" in server and "--nodelist=n1" in client and client[-1] == "n2"
    assert result.drained == ("n1",)
    assert slurm.drained["n1"] == (
        "myriad-accept: rdma rail 0 25.0 GB/s < 0.90 x 48.0 GB/s expected"
    )


def test_the_server_is_reaped_when_the_client_raises(tmp_path: Path) -> None:
    server, client = rdma_argv("r", "mlx5_0", "n1", "n2")
    step = Step("rdma rail 0", ("n1", "n2"), client, None, server)
    slurm = FakeSlurm({})  # no answer for the client: it raises
    run = AcceptRun.create(tmp_path, "quick", ["n1", "n2"], "r")
    with pytest.raises(KeyError):
        carry_out(slurm, run, [step], duration_s=600, settle=_no_wait)
    assert [c[0] for c in slurm.calls] == ["scontrol", "start", "srun", "reap", "scontrol"]


# The slow-node search through the fake: four nodes under one leaf, two rails. Figures by hand:
# all_reduce 100 GB/s (gate 90), NVLink 360 (gate 324), a port 48 (gate 43.2).
ALLREDUCE = Expected("nccl all_reduce", 100.0, 0.10, "plan", "hand")
PORT = Expected("ib_write_bw, one port", 48.0, 0.10, "catalog", "hand")
GPU = ProfileFigures("gpu", 8, 1, NVLINK, PORT, ALLREDUCE, None)
TOPO = AcceptTopology(
    tuple(AcceptNode(n, "gpu", 0, "0/a", ("leaf-a", "leaf-b")) for n in ("n1", "n2", "n3", "n4")),
    rails=2,
)
DEVICES = ("mlx5_0", "mlx5_1")


class FabricFake(FakeSlurm):
    """Measures from faults: a slow node's NVLink and every ring it is in, a slow link's
    ib_write_bw on rail 1 (mlx5_1) and every ring it is in (as plan/slow_nodes.FaultModel
    does)."""

    def __init__(self, slow_node: str = "", slow_link: str = "") -> None:
        super().__init__({})
        self.slow_node, self.slow_link = slow_node, slow_link

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(tuple(argv))
        if argv[0] == "scontrol":
            return 0, ""
        nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1].split(",")
        if "ib_write_bw" in argv:
            slow = "mlx5_1" in argv and self.slow_link in (nodes[0], argv[-1])
            return 0, ib_write_bw_output(100.0 if slow else 384.0)  # 12.5 or 48.0 GB/s
        if "dcgmi" in argv:
            return 0, dcgm_output()
        if len(nodes) == 1:
            return 0, nccl_output(150.0 if self.slow_node in nodes else 360.0)
        ring_slow = bool({self.slow_node, self.slow_link} & set(nodes))
        return 0, nccl_output(50.0 if ring_slow else 100.0)


def _search_run(tmp_path: Path, slurm: FabricFake) -> tuple[AcceptRun, AcceptResult]:
    steps = [_step("dcgm diag", n, "dcgmi", None) for n in ("n1", "n2", "n3", "n4")]
    run = AcceptRun.create(tmp_path, "full", ["n1", "n2", "n3", "n4"], "r")
    plan = SearchPlan(TOPO, {"gpu": GPU}, 8, DEVICES)
    return run, carry_out(slurm, run, steps, duration_s=600, search=plan, settle=_no_wait)


def test_full_names_the_slow_node_with_expected_and_measured(tmp_path: Path) -> None:
    slurm = FabricFake(slow_node="n3")
    run, result = _search_run(tmp_path, slurm)
    assert result.drained == ("n3",)
    assert slurm.drained["n3"].startswith("myriad-accept: search: node n3: ")
    assert "150 GB/s of 360 expected (0.42, gate 324)" in slurm.drained["n3"]
    row = summary_rows(run)[0]
    assert (row["test"], row["node"], row["expected_gbs"], row["measured_gbs"]) == (
        "search: node",
        "n3",
        360.0,
        pytest.approx(150.0),
    )
    # Rounds: the leaf screen, two halvings, the diagnosis (one leaf: no upper tiers).
    assert run.data["search"]["rounds"] == 4
    # The search ran inside the reservation, before it was released.
    assert [c for c in slurm.calls if c[0] == "scontrol"][-1] == (
        "scontrol",
        "delete",
        "ReservationName=r",
    )
    assert any("all_reduce_perf" in c and "--nodes=4" in c for c in slurm.calls)


def test_full_names_a_slow_link_and_its_rail(tmp_path: Path) -> None:
    slurm = FabricFake(slow_link="n2")
    run, result = _search_run(tmp_path, slurm)
    assert result.drained == ("n2",)
    assert slurm.drained["n2"].startswith("myriad-accept: search: link n2 rail 1 -> leaf-b: ")
    row = summary_rows(run)[0]
    assert (row["expected_gbs"], row["measured_gbs"]) == (48.0, pytest.approx(12.5))
    # Each rail's ib_write_bw: server on the cleared partner first, then the client, reaped.
    starts = [i for i, c in enumerate(slurm.calls) if c[0] == "start"]
    assert [slurm.calls[i][-1] for i in starts] == ["mlx5_0", "mlx5_1"]
    assert all(slurm.calls[i + 1][-1] == slurm.calls[i][3].split("=")[1] for i in starts)
    assert all(slurm.calls[i + 2][0] == "reap" for i in starts)


def test_full_passes_a_healthy_fabric_and_a_resume_does_not_search_again(
    tmp_path: Path,
) -> None:
    slurm = FabricFake()
    run, result = _search_run(tmp_path, slurm)
    assert result.passed and result.drained == ()
    assert run.data["search"] == {"rounds": 1, "tests": 1, "findings": 0}
    again = FabricFake(slow_node="n1")
    plan = SearchPlan(TOPO, {"gpu": GPU}, 8, DEVICES)
    carry_out(again, AcceptRun.load(run.run_dir), [], duration_s=600, search=plan)
    assert [c[0] for c in again.calls] == ["scontrol", "scontrol"]


def test_a_slow_spine_fails_the_run_but_drains_no_node(tmp_path: Path) -> None:
    # Two leaf blocks: a ring across them crosses the spines, which run at half speed.
    topo = AcceptTopology(
        tuple(
            AcceptNode(n, "gpu", 0, block, (block,))
            for n, block in (("n1", "0/a"), ("n2", "0/a"), ("n3", "0/b"), ("n4", "0/b"))
        ),
        rails=1,
    )

    class Spines(FabricFake):
        def run(self, argv: Sequence[str]) -> tuple[int, str]:
            if "--nodelist=n1,n3" in argv:
                self.calls.append(tuple(argv))
                return 0, nccl_output(50.0)
            return super().run(argv)

    slurm = Spines()
    run = AcceptRun.create(tmp_path, "full", ["n1", "n2", "n3", "n4"], "r")
    plan = SearchPlan(topo, {"gpu": GPU}, 8, ("mlx5_0",))
    result = carry_out(slurm, run, [], duration_s=600, search=plan, settle=_no_wait)
    assert result.drained == () and not result.passed
    assert result.elsewhere == (
        "myriad-accept: search: spines spines of island 0: nccl all_reduce: 50 GB/s of 100 "
        "expected (0.50, gate 90)",
    )


def test_closing_steps_run_after_the_search(tmp_path: Path) -> None:
    # The port counters of `full` are read again after the search's group tests, which carry
    # the most traffic: a closing step's srun comes after the last group test's.
    slurm = FabricFake()
    run = AcceptRun.create(tmp_path, "full", ["n1", "n2", "n3", "n4"], "r")
    plan = SearchPlan(TOPO, {"gpu": GPU}, 8, DEVICES)
    closing = [_step("closing", "n1", "dcgmi", None)]
    carry_out(slurm, run, [], duration_s=600, search=plan, settle=_no_wait, closing=closing)
    sruns = [c for c in slurm.calls if c[0] == "srun"]
    assert "all_reduce_perf" in sruns[-2] and "dcgmi" in sruns[-1]
    assert "closing@n1" in run.data["steps"]
