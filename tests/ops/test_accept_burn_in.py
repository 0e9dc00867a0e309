"""The burn-in: its cycle of steps, the GPU sample's judgment, cycles until the time is spent
(a fake clock), a resumed burn-in counting the time already spent, and `myriad accept --level
burn-in` through the fake controller (tests/accept_fakes.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from accept_fakes import NODES, Controller, gpu_sample
from accept_stubs import gpu_twin_spec, nccl_output
from myriad.ops.accept import burn_in_steps, carry_out
from myriad.ops.accept_cluster import accept
from myriad.ops.accept_plan import Step, burn_in_cycle, held_open, judge
from myriad.ops.accept_state import AcceptRun
from myriad.plan.acceptance import Expected, ProfileFigures
from myriad.plan.slow_nodes import AcceptNode, AcceptTopology
from myriad.spec.accept import Accept

ROOT = Path(__file__).resolve().parents[2]
RING = Expected("nccl all_reduce", 100.0, 0.10, "plan", "hand")
GPU = ProfileFigures("gpu", 8, 1, None, None, RING, None)
TOPO = AcceptTopology(
    tuple(
        AcceptNode(n, "gpu", 0, block, (block,))
        for n, block in (("n1", "0/a"), ("n2", "0/a"), ("n3", "0/a"), ("n4", "0/b"))
    ),
    rails=1,
)


def test_a_cycle_stresses_every_node_loads_each_leaf_and_samples_after() -> None:
    accept = Accept(burn_in_dcgm_level=4)
    steps = burn_in_cycle(2, ["n1", "n2", "n3", "n4"], TOPO, {"gpu": GPU}, accept, "r")
    assert [(s.test, s.nodes) for s in steps] == [
        *[("burn-in 2: dcgm diag, sampled", (n,)) for n in ("n1", "n2", "n3", "n4")],
        ("burn-in 2: nccl all_reduce", ("n1", "n2", "n3")),  # n4 alone under its leaf: none
        *[("burn-in 2: gpu sample", (n,)) for n in ("n1", "n2", "n3", "n4")],
    ]
    shell, flag, script = steps[0].argv[-3:]
    assert (shell, flag) == ("sh", "-c") and "dcgmi diag -r 4 -j;" in script
    assert "nvidia-smi --query-gpu=timestamp,index,temperature.gpu," in script
    assert "--format=csv >>" in script and "sleep 5;" in script
    ring = steps[4]
    assert ring.group and ring.expected == RING and "--nodes=3" in ring.argv
    assert "--mpi=pmix" in ring.argv and "--mpi=pmix" not in steps[0].argv
    assert steps[-1].argv[-3:] == held_open("nvidia-smi -q -x")


def test_the_gpu_sample_fails_a_narrow_link_and_reads_damage_as_failure() -> None:
    step = Step("burn-in 0: gpu sample", ("n1",), (), None)
    assert judge(step, gpu_sample()).passed
    narrow = judge(step, gpu_sample(narrow=True))
    assert narrow.reason == "myriad-accept: burn-in 0: gpu sample failed: GPU 0 PCIe x8 of x16"
    cut = judge(step, gpu_sample()[:400])
    assert not cut.passed and "could not read" in str(cut.reason)


def _clock(times: list[float]) -> Iterator[float]:
    yield from times


def test_cycles_run_until_the_time_is_spent_and_a_resume_counts_it(tmp_path: Path) -> None:
    ctl = Controller()
    nodes = ["node01", "node02"]
    topo = AcceptTopology(tuple(AcceptNode(n, "gpu", 0, "0/a", ("a",)) for n in nodes), rails=1)
    figures = {"gpu": ProfileFigures("gpu", 8, 1, None, None, RING, None)}

    def cycle(number: int) -> tuple[Step, ...]:
        return burn_in_cycle(number, nodes, topo, figures, Accept(), "r")

    run = AcceptRun.create(tmp_path, "burn-in", nodes, "r")
    # Started at 0; after cycle 0 it is 300 s (< 600: again), after cycle 1 it is 700.
    ticks = _clock([0.0, 300.0, 700.0])
    result = carry_out(
        ctl, run, burn_in_steps(run, cycle, 600, lambda: next(ticks)), duration_s=3600
    )
    assert sorted({s["test"] for s in run.data["steps"].values()}) == [
        f"burn-in {n}: {t}"
        for n in (0, 1)
        for t in ("dcgm diag, sampled", "gpu sample", "nccl all_reduce")
    ]
    assert result.passed and run.data["burn_in_started"] == 0.0
    # A run killed in cycle 1 finishes that cycle on resume, but begins no other: its time,
    # counted from the first start, is spent.
    again = AcceptRun.load(run.run_dir)
    again.data["finished"] = False
    del again.data["steps"]["burn-in 1: gpu sample@node02"]
    late = Controller()
    carry_out(late, again, burn_in_steps(again, cycle, 600, lambda: 10_000.0), duration_s=60)
    assert [s for s in late.steps if s[0] == "srun"] == [cycle(1)[-1].argv]


def test_accept_burn_in_drains_a_narrow_link_and_fails_a_slow_leaf_without_draining(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    spec = tmp_path / "cluster.yaml"
    spec.write_text(gpu_twin_spec((ROOT / "inventories/local/cluster.yaml").read_text(), "b"))

    class SlowRing(Controller):
        """The first all_reduce over the leaf runs 100 of 214.2 GB/s, below its gate."""

        first_ring = True

        def run(self, argv: Sequence[str]) -> tuple[int, str]:
            if "--nodelist=node01,node02,node03,node04" in argv and self.first_ring:
                self.first_ring = False
                self.steps.append(tuple(argv))
                return 0, nccl_output(100.0)
            return super().run(argv)

    ctl = SlowRing(narrow="node03")
    # The burn-in starts at 0; every later look finds its 4 hours (the default) spent.
    looks: list[float] = []

    def clock() -> float:
        looks.append(10**6 if looks else 0.0)
        return looks[-1]

    outcome = accept(
        spec, "burn-in", slurm=ctl.slurm(), commands=ctl, settle=lambda: None,
        clock=clock,
    )  # fmt: skip
    assert outcome.run.data["nodes"] == list(NODES)
    assert ctl.drained == {
        "node03": "myriad-accept: burn-in 0: gpu sample failed: GPU 0 PCIe x8 of x16"
    }
    assert outcome.result.elsewhere == (
        "myriad-accept: burn-in 0: nccl all_reduce 100.0 GB/s < 0.90 x 214.2 GB/s expected",
    )
    # The level's own diagnostic on each node, then cycle 0's with the GPUs sampled, both at
    # level 4 (the default).
    dcgm = [s for s in ctl.steps if "dcgmi" in s]
    sampled = [s for s in ctl.steps if "dcgmi diag -r 4 -j;" in s[-1]]
    assert len(dcgm) == 4 and all(s[-2] == "4" for s in dcgm) and len(sampled) == 4
    assert outcome.run.data["search"] is not None
