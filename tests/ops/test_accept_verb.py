"""`myriad accept` as a library call on a resolved cluster: node choice from Slurm's states,
the run folder under the cluster's state, its lock, the steps through a fake controller, and
`SlurmCommands` over real processes.

The cluster is the local twin's spec with its compute nodes given eight H100 GPUs and eight
ConnectX-7 ports (no Docker here). Figures by hand from the catalog: NVLink ring busbw
0.8 x 900 / 2 = 360 GB/s (gate 324); a port 0.85 x 31.5 = 26.775 GB/s = 214.2 Gb/s (gate
24.1); all_reduce over nodes 8 x 26.775 = 214.2 GB/s (gate 192.78).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from accept_fakes import NODES, Controller
from accept_stubs import gpu_twin_spec
from myriad.bringup.lock import hold_cluster_lock
from myriad.errors import ClusterBusy, OpsError, OpsInputError
from myriad.ops import nodes
from myriad.ops.accept import UNCLEARED
from myriad.ops.accept_cluster import AcceptOutcome, SlurmCommands, accept, retest_repaired
from myriad.ops.accept_plan import Level
from myriad.ops.slurm import Slurm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    text = gpu_twin_spec((ROOT / "inventories" / "local" / "cluster.yaml").read_text(), "acc-twin")
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def _accept(spec: Path, ctl: Controller, level: Level = "quick", **kw: Any) -> AcceptOutcome:
    return accept(
        spec,
        level,
        slurm=ctl.slurm(),
        commands=ctl,
        settle=lambda: None,
        **kw,
    )


def test_quick_drains_the_node_whose_nvlink_is_slow(spec: Path, tmp_path: Path) -> None:
    ctl = Controller(slow="node03")
    outcome = _accept(spec, ctl)
    assert ctl.drained == {
        "node03": "myriad-accept: nccl all_reduce, one node 150.0 GB/s < 0.90 x 360.0 GB/s expected"
    }
    result = outcome.result
    assert not result.passed and result.drained == ("node03",)
    run_dir = outcome.run.run_dir
    assert run_dir.parent == tmp_path / "state" / "acc-twin" / "runs"
    assert run_dir.name.endswith("-accept")
    record = json.loads((run_dir / "accept.json").read_text())
    assert record["finished"] and record["level"] == "quick" and record["nodes"] == list(NODES)
    # dcgm, NVLink, 8 rails and a GPU sample per node; each rail's server started before
    # its client.
    srun = [s for s in ctl.steps if s[0] == "srun"]
    assert len(srun) == 4 * (1 + 1 + 8 + 1)
    # The nodes' own steps side by side (DCGM and NVLink, one lane a node), the rails one
    # by one, then the samples side by side.
    assert ctl.waves == [list(NODES), list(NODES)]
    first = ctl.steps.index(next(s for s in ctl.steps if s[0] == "start"))
    assert ctl.steps[first + 1][-1] == ctl.steps[first][3].split("=")[1]
    assert ctl.steps[first + 2] == ("reap",)
    assert record["reservation"].startswith("myriad-accept-")
    document = outcome.to_dict()
    assert document["steps"][0]["node"] == "node03" and not document["steps"][0]["passed"]


def test_full_finds_the_slow_node_then_drained_retest_resumes_it(spec: Path) -> None:
    ctl = Controller(slow="node02")
    outcome = _accept(spec, ctl, "full")
    assert list(ctl.drained) == ["node02"]
    # Its groups ran 100 of 214.2 GB/s; the diagnosis names it by NVLink, 150 of 360.
    assert ctl.drained["node02"] == (
        "myriad-accept: search: node node02: nccl all_reduce, one node: 150 GB/s of 360 "
        "expected (0.42, gate 324)"
    )
    groups = [s for s in ctl.steps if "all_reduce_perf" in s and "--nodes=1" not in s]
    assert any("--nodelist=node01,node02,node03,node04" in s for s in groups)
    assert outcome.run.data["search"]["rounds"] >= 3
    # Repaired: only the node accept drained is tested again, and resumed when it passes.
    again = Controller(reasons={"node02": ctl.drained["node02"], "node04": "myriad: drain by x"})
    retest = _accept(spec, again, "quick", nodes_from="drained")
    assert retest.run.data["nodes"] == ["node02"]
    assert retest.result.passed and again.resumed == ["node02"]


def test_full_cannot_clear_a_lone_drained_node_and_does_not_resume_it(spec: Path) -> None:
    # One node under test has no cleared partner: NVLink passes, no rail can be tested, so
    # the search leaves it unresolved; the run fails. The node was in service only inside the
    # test's reservation (Slurm runs no step on a drained node) and is drained again, saying
    # why.
    reason = "myriad-accept: search: node node02: earlier"
    ctl = Controller(reasons={"node02": reason})
    outcome = _accept(spec, ctl, "full", nodes_from="drained")
    assert outcome.run.data["nodes"] == ["node02"]
    assert not outcome.result.passed and outcome.result.resumed == ()
    assert ctl.resumed == ["node02"]
    assert ctl.drained == {"node02": UNCLEARED}
    assert outcome.result.elsewhere == (
        "myriad-accept: search: unresolved node02: no cleared partner; NVLink and every rail "
        "pass alone",
    )


def test_resume_continues_the_unfinished_run_at_its_level(spec: Path) -> None:
    class Killed(Controller):
        def run(self, argv: Sequence[str]) -> tuple[int, str]:
            if "--nodelist=node02" in argv and "dcgmi" in argv:
                raise KeyboardInterrupt
            return super().run(argv)

    with pytest.raises(KeyboardInterrupt):
        _accept(spec, Killed())
    ctl = Controller()
    outcome = _accept(spec, ctl, "full", resume=True)  # the level is the run's, not this one
    assert outcome.run.data["level"] == "quick"
    # The wave of own steps the kill cut short runs again whole: its answers come back
    # together, so none of its steps was judged (node01's DCGM included).
    dcgm = [s for s in ctl.steps if "dcgmi" in s]
    assert [s[2] for s in dcgm] == [f"--nodelist={n}" for n in NODES]
    assert ctl.waves[0] == list(NODES)
    assert outcome.result.passed


def test_bad_input_and_a_busy_cluster(spec: Path, tmp_path: Path) -> None:
    with pytest.raises(OpsInputError, match="not compute nodes: node09"):
        _accept(spec, Controller(), limit=["node09"])
    with pytest.raises(OpsInputError, match="no compute node is drained by accept"):
        _accept(spec, Controller(), nodes_from="drained")
    with pytest.raises(OpsInputError, match="no unfinished acceptance"):
        _accept(spec, Controller(), resume=True)
    with hold_cluster_lock(tmp_path / "state" / "acc-twin", "roll"), pytest.raises(ClusterBusy):
        _accept(spec, Controller())


def test_nodes_without_gpus_are_refused_before_a_run_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    plain = ROOT / "inventories" / "local" / "cluster.yaml"  # CPU-only containers
    ctl = Controller()
    with pytest.raises(OpsInputError, match="node01, node02, node03: not a GPU node"):
        accept(plain, "quick", slurm=ctl.slurm(), commands=ctl)
    assert not (tmp_path / "state" / "local" / "runs").exists() and ctl.steps == []


def test_slurm_commands_return_stderr_time_out_and_reap(tmp_path: Path) -> None:
    commands = SlurmCommands([], Slurm(["ctl"]), step_timeout_s=0.5, reap_wait_s=0.2)
    assert commands.run(["sh", "-c", "echo out"]) == (0, "out\n")
    assert commands.run(["sh", "-c", "echo out; echo why >&2; exit 3"]) == (3, "out\nwhy\n")
    status, text = commands.run(["sleep", "5"])
    assert status == 124 and text.startswith("timed out after 0.5 s")
    handle = commands.start(["sleep", "30"])
    began = time.monotonic()
    commands.reap(handle)
    assert isinstance(handle, subprocess.Popen) and handle.returncode is not None
    assert time.monotonic() - began < 5


def test_a_node_back_from_repair_returns_only_through_acceptance(spec: Path) -> None:
    # `myriad resume` on a node remediation sent for repair: a quick acceptance of that node
    # alone (not node04, drained by a person), drained again with the figure when it fails,
    # back in service when it passes.
    repair = "myriad-remedy: gpu.count: needs hardware"
    reasons = {"node02": repair, "node04": "myriad: drain by x"}

    def resume(ctl: Controller) -> list[str]:
        def retest(names: Sequence[str]) -> dict[str, str]:
            return retest_repaired(
                spec, names, slurm=ctl.slurm(), commands=ctl, settle=lambda: None
            )

        changes = nodes.resume(spec, ["node02"], retest=retest, slurm=ctl.slurm())
        return [c.outcome for c in changes]

    still_slow = Controller(slow="node02", reasons=dict(reasons))
    with pytest.raises(OpsError, match=r"node02: myriad-accept: nccl all_reduce, one node 150.0"):
        resume(still_slow)
    assert still_slow.drained == {
        "node02": "myriad-accept: nccl all_reduce, one node 150.0 GB/s < 0.90 x 360.0 GB/s expected"
    }
    assert not any(u[-1] == "State=RESUME" for u in still_slow.updates)
    # Still held for repair (a plain resume tests it again), the failed figure beside.
    assert still_slow.updates[-1] == (
        "scontrol", "update", "NodeName=node02", "State=DRAIN",
        f"Reason={repair}; failed its re-test: {still_slow.drained['node02']}",
    )  # fmt: skip
    # DCGM, NVLink and a GPU sample, of node02 only: a rail's test needs a partner among
    # the nodes under test, and node02 is alone.
    srun = [s for s in still_slow.steps if s[0] == "srun"]
    assert len(srun) == 3 and all("--nodelist=node02" in s for s in srun)
    repaired = Controller(reasons=dict(reasons))
    assert resume(repaired) == ["resumed"]
    assert repaired.resumed == ["node02"] and repaired.drained == {}
