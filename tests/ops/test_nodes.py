"""`myriad drain` and `myriad resume` on the local example's inventory and a recorded Slurm."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from fake_slurm import RecordedController
from myriad.bringup.flow import cluster_state
from myriad.errors import OpsError, OpsInputError
from myriad.ops import nodes
from myriad.ops.remedy import load_history
from myriad.ops.slurm import Completed, Slurm, current_user, wait_settled

EXAMPLE = Path(__file__).resolve().parents[2] / "inventories" / "local" / "cluster.yaml"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path))


def test_drain_writes_who_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("myriad.ops.slurm.getpass.getuser", lambda: "alice")
    recorded = RecordedController("node01|idle|none\n", squeue="7|node01|bob|train\n")
    changes = nodes.drain(EXAMPLE, ["node01"], "bad DIMM", slurm=Slurm(["x"], recorded))
    # Its job runs to its end: Slurm drains it after.
    assert [(c.node, c.outcome) for c in changes] == [("node01", "draining")]
    assert changes[0].describe() == (
        "node01: draining: its jobs run to their end (reason 'myriad: drain by alice: bad DIMM')"
    )
    assert recorded.commands[0] == (
        "scontrol", "update", "NodeName=node01", "State=DRAIN",
        "Reason=myriad: drain by alice: bad DIMM",
    )  # fmt: skip


def test_resume_refuses_health_drains_and_resumes_nothing() -> None:
    recorded = RecordedController(
        "node01|drained|myriad: drain by alice: bad DIMM\n"
        "node02|drained|myriad-health: gpu.ecc failed\n"
    )
    slurm = Slurm(["x"], recorded)
    with pytest.raises(OpsError, match=r"node02 \(myriad-health: gpu.ecc failed\).*--force"):
        nodes.resume(EXAMPLE, ["node01", "node02"], slurm=slurm)
    assert not any(c[0] == "scontrol" for c in recorded.commands)
    changes = nodes.resume(EXAMPLE, ["node01", "node02"], force=True, slurm=slurm)
    assert [c.outcome for c in changes] == ["resumed", "resumed"]
    assert recorded.commands[-1] == ("scontrol", "update", "NodeName=node01,node02", "State=RESUME")


REPAIR = "myriad-remedy: hca.state: needs hardware"


def test_a_node_back_from_repair_is_tested_again_before_it_returns() -> None:
    recorded = RecordedController(
        f"node01|drained|myriad: drain by alice: x\nnode02|drained|{REPAIR}\n"
    )
    slurm = Slurm(["x"], recorded)
    # No test to run: refused, nothing resumed.
    with pytest.raises(OpsError, match=r"remediation sent node02 .* for repair: test it again"):
        nodes.resume(EXAMPLE, ["node01", "node02"], slurm=slurm)
    tested: list[list[str]] = []

    def failing(names: Sequence[str]) -> dict[str, str]:
        tested.append(list(names))
        return {"node02": "ib.link-rate 200 Gb/s, not 400"}

    with pytest.raises(OpsError, match=r"node02: ib.link-rate 200 Gb/s.*stays drained"):
        nodes.resume(EXAMPLE, ["node01", "node02"], retest=failing, slurm=slurm)
    assert tested == [["node02"]]  # only the node back from repair is tested
    # Nothing resumed; node02 held for repair again, with the figure it failed.
    assert [c for c in recorded.commands if c[0] == "scontrol"] == [
        ("scontrol", "update", "NodeName=node02", "State=DRAIN",
         f"Reason={REPAIR}; failed its re-test: ib.link-rate 200 Gb/s, not 400"),
    ]  # fmt: skip
    # It passes: both return.
    changes = nodes.resume(EXAMPLE, ["node01", "node02"], retest=lambda names: {}, slurm=slurm)
    assert [c.outcome for c in changes] == ["resumed", "resumed"]
    assert recorded.commands[-1] == ("scontrol", "update", "NodeName=node01,node02", "State=RESUME")


def test_resume_leaves_nodes_that_are_not_drained() -> None:
    recorded = RecordedController("node01|idle|none\nnode03|drained|myriad: roll by root: x\n")
    changes = nodes.resume(EXAMPLE, ["node01", "node03"], slurm=Slurm(["x"], recorded))
    assert recorded.commands[-1] == ("scontrol", "update", "NodeName=node03", "State=RESUME")
    assert [c.describe() for c in changes] == [
        "node01: not drained (idle); left as it is",
        "node03: resumed (was 'myriad: roll by root: x')",
    ]


def test_unknown_nodes_and_empty_reasons_are_input_errors() -> None:
    slurm = Slurm(["x"], RecordedController(""))
    with pytest.raises(OpsInputError, match="ctl01: not a compute node"):
        nodes.drain(EXAMPLE, ["ctl01"], "x", slurm=slurm)
    with pytest.raises(OpsInputError, match="--reason is empty"):
        nodes.drain(EXAMPLE, ["node01"], "  ", slurm=slurm)


class Answers:
    """sinfo answering each call with the next table, the last one for good."""

    def __init__(self, *tables: str) -> None:
        self.tables, self.calls = list(tables), 0

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls += 1
        return Completed(0, self.tables[min(self.calls, len(self.tables)) - 1], "")


def test_validation_waits_for_nodes_to_answer_slurmctld() -> None:
    # After a munge key is restored slurmd re-registers: `idle*` (not responding), then idle.
    answers = Answers(
        "node01|idle*|none\nnode02|unknown|none\n", "node01|idle|none\nnode02|idle|none\n"
    )
    slept: list[float] = []
    waiting = wait_settled(Slurm(["x"], answers), ["node01", "node02"], sleep=slept.append)
    assert waiting == [] and answers.calls == 2 and slept == [3.0]


def test_the_wait_is_bounded_and_names_who_never_answered() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    answers = Answers("node01|idle|none\nnode02|down*|none\n")
    waiting = wait_settled(
        Slurm(["x"], answers),
        ["node01", "node02", "node03"],
        timeout_s=10,
        clock=lambda: now[0],
        sleep=sleep,
    )
    # node03 is not in sinfo at all; a down node that answers is judged, not waited for.
    assert waiting == ["node02", "node03"] and now[0] >= 10


def test_a_repaired_nodes_return_is_kept_in_the_action_log() -> None:
    """Issue #29: every action recorded, by whom. A person's resume of a node sent for
    repair is one: refused by its re-test (with the figure), then back after it passed, and
    back untested under --force. A node someone else drained is not remediation's."""
    recorded = RecordedController(
        f"node01|drained|myriad: drain by alice: x\nnode02|drained|{REPAIR}\n"
    )
    slurm = Slurm(["x"], recorded)
    with pytest.raises(OpsError, match="stays drained"):
        nodes.resume(EXAMPLE, ["node02"], retest=lambda names: {"node02": "slow"}, slurm=slurm)
    nodes.resume(EXAMPLE, ["node01", "node02"], retest=lambda names: {}, slurm=slurm)
    nodes.resume(EXAMPLE, ["node02"], force=True, slurm=slurm)
    log = load_history(cluster_state("local").root)
    assert [(r.node, r.action, r.result, r.by) for r in log] == [
        ("node02", "resume", "failed", current_user()),
        ("node02", "resume", "succeeded", current_user()),
        ("node02", "resume", "succeeded", current_user()),
    ]
    assert log[0].detail == "failed its re-test: slow; stays drained"
    assert log[1].detail == "passed its re-test"
    assert log[2].detail == "untested (--force)"
    assert log[1].why == REPAIR
