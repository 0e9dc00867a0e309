"""The roll's loop against an in-memory Slurm and fake steps, on a fake clock.

Every test reads what the roll returns (its `RollResult`) and its own log and state, as an
operator would: which node was drained when, which waited for which job, what failed and why,
and that `--resume` never drains a finished node again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from myriad.errors import OpsError
from myriad.node.checks.model import CheckResult
from myriad.ops.batches import Amount
from myriad.ops.roll import RollOptions, batch_failures, new_roll, run_roll
from myriad.ops.roll_result import RollResult, silent
from myriad.ops.roll_state import RollState, unfinished
from myriad.ops.slurm import Job, NodeState, Slurm
from myriad.ops.slurmconf import Reload

NODES = ["node01", "node02", "node03"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeSlurm(Slurm):
    """Node states and jobs in memory; a job ends when the clock passes its end."""

    def __init__(self, clock: Clock, jobs: Mapping[str, float] | None = None) -> None:
        super().__init__(["true"])
        self.clock = clock
        self.states = {n: NodeState(n, "idle", "") for n in NODES}
        self.ends = dict(jobs or {})  # node -> when its one job ends
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def nodes(self, names: Sequence[str] | None = None) -> dict[str, NodeState]:
        return {n: s for n, s in self.states.items() if not names or n in names}

    def jobs(self, names: Sequence[str] | None = None) -> list[Job]:
        return [
            Job(f"job-{node}", (node,), "alice", "train")
            for node, end in self.ends.items()
            if end > self.clock.now and (not names or node in names)
        ]

    def drain(self, names: Sequence[str], reason: str) -> None:
        self.calls.append(("drain", tuple(names)))
        for n in names:
            self.states[n] = NodeState(n, "drained", reason)

    def resume(self, names: Sequence[str]) -> None:
        self.calls.append(("resume", tuple(names)))
        for n in names:
            self.states[n] = NodeState(n, "idle", "")

    def cancel(self, job_ids: Sequence[str]) -> None:
        self.calls.append(("cancel", tuple(job_ids)))
        for job_id in job_ids:
            self.ends.pop(job_id.removeprefix("job-"), None)

    def drained(self) -> list[str]:
        return [n for call, names in self.calls if call == "drain" for n in names]


class FakeSteps:
    def __init__(
        self,
        clock: Clock,
        *,
        bad: Mapping[str, str] | None = None,
        interrupt_on: str | None = None,
    ) -> None:
        self.clock = clock
        self.bad = dict(bad or {})
        self.interrupt_on = interrupt_on
        self.converged: list[tuple[str, ...]] = []
        self.controller_vars: list[Mapping[str, Any]] = []

    def controller_reload(self, controllers: Sequence[str]) -> tuple[Reload, list[str]]:
        return "reconfigure", ["messagetimeout"]

    def converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        if self.interrupt_on in nodes:
            self.interrupt_on = None
            raise KeyboardInterrupt
        if extravars:
            self.controller_vars.append(extravars)
        else:
            self.converged.append(tuple(nodes))
        self.clock.now += 10
        return {}

    def validate(self, nodes: Sequence[str]) -> dict[str, str]:
        return {n: self.bad[n] for n in nodes if n in self.bad}


def start(tmp_path: Path, slurm: FakeSlurm, **options: Any) -> tuple[RollState, RollOptions]:
    chosen = RollOptions(reason="probe 2.0", poll_s=5, **options)
    islands: dict[str, int | None] = dict.fromkeys(NODES, 0)
    state = new_roll(tmp_path, "c", chosen, NODES, islands, slurm)
    return state, chosen


def roll(state: RollState, slurm: FakeSlurm, steps: FakeSteps, clock: Clock) -> RollResult:
    return run_roll(state, slurm, steps, silent, ["ctl01"], clock=clock, sleep=clock.sleep)


def events(state: RollState) -> list[tuple[str, str]]:
    return [tuple(line.split()[1:3]) for line in state.log_path.read_text().splitlines()]  # type: ignore[misc]


def test_idle_node_first_busy_nodes_after_their_jobs(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock, jobs={"node01": 1_060.0, "node02": 1_200.0})
    state, _ = start(tmp_path, slurm)
    assert [b["nodes"] for b in state.data["batches"]] == [["node03"], ["node01"], ["node02"]]
    steps = FakeSteps(clock)
    result = roll(state, slurm, steps, clock)
    assert result.ok and result.outcome == "finished" and result.verb == "roll"
    assert [(n.node, n.status) for n in result.nodes] == [
        ("node03", "done"), ("node01", "done"), ("node02", "done"),
    ]  # fmt: skip
    waited = {n.node: n.waited_for for n in result.nodes}
    assert waited == {"node03": "", "node01": "job-node01", "node02": "job-node02"}
    # Measured on the roll's clock: three site plays of 10 s, node02 waited until 1200.
    assert result.seconds >= 200 and result.log == state.log_path
    # The controller first, told to reconfigure; then one node at a time.
    assert steps.controller_vars == [{"slurm_controller_reload": "reconfigure"}]
    assert steps.converged == [("node03",), ("node01",), ("node02",)]
    log = events(state)
    assert log.index(("node01", "drained")) > log.index(("node03", "resumed"))
    assert log.index(("node02", "drained")) > log.index(("node01", "resumed"))
    assert ("node01", "waiting") in log and ("node01", "jobs-ended") in log
    # node02's job ended at 1200: its site play came after that, never while it ran.
    assert all(slurm.states[n].state == "idle" for n in NODES)
    assert ("cancel", ("job-node02",)) not in slurm.calls
    assert state.data["finished"] and state.data["outcome"] == "finished"


def test_a_job_that_outlives_the_drain_timeout_leaves_its_node_untouched(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock, jobs={"node02": 10_000.0})
    state, _ = start(tmp_path, slurm, drain_timeout_s=60.0)
    steps = FakeSteps(clock)
    result = roll(state, slurm, steps, clock)
    assert not result.ok
    skipped = {n.node: n.detail for n in result.nodes if n.status == "skipped"}
    assert list(skipped) == ["node02"] and "still running after" in skipped["node02"]
    assert ("node02",) not in steps.converged
    assert state.record("node02")["status"] == "skipped"
    assert "job(s) job-node02 still running" in state.record("node02")["detail"]
    # Given back: resumed, the job still there, never cancelled.
    assert slurm.states["node02"].state == "idle"
    assert not any(call == "cancel" for call, _ in slurm.calls)


def test_kill_after_cancels_then_rolls(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock, jobs={"node01": 10_000.0})
    state, _ = start(tmp_path, slurm, kill_after_s=30.0, drain_timeout_s=600.0)
    assert roll(state, slurm, FakeSteps(clock), clock).ok
    assert ("cancel", ("job-node01",)) in slurm.calls
    assert ("node01", "cancelled") in events(state)


def test_failed_validation_keeps_the_node_drained_and_stops(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    state, _ = start(tmp_path, slurm)
    bad = {"node02": "nccl.conf (expected NCCL defaults, found NCCL_DEBUG=INFO)"}
    result = roll(state, slurm, FakeSteps(clock, bad=bad), clock)
    assert not result.ok and result.outcome.startswith("stopped after batch 2")
    assert [n.status for n in result.nodes] == ["done", "failed", "pending"]
    assert result.nodes[1].detail == f"validation: {bad['node02']}"
    assert slurm.states["node02"].drained
    assert slurm.states["node02"].reason.startswith("myriad: roll by ")
    assert slurm.states["node02"].reason.endswith(": probe 2.0")
    assert [state.record(n)["status"] for n in NODES] == ["done", "failed", "pending"]
    assert "nccl.conf" in state.record("node02")["detail"]
    assert "stopped after batch 2" in state.data["outcome"]


def test_a_failure_budget_lets_the_roll_go_on(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    state, _ = start(tmp_path, slurm, max_failures=Amount(1, percent=False))
    assert not roll(state, slurm, FakeSteps(clock, bad={"node01": "x"}), clock).ok
    assert [state.record(n)["status"] for n in NODES] == ["failed", "done", "done"]


def test_resume_never_drains_a_node_twice(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    state, _ = start(tmp_path, slurm)
    # Killed while node02's site play runs: node01 done, node02 drained.
    with pytest.raises(KeyboardInterrupt):
        roll(state, slurm, FakeSteps(clock, interrupt_on="node02"), clock)
    assert unfinished(tmp_path / "runs") == state.run_dir
    again = RollState.load(state.run_dir)
    assert [again.record(n)["status"] for n in NODES] == ["done", "drained", "pending"]
    steps = FakeSteps(clock)
    assert roll(again, slurm, steps, clock).ok
    assert slurm.drained() == ["node01", "node02", "node03"]
    assert steps.converged == [("node02",), ("node03",)]
    # The controller was done before the kill: not converged a second time.
    assert steps.controller_vars == []
    assert unfinished(tmp_path / "runs") is None


def test_jobs_that_end_while_the_roll_is_stopped_are_still_recorded_as_ended(
    tmp_path: Path,
) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock, jobs={"node01": 1_100.0})
    state, _ = start(tmp_path, slurm)

    def stopped(seconds: float) -> None:
        raise KeyboardInterrupt

    # Stopped while node01 waits for its job; the job ends before the roll is resumed.
    with pytest.raises(KeyboardInterrupt):
        run_roll(state, slurm, FakeSteps(clock), silent, ["ctl01"], clock=clock, sleep=stopped)
    clock.now = 2_000.0
    again = RollState.load(state.run_dir)
    assert roll(again, slurm, FakeSteps(clock), clock).ok
    log = events(again)
    assert log.count(("node01", "waiting")) == 1
    assert log.index(("node01", "jobs-ended")) < log.index(("node01", "resumed"))


def test_a_second_roll_waits_for_the_unfinished_one(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    start(tmp_path, slurm)
    with pytest.raises(OpsError, match=r"unfinished roll .* --resume"):
        start(tmp_path, slurm)


def test_someone_elses_drain_is_left_alone(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    slurm.states["node02"] = NodeState("node02", "drained", "myriad-health: gpu.ecc failed")
    state, _ = start(tmp_path, slurm, batch=Amount(3, percent=False),
                     max_unavailable=Amount(3, percent=False))  # fmt: skip
    assert not roll(state, slurm, FakeSteps(clock), clock).ok
    assert state.record("node02")["status"] == "skipped"
    assert slurm.states["node02"].reason == "myriad-health: gpu.ecc failed"
    assert "node02" not in slurm.drained()


def test_a_reason_changed_meanwhile_is_not_resumed(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    state, _ = start(tmp_path, slurm)

    class Redrained(FakeSteps):
        def validate(self, nodes: Sequence[str]) -> dict[str, str]:
            for n in nodes:
                slurm.states[n] = NodeState(n, "drained", "myriad-health: hca.errors")
            return {}

    roll(state, slurm, Redrained(clock), clock)
    assert all(slurm.states[n].reason == "myriad-health: hca.errors" for n in NODES)
    assert ("node01", "not-resumed") in events(state)


def test_batch_failures_name_the_check_and_ignore_the_drain_itself() -> None:
    results = [
        CheckResult("node02", "nccl.conf", "fail", "defaults", "NCCL_DEBUG=INFO", "software.nccl"),
        CheckResult("node02", "slurm.node-state", "fail", "idle, not drained", "drained", "x"),
        CheckResult("node03", "slurm.node-state", "fail", "idle, not drained", "drained", "x"),
        CheckResult("node03", "slurm.munge", "pass", "munge active", "munge active", "x"),
    ]
    failures = batch_failures(results, {}, {"node04": "timeout"}, ["node02", "node03", "node04"])
    assert failures == {
        "node02": "nccl.conf (expected defaults, found NCCL_DEBUG=INFO)",
        "node04": "unreachable or gathering failed: timeout",
    }


def test_replace_takes_over_another_drain_and_skips_the_controllers(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    slurm.states["node02"] = NodeState("node02", "drained", "myriad-health: gpu.ecc failed")
    options = RollOptions(reason="machine replaced")
    state = RollState.create(
        tmp_path,
        cluster="c",
        reason="myriad: replace by root: machine replaced",
        options={**options.to_dict(), "reason": options.reason},
        batches=[{"index": 1, "island": None, "nodes": ["node02"]}],
        controller="done",
        take_over=True,
    )
    steps = FakeSteps(clock)
    assert roll(state, slurm, steps, clock).ok
    assert steps.controller_vars == [] and steps.converged == [("node02",)]
    assert slurm.drained() == ["node02"]
    assert slurm.states["node02"].state == "idle"
    assert ("node02", "taken-over") in events(state)


def test_sigterm_stops_the_roll_while_a_step_runs_in_its_worker() -> None:
    import os
    import signal
    import threading
    import time

    from myriad.ops.roll import in_worker, sigterm_stops

    finished = threading.Event()

    def step() -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
        finished.set()
        return "done"

    with sigterm_stops(), pytest.raises(KeyboardInterrupt):
        in_worker(step)
    # The main thread stopped at once; the step still ran to its end in its thread.
    assert finished.wait(5)
    assert in_worker(lambda: 7) == 7


def test_a_node_resumed_while_the_roll_was_stopped_is_drained_again(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    state, _ = start(tmp_path, slurm)
    with pytest.raises(KeyboardInterrupt):
        roll(state, slurm, FakeSteps(clock, interrupt_on="node02"), clock)
    slurm.resume(["node02"])  # an operator, while the roll was stopped
    again = RollState.load(state.run_dir)
    assert roll(again, slurm, FakeSteps(clock), clock).ok
    assert slurm.drained() == ["node01", "node02", "node02", "node03"]
    assert ("node02", "drained-again") in events(again)


def test_vars_file_keys_must_be_role_variables(tmp_path: Path) -> None:
    from myriad.errors import OpsInputError
    from myriad.ops.roll import read_variables

    good = tmp_path / "good.yaml"
    good.write_text("common_packages_extra: [probe=2.0]\nslurm_message_timeout: 40\n")
    assert read_variables(good) == {
        "common_packages_extra": ["probe=2.0"],
        "slurm_message_timeout": 40,
    }
    typo = tmp_path / "typo.yaml"
    typo.write_text("common_packages_extra: []\nslurm_mesage_timeout: 40\nmessage_timeout: 4\n")
    with pytest.raises(OpsInputError) as raised:
        read_variables(typo)
    assert raised.value.exit_code == 2
    assert str(raised.value).startswith(f"{typo}:2: slurm_mesage_timeout is no role's variable")
    assert str(raised.value).endswith("did you mean slurm_message_timeout?")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n")
    with pytest.raises(OpsInputError, match=":1: expected a mapping"):
        read_variables(listed)


def test_the_lines_stream_to_the_caller_as_the_log_gets_them(tmp_path: Path) -> None:
    clock = Clock()
    slurm = FakeSlurm(clock)
    state, _ = start(tmp_path, slurm)
    lines: list[str] = []
    result = run_roll(
        state, slurm, FakeSteps(clock), lines.append, ["ctl01"], clock=clock, sleep=clock.sleep
    )
    assert result.ok
    logged = state.log_path.read_text().splitlines()
    # Every event the loop logs reaches the caller as it is logged, in order.
    assert lines == logged
    assert lines[-1].endswith(" roll finished")
