"""`myriad accept SPEC`: an acceptance run on a resolved cluster, through its Slurm controller.

Resolves the spec, takes the cluster's run lock (`bringup/lock.py`, as `myriad roll` does, so
no bring-up, roll or second acceptance touches the nodes meanwhile), chooses the nodes under
test from Slurm's node states, plans the level's steps (`ops/accept_plan.py`) and the slow-node
search's inputs from the plan (`plan/slow_nodes.py`), and carries them out (`ops/accept.py`)
in a run folder `<state>/runs/<stamp>-accept/` that `--resume` continues.

The controller is reached as `ops/slurm.py`'s `Slurm` reaches it (`docker exec` on the local
cluster, `ssh` elsewhere), by `SlurmCommands`: a test step runs for minutes, DCGM's deeper
levels far longer, so a step has its own timeout rather than `COMMAND_TIMEOUT_S`, and a step
that runs past it is judged failed (exit 124, as timeout(1) reports) instead of ending the run.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

from myriad.errors import OpsError, OpsInputError
from myriad.ops.accept import (
    AcceptResult,
    Commands,
    SearchPlan,
    burn_in_steps,
    carry_out,
    wait_for_server,
)
from myriad.ops.accept_plan import (
    COUNTERS_AFTER,
    Level,
    NodesFrom,
    Step,
    burn_in_cycle,
    node_steps,
    reservation_name,
    select_nodes,
    waves,
)
from myriad.ops.accept_state import AcceptRun, summary_rows, unfinished
from myriad.ops.slurm import Slurm, controller_command
from myriad.plan.acceptance import ProfileFigures
from myriad.plan.ports import ports
from myriad.plan.slow_nodes import AcceptTopology, search_inputs
from myriad.provision.resolve import ResolvedCluster, resolve_cluster

__all__ = [
    "STEP_TIMEOUT_S",
    "AcceptOutcome",
    "SlurmCommands",
    "accept",
    "reservation_hours",
    "retest_repaired",
]

# A step's limit: long enough for the longest step Myriad runs (`dcgmi diag -r 4`, DCGM's
# extended tests), short enough that a hung step ends the same night.
STEP_TIMEOUT_S = 4 * 3600
# How long a server side is waited for once its client ended before it is stopped.
REAP_WAIT_S = 10.0
TIMED_OUT = 124  # timeout(1)'s status for a command it stopped


class SlurmCommands:
    """`Commands` over the cluster's controller: each command one process, as `Slurm` runs
    its own; drain and resume through `Slurm`, so their reasons follow its conventions."""

    def __init__(
        self,
        prefix: Sequence[str],
        slurm: Slurm,
        *,
        step_timeout_s: float = STEP_TIMEOUT_S,
        reap_wait_s: float = REAP_WAIT_S,
    ) -> None:
        self.prefix = list(prefix)
        self.slurm = slurm
        self.step_timeout_s = step_timeout_s
        self.reap_wait_s = reap_wait_s

    def _command(self, argv: Sequence[str]) -> list[str]:
        remote = bool(self.prefix) and self.prefix[0] == "ssh"
        return [*self.prefix, shlex.join(argv)] if remote else [*self.prefix, *argv]

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        command = self._command(argv)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=self.step_timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            return TIMED_OUT, f"timed out after {self.step_timeout_s:g} s: {shlex.join(argv)}"
        except OSError as exc:
            raise OpsError(
                f"could not reach the controller ({shlex.join(command)}): {exc}"
            ) from exc
        if done.returncode != 0 and done.stderr:
            # Why it failed is on stderr (scontrol's "Reservation request: exists" too).
            return done.returncode, done.stdout + done.stderr
        return done.returncode, done.stdout

    def start(self, argv: Sequence[str]) -> object:
        command = self._command(argv)
        try:
            return subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
            )
        except OSError as exc:
            raise OpsError(
                f"could not reach the controller ({shlex.join(command)}): {exc}"
            ) from exc

    def reap(self, handle: object) -> None:
        assert isinstance(handle, subprocess.Popen)
        try:
            handle.wait(timeout=self.reap_wait_s)
        except subprocess.TimeoutExpired:
            handle.terminate()
            try:
                handle.wait(timeout=self.reap_wait_s)
            except subprocess.TimeoutExpired:
                handle.kill()
                handle.wait()

    def run_lanes(self, lanes: Sequence[Sequence[Sequence[str]]]) -> list[list[tuple[int, str]]]:
        """The lanes side by side on the controller, by one shell there (`lanes_script`),
        so one connection starts every node's srun, not one ssh login each (sshd's
        MaxStartups refuses logins past 10 at once by default, sshd_config(5)). Each
        command's answer as `run` gives it: its status, its stdout, and its stderr after
        it when the status is not 0."""
        if not lanes:
            return []
        script = lanes_script(lanes, self.step_timeout_s)
        command = self._command(["sh", "-s"])
        if command[:2] == ["docker", "exec"]:
            command.insert(2, "-i")  # the script comes on standard input
        longest = max(len(lane) for lane in lanes)
        try:
            done = subprocess.run(
                command,
                input=script.encode(),
                capture_output=True,
                timeout=self.step_timeout_s * longest + self.reap_wait_s * 6,
                check=False,
            )
        except subprocess.TimeoutExpired:
            message = f"timed out after {self.step_timeout_s:g} s a step"
            return [[(TIMED_OUT, message) for _ in lane] for lane in lanes]
        except OSError as exc:
            raise OpsError(
                f"could not reach the controller ({shlex.join(command)}): {exc}"
            ) from exc
        answers = read_lanes(done.stdout, lanes)
        if answers is None:
            detail = done.stderr.decode(errors="replace").strip()
            raise OpsError(f"the controller ran no lanes (exit {done.returncode}): {detail}")
        return answers

    def drain(self, node: str, reason: str) -> None:
        self.slurm.drain([node], reason)

    def resume(self, node: str) -> None:
        self.slurm.resume([node])


LANE_MARK = "myriad-step"


def lanes_script(lanes: Sequence[Sequence[Sequence[str]]], step_timeout_s: float) -> str:
    """A POSIX shell script for the controller: each lane a subshell in the background that
    runs its commands in order, each under timeout(1), reading nothing (the script itself
    comes on standard input, which srun would pass on to its task) and writing files of its
    own in a scratch folder; `wait` for them all; then each command's record, lane by lane,
    as a line `myriad-step LANE.STEP STATUS OUT_BYTES ERR_BYTES` followed by its stdout and
    stderr, byte counts exact so any output reads back whole (`read_lanes`). srun run
    outside an allocation makes one of its own (srun(1), Slurm 22.05: "If necessary, srun
    will first create a resource allocation"), so each lane's steps are jobs of their own in
    the reservation, each on its one node, all running at once."""
    limit = max(1, int(step_timeout_s))
    body = ["set -u", "d=$(mktemp -d) || exit 97", "trap 'rm -rf \"$d\"' EXIT"]
    keys: list[str] = []
    for i, lane in enumerate(lanes):
        runs = []
        for j, argv in enumerate(lane):
            key = f"{i}.{j}"
            keys.append(key)
            runs.append(
                f'timeout {limit} {shlex.join(argv)} </dev/null >"$d/{key}.out" 2>"$d/{key}.err"; '
                f'echo $? >"$d/{key}.rc"'
            )
        body.append("( " + "; ".join(runs) + " ) &")
    body.append("wait")
    body.append(f"for k in {' '.join(keys)}; do")
    body.append(
        f'  printf "{LANE_MARK} %s %s %s %s\\n" "$k" "$(cat "$d/$k.rc" 2>/dev/null || echo 255)" '
        '"$(wc -c <"$d/$k.out")" "$(wc -c <"$d/$k.err")"'
    )
    body.append('  cat "$d/$k.out" "$d/$k.err"')
    body.append("done")
    return "\n".join(body) + "\n"


def read_lanes(
    data: bytes, lanes: Sequence[Sequence[Sequence[str]]]
) -> list[list[tuple[int, str]]] | None:
    """`lanes_script`'s records back into `run`'s answers; None where a record is missing
    or damaged (the script did not run to its end)."""
    answers: list[list[tuple[int, str]]] = [[] for _ in lanes]
    at = 0
    for i, lane in enumerate(lanes):
        for j in range(len(lane)):
            end = data.find(b"\n", at)
            if end < 0:
                return None
            fields = data[at:end].decode(errors="replace").split()
            if len(fields) != 5 or fields[:2] != [LANE_MARK, f"{i}.{j}"]:
                return None
            try:
                status, out_bytes, err_bytes = (int(field) for field in fields[2:])
            except ValueError:
                return None
            out = data[end + 1 : end + 1 + out_bytes]
            err = data[end + 1 + out_bytes : end + 1 + out_bytes + err_bytes]
            if len(out) != out_bytes or len(err) != err_bytes:
                return None
            at = end + 1 + out_bytes + err_bytes
            text = out.decode(errors="replace")
            if status != 0 and err:
                text += err.decode(errors="replace")
            answers[i].append((status, text))
    return answers


@dataclass(frozen=True, slots=True)
class AcceptOutcome:
    """What `myriad accept` did: the run's record and its result."""

    cluster: str
    run: AcceptRun
    result: AcceptResult

    @property
    def level(self) -> str:
        return str(self.run.data["level"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "level": self.level,
            "run_dir": str(self.run.run_dir),
            "passed": self.result.passed,
            "nodes": self.result.verdicts,
            "drained": list(self.result.drained),
            "resumed": list(self.result.resumed),
            "elsewhere": list(self.result.elsewhere),
            "search": self.run.data.get("search"),
            "steps": summary_rows(self.run),
        }


def reservation_hours(level: str, burn_in_s: int) -> int:
    """The reservation's length, a ceiling: the run releases it when it ends. quick runs
    minutes; full adds DCGM's level 3 and the search; burn-in its own hours on top."""
    return {"quick": 2, "full": 8}.get(level, 8 + -(-burn_in_s // 3600))


def _devices(cluster: ResolvedCluster, profile: str) -> tuple[str, ...]:
    spec = cluster.spec
    found = ports(spec.profiles[profile], cluster.loaded.catalog, "compute", spec.network.fabric)
    return tuple(port.device for port in found)


def _testable(
    topo: AcceptTopology, figures: Mapping[str, ProfileFigures], nodes: Sequence[str]
) -> None:
    """Every node under test a GPU node with a place in the planned fabric, or exit 2."""
    known = {node.name for node in topo.nodes}
    missing = [n for n in nodes if n not in known or topo.node(n).profile not in figures]
    if missing:
        raise OpsInputError(
            f"{', '.join(missing)}: not a GPU node with a place in the compute fabric; "
            "`myriad accept` tests GPU nodes (narrow with --limit)"
        )


def _begin(
    cluster: ResolvedCluster,
    slurm: Slurm,
    runs: Path,
    level: Level,
    limit: Sequence[str],
    nodes_from: NodesFrom,
    check: Callable[[Sequence[str]], None],
) -> AcceptRun:
    compute = list(cluster.inventory.groups.get("compute", ()))
    reasons = {name: state.reason for name, state in slurm.nodes(compute).items()}
    try:
        chosen = select_nodes(compute, reasons, nodes_from=nodes_from, limit=limit)
    except ValueError as exc:
        raise OpsInputError(str(exc)) from None
    if not chosen:
        what = {"drained": "drained by accept", "repaired": "back from repair"}.get(
            nodes_from, "chosen"
        )
        raise OpsInputError(f"no compute node is {what}: nothing to test")
    check(chosen)
    # A run folder and its reservation are named by the second the run began; a run that
    # follows another within the second takes the next free one.
    moment = time.time()
    while any(runs.glob(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(moment)) + "-*")):
        moment += 1
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(moment))
    name = reservation_name(cluster.spec.accept, stamp)
    run = AcceptRun.create(runs, level, chosen, name, at=moment)
    run.data["retest"] = nodes_from != "all"
    run.save()
    return run


def accept(
    spec_path: Path,
    level: Level,
    *,
    limit: Sequence[str] = (),
    nodes_from: NodesFrom = "all",
    resume: bool = False,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    slurm: Slurm | None = None,
    commands: Commands | None = None,
    settle: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> AcceptOutcome:
    """`myriad accept SPEC --level LEVEL`, or `--resume` of the last unfinished run (its own
    level and nodes). `slurm` and `commands` replace the controller, `clock` the burn-in's
    wall clock (tests)."""
    from myriad.bringup.flow import cluster_state
    from myriad.bringup.lock import hold_cluster_lock

    cluster = resolve_cluster(spec_path, stack=stack, stack_outputs=stack_outputs)
    spec = cluster.spec
    if spec.software.orchestrator != "slurm":
        raise OpsInputError(f"{spec_path}: `myriad accept` runs its tests as Slurm job steps")
    if cluster.plan.fabric is None:
        raise OpsInputError(f"{spec_path}: the plan has no fabric to test")
    topo, figures = search_inputs(spec, cluster.loaded.catalog, cluster.plan.fabric)
    state = cluster_state(spec.metadata.name)
    runs = state.root / "runs"
    slurm = slurm or Slurm.of(cluster.inventory)
    with hold_cluster_lock(state.root, "accept"):
        if resume:
            folder = unfinished(runs)
            if folder is None:
                raise OpsInputError(f"no unfinished acceptance under {runs} to resume")
            run = AcceptRun.load(folder)
            _testable(topo, figures, run.data["nodes"])
        else:
            check = partial(_testable, topo, figures)
            run = _begin(cluster, slurm, runs, level, limit, nodes_from, check)
        run_level: Level = run.data["level"]
        nodes = list(run.data["nodes"])
        profile = topo.node(nodes[0]).profile
        fig = figures[profile]
        devices = _devices(cluster, profile) if fig.rdma_port is not None else ()
        reservation = str(run.data["reservation"])
        # Port counters where the fabric has them: node health skips Ethernet and EFA for
        # the same reason (node/checks/counters.py).
        counted = devices if spec.network.fabric in ("infiniband", "roce") else ()
        planned = node_steps(
            run_level, nodes, topo, figures, spec.accept, reservation, devices, counted
        )
        # With a search, the counters are read again after it: its group tests carry the
        # most traffic across the fabric.
        last = [s for s in planned if s.test == COUNTERS_AFTER and run_level != "quick"]
        steps: Iterable[Step | tuple[Step, ...]] = waves([s for s in planned if s not in last])
        if run_level == "burn-in":
            cycle = partial(burn_in_cycle, nodes=nodes, topo=topo, figures=figures,
                            accept=spec.accept, reservation=reservation)  # fmt: skip
            steps = chain(steps, burn_in_steps(run, cycle, spec.accept.burn_in_s, clock))
        search = SearchPlan(topo, figures, fig.gpus, devices) if run_level != "quick" else None
        ours = commands or SlurmCommands(controller_command(cluster.inventory), slurm)
        hours = reservation_hours(run_level, spec.accept.burn_in_s)
        result = carry_out(
            ours,
            run,
            steps,
            duration_s=hours * 3600,
            retest=bool(run.data.get("retest")),
            search=search,
            settle=settle or wait_for_server,
            closing=waves(last),
        )
    return AcceptOutcome(spec.metadata.name, run, result)


def retest_repaired(
    spec_path: Path,
    nodes: Sequence[str],
    *,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    slurm: Slurm | None = None,
    commands: Commands | None = None,
    settle: Callable[[], None] | None = None,
) -> dict[str, str]:
    """`myriad resume`'s test of nodes back from repair: a quick acceptance of just those
    nodes (their own run folder and reservation); node → why it failed, empty when all
    passed. A node the run could not clear counts as failed: nothing showed it is sound."""
    outcome = accept(
        spec_path,
        "quick",
        limit=nodes,
        nodes_from="repaired",
        stack=stack,
        stack_outputs=stack_outputs,
        slurm=slurm,
        commands=commands,
        settle=settle,
    )
    result = outcome.result
    failed = {node: reason for node, reason in result.verdicts.items() if reason is not None}
    for node in set(nodes) - set(result.resumed) - set(failed):
        failed[node] = f"not cleared by acceptance (run {result.run_dir})"
    return failed
