"""Which steps each acceptance level runs, the drain reason, and the nodes under test."""

from __future__ import annotations

import subprocess
import time

import pytest

from accept_stubs import dcgm_output, ib_write_bw_output, nccl_output
from myriad.ops.accept_plan import (
    IO_DRAIN_S,
    Step,
    drain_reason,
    held_open,
    is_accept_drain,
    judge,
    node_steps,
    release_argv,
    reservation_argv,
    reservation_name,
    select_nodes,
    waves,
)
from myriad.plan.acceptance import Expected, ProfileFigures
from myriad.plan.slow_nodes import AcceptNode, AcceptTopology
from myriad.spec.accept import Accept

NVLINK = Expected("nccl all_reduce, one node", 360.0, 0.10, "catalog", "hand")
RDMA = Expected("ib_write_bw, one port", 48.0, 0.10, "catalog", "hand")
GPU = ProfileFigures("gpu", 8, 2, NVLINK, RDMA, None, None)
ONE_GPU = ProfileFigures("one", 1, 0, None, None, None, None)


def _topo() -> AcceptTopology:
    # n1-n3 under one leaf group, n4 alone under another, n5 a one-GPU node without NICs.
    def node(name: str, block: str, profile: str = "gpu") -> AcceptNode:
        return AcceptNode(name, profile, 0, block, (block, block))

    nodes = (node("n1", "0/a"), node("n2", "0/a"), node("n3", "0/a"), node("n4", "0/b"))
    return AcceptTopology((*nodes, node("n5", "0/c", "one")), rails=2)


FIGURES = {"gpu": GPU, "one": ONE_GPU}


def _tests(steps: tuple[Step, ...], node: str) -> list[str]:
    return [s.test for s in steps if s.nodes[0] == node]


def test_quick_runs_dcgm_nvlink_and_every_rail_to_a_leaf_partner() -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    steps = node_steps("quick", nodes, _topo(), FIGURES, Accept(), "r", ("mlx5_0", "mlx5_1"))
    assert _tests(steps, "n1") == [
        "dcgm diag",
        "nccl all_reduce, one node",
        "rdma rail 0",
        "rdma rail 1",
        "gpu sample",
    ]
    # n3 pairs back with n1 (the ring of its leaf group); n4 has no partner in its leaf.
    assert [s.nodes for s in steps if s.nodes[0] == "n3" and s.test.startswith("rdma")] == [
        ("n3", "n1"),
        ("n3", "n1"),
    ]
    assert _tests(steps, "n4") == ["dcgm diag", "nccl all_reduce, one node", "gpu sample"]
    # One GPU: no NVLink; no NIC: no RDMA.
    assert _tests(steps, "n5") == ["dcgm diag", "gpu sample"]
    first = steps[0].argv
    assert first == (
        "srun", "--reservation=r", "--nodelist=n1", "--nodes=1", "--ntasks-per-node=1",
        "--gpus-per-node=8", "dcgmi", "diag", "-r", "2", "-j",
    )  # fmt: skip
    assert [s.expected for s in steps if s.nodes[0] == "n1"] == [None, NVLINK, RDMA, RDMA, None]
    assert steps[-1].argv == (
        "srun", "--reservation=r", "--nodelist=n5", "--nodes=1", "--ntasks-per-node=1",
        "sh", "-c", "nvidia-smi -q -x; s=$?; sleep 1; exit $s",
    )  # fmt: skip
    rail1 = [s.argv for s in steps if s.nodes[0] == "n1" and s.test == "rdma rail 1"]
    assert rail1 == [
        ("srun", "--reservation=r", "--nodelist=n1", "--nodes=1", "--ntasks-per-node=1",
         "ib_write_bw", "--report_gbits", "-d", "mlx5_1", "n2"),
    ]  # fmt: skip
    # Its server side: the same tool without a host, on the partner, started first.
    server = [s.server for s in steps if s.nodes[0] == "n1" and s.test == "rdma rail 1"]
    assert server == [
        ("srun", "--reservation=r", "--nodelist=n2", "--nodes=1", "--ntasks-per-node=1",
         "ib_write_bw", "--report_gbits", "-d", "mlx5_1"),
    ]  # fmt: skip
    assert all(s.server == () for s in steps if not s.test.startswith("rdma"))


def test_a_rail_without_a_device_name_gets_no_rdma_step() -> None:
    steps = node_steps("quick", ["n1", "n2"], _topo(), FIGURES, Accept(), "r", ("mlx5_0",))
    assert _tests(steps, "n1") == [
        "dcgm diag",
        "nccl all_reduce, one node",
        "rdma rail 0",
        "gpu sample",
    ]


def test_levels_pick_their_dcgm_level_and_leave_group_tests_to_the_search() -> None:
    accept = Accept(quick_dcgm_level=1, full_dcgm_level=3, burn_in_dcgm_level=4)
    for level, run_level in (("quick", "1"), ("full", "3"), ("burn-in", "4")):
        steps = node_steps(level, ["n1", "n2"], _topo(), FIGURES, accept, "r")
        diag = [s.argv[s.argv.index("-r") + 1] for s in steps if s.test == "dcgm diag"]
        assert diag == [run_level, run_level]
        if level == "full":
            tests = ["dcgm diag", "dcgm diag", "gpu sample", "gpu sample"]
            assert [s.test for s in steps] == tests
        if level == "burn-in":  # its cycles sample
            assert [s.test for s in steps] == ["dcgm diag", "dcgm diag"]


def test_waves_put_each_nodes_own_steps_beside_the_others_and_pairs_alone() -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    steps = node_steps("quick", nodes, _topo(), FIGURES, Accept(), "r", ("mlx5_0",))
    planned = waves(steps)
    # n1..n4: dcgm and nccl (8 GPUs), n5: dcgm only (one GPU): 4 x 2 + 1 = 9 own steps in
    # the first wave; then the rdma pairs one by one (n1>n2, n2>n3, n3>n1 in the first
    # leaf; n4 has no partner), then the five samples as a second wave.
    assert [len(w) if isinstance(w, tuple) else w.test for w in planned] == [
        9,
        "rdma rail 0",
        "rdma rail 0",
        "rdma rail 0",
        5,
    ]
    assert waves(()) == ()


def test_a_partner_must_be_under_test_too() -> None:
    steps = node_steps("quick", ["n1", "n2"], _topo(), FIGURES, Accept(), "r", ("d0",))
    assert {s.nodes for s in steps if s.test == "rdma rail 0"} == {("n1", "n2"), ("n2", "n1")}


def test_drain_reason_names_the_test_and_the_figures() -> None:
    step = Step("nccl all_reduce, one node", ("n1",), (), NVLINK)
    # gate 0.90 x 360.0 = 324.0; 250.04 shown at one decimal.
    assert drain_reason(step, 250.04) == (
        "myriad-accept: nccl all_reduce, one node 250.0 GB/s < 0.90 x 360.0 GB/s expected"
    )
    dcgm = Step("dcgm diag", ("n1",), (), None)
    assert drain_reason(dcgm, None, ["Memtest", "PCIe"]) == (
        "myriad-accept: dcgm diag failed: Memtest, PCIe"
    )
    assert drain_reason(dcgm, None) == "myriad-accept: dcgm diag failed: no result"
    assert is_accept_drain(drain_reason(dcgm, None))
    assert not is_accept_drain("myriad-health: xid 79")
    assert not is_accept_drain(None)


def test_select_nodes_all_drained_and_limit() -> None:
    compute = ["n1", "n2", "n3"]
    reasons = {"n1": "myriad-accept: rdma rail 0 10.0 GB/s", "n2": "myriad-health: xid", "n3": None}
    assert select_nodes(compute, reasons) == ("n1", "n2", "n3")
    assert select_nodes(compute, reasons, nodes_from="drained") == ("n1",)
    assert select_nodes(compute, reasons, limit=["n3", "n2"]) == ("n2", "n3")
    assert select_nodes(compute, reasons, nodes_from="drained", limit=["n3"]) == ()
    with pytest.raises(ValueError, match="not compute nodes: ctl1"):
        select_nodes(compute, reasons, limit=["ctl1"])


def test_reservation_name() -> None:
    assert (
        reservation_name(Accept(reservation_prefix="acc"), "20261204T2300") == "acc-20261204T2300"
    )


# --- judging a step's output, with the stand-ins' outputs (real captures, figures set) -----


def test_judge_nccl_against_the_gate() -> None:
    step = Step("nccl all_reduce, one node", ("n1",), (), NVLINK)
    # Gate 0.90 x 360.0 = 324.0 GB/s. The stand-in sets out-of-place busbw; the in-place
    # figure scales alike (337.35/338.82 of it), so the better one is out of place.
    ok = judge(step, nccl_output(330.0))
    assert ok.passed and ok.reason is None
    assert ok.measured_gbs == pytest.approx(330.0)
    assert ok.ratio == pytest.approx(330.0 / 360.0)
    slow = judge(step, nccl_output(300.0))
    assert not slow.passed
    assert slow.reason == (
        "myriad-accept: nccl all_reduce, one node 300.0 GB/s < 0.90 x 360.0 GB/s expected"
    )


def test_judge_rdma_in_gb_per_second() -> None:
    step = Step("rdma rail 0", ("n1", "n2"), (), RDMA)
    # 400 Gb/s is 50 GB/s, above the gate 0.90 x 48 = 43.2; 320 Gb/s is 40 GB/s, below.
    assert judge(step, ib_write_bw_output(400.0)).measured_gbs == pytest.approx(50.0)
    assert judge(step, ib_write_bw_output(400.0)).passed
    slow = judge(step, ib_write_bw_output(320.0))
    assert not slow.passed and slow.measured_gbs == pytest.approx(40.0)


def test_judge_dcgm_by_its_own_verdict() -> None:
    step = Step("dcgm diag", ("n1",), (), None)
    assert judge(step, dcgm_output()).passed
    failed = judge(step, dcgm_output("Persistence Mode"))
    assert not failed.passed and failed.ratio is None
    assert failed.reason == "myriad-accept: dcgm diag failed: Persistence Mode"


@pytest.mark.parametrize("test", ["nccl all_reduce, one node", "rdma rail 0", "dcgm diag"])
def test_output_cut_short_never_passes(test: str) -> None:
    expected = None if test == "dcgm diag" else NVLINK
    full = {"dcgm diag": dcgm_output(), "rdma rail 0": ib_write_bw_output(400.0)}.get(
        test, nccl_output(350.0)
    )
    step = Step(test, ("n1",), (), expected)
    for text in ("", full[: len(full) // 2]):
        result = judge(step, text)
        assert not result.passed
        assert result.reason is not None and "could not read" in result.reason


def test_reservation_commands() -> None:
    # 3601 s is 60 minutes and one second: 61 minutes, rounded up so the run never outlives it.
    assert reservation_argv("myriad-accept-1", ["n1", "n2"], 3601) == (
        "scontrol", "create", "reservation", "ReservationName=myriad-accept-1",
        "Nodes=n1,n2", "StartTime=now", "Duration=61", "Users=root", "Flags=MAINT,IGNORE_JOBS",
    )  # fmt: skip
    assert reservation_argv("r", ["n1"], 1)[6] == "Duration=1"
    assert release_argv("r") == ("scontrol", "delete", "ReservationName=r")


def test_a_held_open_shell_keeps_the_output_and_the_status_and_waits_before_it_exits() -> None:
    """`held_open` for real in sh: what the command printed, its exit status, and the wait
    that lets slurmstepd forward the tail (see IO_DRAIN_S)."""
    started = time.monotonic()
    done = subprocess.run(
        list(held_open("printf 'a\\nb'; false")), capture_output=True, text=True, check=False
    )
    assert (done.stdout, done.returncode) == ("a\nb", 1)
    assert time.monotonic() - started >= IO_DRAIN_S
