"""Carrying out an acceptance through Slurm: reserve the nodes, run each planned step as a
job step, judge it, keep the record, drain the nodes that failed and resume the re-tested
ones that passed, release the reservation.

Slurm is reached through `Commands`, so tests hand in a fake; the planning and the judging
are `ops/accept_plan.py`'s, the record `ops/accept_state.py`'s. The slow-node search's
group tests (`plan/slow_nodes.py`) are measured by `group_measure`, which runs each as an
`srun` step of all_reduce_perf over the group and reads its busbw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from myriad.errors import OpsError
from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.nccl_tests import parse_nccl_tests
from myriad.node.parsers.perftest import parse_perftest_bw
from myriad.ops.accept_plan import (
    ACCEPT_PREFIX,
    COUNTERS_AFTER,
    COUNTERS_BEFORE,
    MPI_ARGS,
    NCCL_ARGS,
    Step,
    StepResult,
    judge,
    judge_counters,
    rdma_argv,
    release_argv,
    reservation_argv,
    waves,
)
from myriad.ops.accept_state import AcceptRun
from myriad.plan.acceptance import ProfileFigures
from myriad.plan.slow_nodes import AcceptTopology, GroupTest, SearchResult, find_slow

__all__ = [
    "AcceptResult",
    "Commands",
    "SearchPlan",
    "burn_in_steps",
    "carry_out",
    "group_measure",
    "run_step",
    "run_wave",
    "wait_for_server",
]

# How long ib_write_bw's server side is given to listen before its client connects: the
# pause validate --perf's script takes for the same (validate/perf.py, "sleep 3").
SERVER_START_S = 3.0


class Commands(Protocol):
    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        """Run one command on the controller: its exit status and standard output (with
        its standard error after it when the status is not 0)."""
        ...

    def start(self, argv: Sequence[str]) -> object:
        """Start one command on the controller in the background; a handle for `reap`."""
        ...

    def reap(self, handle: object) -> None:
        """Wait a little for a started command to end, then stop it."""
        ...

    def run_lanes(self, lanes: Sequence[Sequence[Sequence[str]]]) -> list[list[tuple[int, str]]]:
        """Run each lane's commands in order, the lanes side by side (each lane one node's
        own steps); each command's `run` answer, lane by lane."""
        ...

    def drain(self, node: str, reason: str) -> None: ...

    def resume(self, node: str) -> None: ...


@dataclass(frozen=True, slots=True)
class AcceptResult:
    run_dir: Path
    verdicts: dict[str, str | None]  # node: None passed, else the drain reason
    drained: tuple[str, ...]
    resumed: tuple[str, ...]
    # Failures that drain no node: a leaf switch, an island's spines, the core, a group
    # slow only together; they fail the run all the same.
    elsewhere: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.elsewhere and all(reason is None for reason in self.verdicts.values())


def _judged(step: Step, status: int, output: str, run: AcceptRun) -> StepResult:
    """The step judged; a node's counters from before its tests kept in the run, for its
    counters after them to be judged against (a resumed run still has them)."""
    node = step.nodes[0]
    if step.test == COUNTERS_AFTER:
        before = run.data.get("counters_before", {}).get(node)
        result = judge_counters(step, before, output)
    else:
        result = judge(step, output)
    if step.test == COUNTERS_BEFORE and status == 0 and result.passed:
        run.data.setdefault("counters_before", {})[node] = output
    if status != 0 and result.passed:
        # A step that exited non-zero is no pass, whatever it printed first.
        reason = f"myriad-accept: {step.test} exited {status}"
        return StepResult(step, False, result.measured_gbs, reason, result.findings)
    return result


def wait_for_server() -> None:
    """Give a server side `SERVER_START_S` to listen."""
    time.sleep(SERVER_START_S)


def run_step(
    commands: Commands, argv: Sequence[str], server: Sequence[str], settle: Callable[[], None]
) -> tuple[int, str]:
    """One step; where it has a server side, that starts first in the background, the
    client runs once it listens, and the server is reaped after, whatever the client did."""
    if not server:
        return commands.run(argv)
    handle = commands.start(server)
    try:
        settle()
        return commands.run(argv)
    finally:
        commands.reap(handle)


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """What the slow-node search of `full` and `burn-in` needs: the planned topology, each
    profile's figures, the GPUs of a node and each rail's RDMA device."""

    topo: AcceptTopology
    figures: Mapping[str, ProfileFigures]
    gpus: int
    rail_devices: tuple[str, ...] = ()


def _search(
    commands: Commands, run: AcceptRun, plan: SearchPlan, settle: Callable[[], None]
) -> SearchResult:
    """The search over the nodes under test that no per-node step failed (a node already
    failing would only slow every group it is in), on the rails that have a device."""
    healthy = {node for node, reason in run.verdicts().items() if reason is None}
    topo = AcceptTopology(
        tuple(n for n in plan.topo.nodes if n.name in healthy),
        min(plan.topo.rails, len(plan.rail_devices)),
    )
    measure = group_measure(
        commands,
        str(run.data["reservation"]),
        plan.gpus,
        rail_devices=plan.rail_devices,
        settle=settle,
    )
    return find_slow(topo, plan.figures, measure)


# Drain reasons of a re-test (`--nodes-from drained`) whose nodes went back into service
# inside the reservation for it.
RETEST_INTERRUPTED = f"{ACCEPT_PREFIX}re-test interrupted: myriad accept --resume"
UNCLEARED = f"{ACCEPT_PREFIX}not cleared by the slow-node search: re-test with --level quick"


def run_wave(commands: Commands, run: AcceptRun, wave: Sequence[Step]) -> None:
    """The steps of `wave` that `run` has not judged, each node's in their order as one
    lane, the lanes side by side (`Commands.run_lanes`); each judged and recorded."""
    lanes: dict[str, list[Step]] = {}
    for step in wave:
        if not run.done(step):
            lanes.setdefault(step.nodes[0], []).append(step)
    if not lanes:
        return
    answers = commands.run_lanes([[step.argv for step in lane] for lane in lanes.values()])
    for lane, answered in zip(lanes.values(), answers, strict=True):
        for step, (status, output) in zip(lane, answered, strict=True):
            run.record(_judged(step, status, output, run))


def _run_all(
    commands: Commands,
    run: AcceptRun,
    items: Iterable[Step | Sequence[Step]],
    settle: Callable[[], None],
) -> None:
    for item in items:
        if not isinstance(item, Step):
            run_wave(commands, run, item)
            continue
        if run.done(item):
            continue
        status, output = run_step(commands, item.argv, item.server, settle)
        run.record(_judged(item, status, output, run))


def carry_out(
    commands: Commands,
    run: AcceptRun,
    steps: Iterable[Step | Sequence[Step]],
    *,
    duration_s: int,
    retest: bool = False,
    search: SearchPlan | None = None,
    settle: Callable[[], None] = wait_for_server,
    closing: Iterable[Step | Sequence[Step]] = (),
) -> AcceptResult:
    """Run the steps `run` has not judged yet (taken one at a time, so a burn-in's cycles
    can be made as the clock goes; a wave of own steps, `accept_plan.waves`, side by side
    through `run_wave`) inside a reservation on its nodes, then (with
    `search`) the slow-node search, then the `closing` steps (the port counters read after
    the search's traffic too), then drain each failed node with its reason; with
    `retest` (`--nodes-from drained`), resume each node that passed. The reservation is
    released even when a step raises. `settle` waits for a server side to listen."""
    nodes = list(run.data["nodes"])
    reservation = str(run.data["reservation"])
    status, output = commands.run(reservation_argv(reservation, nodes, duration_s))
    if status != 0 and "exists" not in output:  # a resumed run finds its reservation
        raise OpsError(f"could not reserve the nodes under test: {output.strip()}")
    try:
        if retest and not run.data.get("retest_in_service"):
            # Slurm starts no step on a drained node, a reservation's own included: the nodes
            # come back into service inside the maintenance reservation, which only root's
            # steps may use, and go out again below unless they pass. (Seen on the twin: the
            # first step of a re-test waited for a node that stayed drained.)
            for node in nodes:
                commands.resume(node)
            run.data["retest_in_service"] = True
            run.save()
        _run_all(commands, run, steps, settle)
        if search is not None and not run.searched:
            run.record_search(_search(commands, run, search, settle))
        _run_all(commands, run, closing, settle)
    except BaseException:
        # Out of service again until the re-test goes on (`--resume` brings them back in);
        # a run killed outright keeps them in its reservation, which `--resume` finds.
        if retest and run.data.get("retest_in_service"):
            for node in nodes:
                commands.drain(node, RETEST_INTERRUPTED)
            run.data["retest_in_service"] = False
            run.save()
        raise
    finally:
        commands.run(release_argv(reservation))
    verdicts = run.verdicts()
    drained = tuple(node for node, reason in verdicts.items() if reason is not None)
    for node in drained:
        commands.drain(node, str(verdicts[node]))
    # A node the search could not clear (an unresolved finding names it) is not drained
    # for a figure, but not returned either: it passed nothing that shows it is fast.
    unsure = run.unresolved_nodes()
    resumed = (
        tuple(n for n, r in verdicts.items() if r is None and n not in unsure) if retest else ()
    )
    for node in sorted(unsure & set(nodes)) if retest else ():
        if verdicts.get(node) is None:
            commands.drain(node, UNCLEARED)
    run.finish()
    return AcceptResult(run.run_dir, verdicts, drained, resumed, run.placeless_failures())


def burn_in_steps(
    run: AcceptRun,
    cycle: Callable[[int], Sequence[Step]],
    duration_s: int,
    clock: Callable[[], float] = time.time,
) -> Iterator[Step | tuple[Step, ...]]:
    """The burn-in's cycles (`accept_plan.burn_in_cycle`), one after another until
    `duration_s` has passed since the first began: at least one, and a cycle begun is run to
    its end. The start is kept in the run (wall-clock time, so a resumed run counts the time
    already spent) and judged cycles are skipped. Each cycle comes as its `waves`: every
    node's stress at once, the leaf groups' all_reduce one by one, every node's sample at
    once."""
    if "burn_in_started" not in run.data:
        run.data["burn_in_started"] = clock()
        run.save()
    started = float(run.data["burn_in_started"])
    number = 0
    while True:
        steps = cycle(number)
        done = [run.done(step) for step in steps]
        if not all(done):
            if not any(done) and number > 0 and clock() - started >= duration_s:
                return
            yield from waves(steps)
        number += 1


def group_measure(
    commands: Commands,
    reservation: str,
    gpus: int,
    *,
    rail_devices: Sequence[str] = (),
    settle: Callable[[], None] = wait_for_server,
) -> Callable[[GroupTest], float]:
    """The slow-node search's measuring function: an `nccl` or `nvlink` test as an srun step
    of all_reduce_perf over its nodes, its busbw at the largest message; an `rdma` test as
    ib_write_bw on the rail's device, server on the second node, its average at the largest
    message. Output that cannot be read, or a step that exits non-zero, measures 0, so the
    search bisects the group rather than clearing it."""

    def rdma(test: GroupTest) -> float:
        assert test.rail is not None
        client, partner = test.nodes[0], test.nodes[1]
        server, argv = rdma_argv(reservation, rail_devices[test.rail], client, partner)
        status, output = run_step(commands, argv, server, settle)
        if status != 0:
            return 0.0
        try:
            return parse_perftest_bw(output).largest.average_gbs
        except ParseFailure:
            return 0.0

    def measure(test: GroupTest) -> float:
        if test.kind == "rdma":
            return rdma(test)
        argv = (
            "srun",
            f"--reservation={reservation}",
            f"--nodelist={','.join(test.nodes)}",
            f"--nodes={len(test.nodes)}",
            "--ntasks-per-node=1",
            f"--gpus-per-node={gpus}",
            *(MPI_ARGS if len(test.nodes) > 1 else ()),
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
