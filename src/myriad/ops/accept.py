"""Carrying out an acceptance through Slurm: reserve the nodes, run each planned step as a
job step, judge it, keep the record, drain the nodes that failed and resume the re-tested
ones that passed, release the reservation.

Slurm is reached through `Commands`, so tests hand in a fake; the planning and the judging
are `ops/accept_plan.py`'s, the record `ops/accept_state.py`'s. The slow-node search's
group tests (`plan/slow_nodes.py`) are measured by `group_measure`, which runs each as an
`srun` step of all_reduce_perf over the group and reads its busbw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from myriad.errors import OpsError
from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.nccl_tests import parse_nccl_tests
from myriad.ops.accept_plan import (
    NCCL_ARGS,
    Step,
    StepResult,
    judge,
    release_argv,
    reservation_argv,
)
from myriad.ops.accept_state import AcceptRun
from myriad.plan.slow_nodes import GroupTest

__all__ = ["AcceptResult", "Commands", "carry_out", "group_measure"]


class Commands(Protocol):
    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        """Run one command on the controller: its exit status and standard output."""
        ...

    def drain(self, node: str, reason: str) -> None: ...

    def resume(self, node: str) -> None: ...


@dataclass(frozen=True, slots=True)
class AcceptResult:
    run_dir: Path
    verdicts: dict[str, str | None]  # node: None passed, else the drain reason
    drained: tuple[str, ...]
    resumed: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return all(reason is None for reason in self.verdicts.values())


def _judged(step: Step, status: int, output: str) -> StepResult:
    result = judge(step, output)
    if status != 0 and result.passed:
        # A step that exited non-zero is no pass, whatever it printed first.
        reason = f"myriad-accept: {step.test} exited {status}"
        return StepResult(step, False, result.measured_gbs, reason)
    return result


def carry_out(
    commands: Commands,
    run: AcceptRun,
    steps: Sequence[Step],
    *,
    duration_s: int,
    retest: bool = False,
) -> AcceptResult:
    """Run the steps `run` has not judged yet inside a reservation on its nodes, then drain
    each failed node with its reason; with `retest` (`--nodes-from drained`), resume each
    node that passed. The reservation is released even when a step raises."""
    nodes = list(run.data["nodes"])
    reservation = str(run.data["reservation"])
    status, output = commands.run(reservation_argv(reservation, nodes, duration_s))
    if status != 0 and "exists" not in output:  # a resumed run finds its reservation
        raise OpsError(f"could not reserve the nodes under test: {output.strip()}")
    try:
        for step in run.remaining(steps):
            status, output = commands.run(step.argv)
            run.record(_judged(step, status, output))
    finally:
        commands.run(release_argv(reservation))
    verdicts = run.verdicts()
    drained = tuple(node for node, reason in verdicts.items() if reason is not None)
    for node in drained:
        commands.drain(node, str(verdicts[node]))
    resumed = tuple(n for n, r in verdicts.items() if r is None) if retest else ()
    for node in resumed:
        commands.resume(node)
    run.finish()
    return AcceptResult(run.run_dir, verdicts, drained, resumed)


def group_measure(commands: Commands, reservation: str, gpus: int) -> Callable[[GroupTest], float]:
    """The slow-node search's measuring function: each group test as an srun step of
    all_reduce_perf over its nodes; its busbw at the largest message. Output that cannot be
    read measures 0, so the search bisects the group rather than clearing it."""

    def measure(test: GroupTest) -> float:
        argv = (
            "srun",
            f"--reservation={reservation}",
            f"--nodelist={','.join(test.nodes)}",
            f"--nodes={len(test.nodes)}",
            "--ntasks-per-node=1",
            f"--gpus-per-node={gpus}",
            "all_reduce_perf",
            *NCCL_ARGS,
            "-g",
            str(gpus),
        )
        status, output = commands.run(argv)
        if status != 0:
            return 0.0
        try:
            return parse_nccl_tests(output).rows[-1].best_busbw_gbs
        except ParseFailure:
            return 0.0

    return measure
