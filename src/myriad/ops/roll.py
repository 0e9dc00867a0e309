"""`myriad roll`: apply a change node by node without killing a job.

    roll(...)        → RollResult  the command: resolve the cluster, then `run_roll`
    run_roll(...)    → RollResult  the loop, over a `Steps` (Ansible + validation) and a `Slurm`
    plan_roll(...)   → RollPlan    `--plan`: batches, check-mode changes, blocking jobs

The loop, per batch (batches from `ops.batches`: island by island, `--batch`,
`--max-unavailable`):

1. drain the batch with the roll's reason (`myriad: roll by <user>: <text>`);
2. wait until no job holds its nodes; at `--kill-after` cancel the jobs still there, at
   `--drain-timeout` give the node back untouched (resumed, status `skipped`, said so);
3. run the site play limited to the batch (the roles' handlers restart what changed);
4. validate the batch against the spec (`slurm.node-state` aside: the node is drained on
   purpose until step 5);
5. resume the nodes that passed, if their reason is still the roll's.

A node that fails step 3 or 4 stays drained (status `failed`); the roll stops once more
nodes failed than `--max-failures` allows. Before the first batch the controllers get the
change (slurm.conf): `scontrol reconfigure` where that suffices, a slurmctld restart where a
changed setting needs one (`ops.slurmconf`); running jobs survive both.

Everything the roll does is recorded in its run folder (`ops.roll_state`), so `--resume`
continues a killed roll: finished nodes are never drained again, a drained node waits on.
The whole run sits under `cluster_lock`, the one place to hold the cluster's run lock.
"""

from __future__ import annotations

import contextlib
import difflib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, TypeVar

import yaml

from myriad import paths
from myriad.errors import OpsError, OpsInputError
from myriad.ops.batches import Amount, budget_spent, plan_batches
from myriad.ops.nodes import compute_nodes
from myriad.ops.roll_result import Progress, RollResult, result_of
from myriad.ops.roll_state import FINAL, RollState, unfinished
from myriad.ops.slurm import Slurm, current_user, jobs_by_node, reason_for
from myriad.ops.slurmconf import Reload, diff_texts, reload_for_texts
from myriad.provision.resolve import ResolvedCluster, resolve_cluster
from myriad.render.tables import TABLE_VARIABLES, TABLES_FILE
from myriad.render.writer import write_inventory
from myriad.runner import TUNED, new_run_dir, run_playbook

# The drained node's own state: it is drained by the roll until it passes, so this check
# would fail for every node being rolled.
DRAINED_ON_PURPOSE = frozenset({"slurm.node-state"})
SLURM_CONF_TASK = "Render slurm.conf"
T = TypeVar("T")
ONE = Amount(1, percent=False)
NONE = Amount(0, percent=False)


@dataclass(frozen=True, slots=True)
class RollOptions:
    reason: str
    tags: tuple[str, ...] = ()
    batch: Amount = ONE
    max_unavailable: Amount | None = None
    max_failures: Amount = NONE
    drain_timeout_s: float = 3600.0
    kill_after_s: float | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    poll_s: float = 5.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["batch"] = str(self.batch)
        data["max_unavailable"] = (
            None if self.max_unavailable is None else str(self.max_unavailable)
        )
        data["max_failures"] = str(self.max_failures)
        data["tags"] = list(self.tags)
        data["variables"] = dict(self.variables)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RollOptions:
        def amount(text: str | None, option: str, zero: bool = False) -> Amount | None:
            return None if text is None else Amount.parse(text, option, allow_zero=zero)

        return cls(
            reason=str(data["reason"]),
            tags=tuple(data.get("tags") or ()),
            batch=amount(data["batch"], "--batch") or Amount(1, False),
            max_unavailable=amount(data.get("max_unavailable"), "--max-unavailable"),
            max_failures=amount(data["max_failures"], "--max-failures", True) or Amount(0, False),
            drain_timeout_s=float(data["drain_timeout_s"]),
            kill_after_s=None if data.get("kill_after_s") is None else float(data["kill_after_s"]),
            variables=dict(data.get("variables") or {}),
            poll_s=float(data.get("poll_s", 5.0)),
        )


class Steps(Protocol):
    """What a roll does to nodes besides Slurm: Ansible and validation. Each returns the
    nodes that failed, with a one-line reason."""

    def controller_reload(self, controllers: Sequence[str]) -> tuple[Reload, list[str]]: ...

    def converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]: ...

    def validate(self, nodes: Sequence[str]) -> dict[str, str]: ...


def role_variables() -> set[str]:
    """Every variable some role declares in its meta/argument_specs.yml."""
    names: set[str] = set()
    for specs in sorted(paths.roles_dir().glob("*/meta/argument_specs.yml")):
        data = yaml.safe_load(specs.read_text()) or {}
        for entry in (data.get("argument_specs") or {}).values():
            names.update((entry or {}).get("options") or {})
    return names


def read_variables(path: Path) -> dict[str, Any]:
    """`--vars FILE`: role variables for this roll (a pin, a new setting). Each must be
    declared by a role's argument spec, so a typo fails here, not silently in Ansible."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise OpsInputError(f"--vars {path}: cannot read it ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise OpsInputError(f"{where}: not YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise OpsInputError(f"{path}:1: expected a mapping of role variables (name: value)")
    known = role_variables()
    for key in data:
        line = next(
            (i for i, row in enumerate(text.splitlines(), 1) if row.startswith(f"{key}:")), 1
        )
        if str(key) in TABLE_VARIABLES:
            # Both are extra vars: one would silently replace the other's table on every node.
            raise OpsInputError(
                f"{path}:{line}: {key} is a cluster-wide table the renderer writes from the "
                f"spec (the inventory's {TABLES_FILE}); change the spec instead of overriding it"
            )
        if str(key) in known:
            continue
        close = difflib.get_close_matches(str(key), sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise OpsInputError(
            f"{path}:{line}: {key} is no role's variable (none of the roles' "
            f"meta/argument_specs.yml declares it){hint}"
        )
    return dict(data)


@contextlib.contextmanager
def cluster_lock(state_root: Path, verb: str) -> Iterator[None]:
    """The cluster's run lock (`<state root>/run.lock`) for the whole operation, so no
    bring-up, `down` or second roll runs on the nodes meanwhile; ClusterBusy names the
    holder."""
    from myriad.bringup.lock import hold_cluster_lock

    with hold_cluster_lock(state_root, verb):
        yield


def in_worker(work: Callable[[], T]) -> T:
    """Run one Ansible step in a worker thread and wait for it.

    ansible-runner replaces SIGTERM and SIGINT with handlers that only set a flag when it
    runs in the main thread, and leaves them so: the roll would never stop again. From a
    worker thread it installs nothing, so a signal reaches the roll's own handler at once;
    the step being run finishes in its thread (the interpreter waits for it on the way out)
    and its result is dropped: the node's saved status still says the step is to be done,
    and `--resume` does it again (every step is idempotent).
    """
    box: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the waiting thread as it is
            failure.append(exc)

    worker = threading.Thread(target=target, name="myriad-roll-step")
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if failure:
        raise failure[0]
    return box[0]


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM stops the roll between steps like Ctrl-C: the state is saved either way."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (tests): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- the loop ---------------------------------------------------------------------------


@dataclass
class RollLoop:
    state: RollState
    options: RollOptions
    slurm: Slurm
    steps: Steps
    progress: Progress
    controllers: Sequence[str]
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    verb: str = "roll"
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def say(self, subject: str, event: str, detail: str = "") -> None:
        """An event: into the roll log, then to whoever follows the roll."""
        self.progress(self.state.log(subject, event, detail))

    @property
    def reason(self) -> str:
        return str(self.state.data["reason"])

    def run(self) -> RollResult:
        if self.state.data["controller"] != "done" and not self.roll_controllers():
            return self.finish("stopped: the controllers' change failed")
        total = len(self.state.data["nodes"])
        for batch in self.state.data["batches"]:
            nodes = [n for n in batch["nodes"] if self.state.status(n) not in FINAL]
            if not nodes:
                continue
            self.roll_batch(int(batch["index"]), nodes)
            failed = self.state.count("failed")
            if budget_spent(failed, self.options.max_failures, total):
                return self.finish(
                    f"stopped after batch {batch['index']}: {failed} node(s) failed, "
                    f"more than --max-failures {self.options.max_failures} allows"
                )
        return self.finish("finished")

    def roll_controllers(self) -> bool:
        reload, keys = self.steps.controller_reload(self.controllers)
        subject = ",".join(self.controllers)
        detail = f"slurm.conf: {reload}" + (f" ({', '.join(keys)})" if keys else "")
        self.say(subject, "controller-start", detail)
        mode = "reconfigure" if reload in ("none", "reconfigure") else "restart"
        failures = self.steps.converge(self.controllers, {"slurm_controller_reload": mode})
        if failures:
            for host, message in failures.items():
                self.say(host, "controller-failed", message)
            return False
        self.state.data["controller"] = "done"
        self.state.data["controller_reload"] = reload
        self.state.save()
        self.say(subject, "controller-done", detail)
        return True

    def roll_batch(self, index: int, nodes: list[str]) -> None:
        self.say(f"batch{index}", "start", ",".join(nodes))
        self.drain(nodes)
        ready = self.wait_for_jobs([n for n in nodes if self.state.status(n) == "drained"])
        ready += [n for n in nodes if self.state.status(n) == "converged"]
        to_converge = [n for n in ready if self.state.status(n) == "drained"]
        if to_converge:
            failures = self.steps.converge(to_converge)
            for node in to_converge:
                if node in failures:
                    self.fail(node, f"bring-up: {failures[node]}")
                else:
                    self.state.set(node, "converged")
                    self.say(node, "converged")
        to_validate = [n for n in ready if self.state.status(n) == "converged"]
        if to_validate:
            failures = self.steps.validate(to_validate)
            passed = []
            for node in to_validate:
                if node in failures:
                    self.fail(node, f"validation: {failures[node]}")
                else:
                    passed.append(node)
            self.resume(passed)
        self.say(f"batch{index}", "end")

    def drain(self, nodes: list[str]) -> None:
        self.check_still_drained([n for n in nodes if self.state.status(n) == "drained"])
        to_drain = [n for n in nodes if self.state.status(n) == "pending"]
        if not to_drain:
            return
        states = self.slurm.nodes(to_drain)
        ours = []
        for node in to_drain:
            current = states.get(node)
            if current is None:
                self.skip(node, "Slurm does not know it")
            elif current.drained and current.reason != self.reason:
                if self.state.data.get("take_over"):
                    self.say(node, "taken-over", f"was drained: {current.reason}")
                    ours.append(node)
                else:
                    # Someone else's drain (the health runner, an operator): not ours to undo.
                    self.skip(node, f"already drained by someone else ({current.reason})")
            else:
                ours.append(node)
        if not ours:
            return
        self.slurm.drain(ours, self.reason)
        now = self.clock()
        for node in ours:
            self.state.set(node, "drained", drained_at=now)
            self.say(node, "drained")

    def check_still_drained(self, nodes: list[str]) -> None:
        """A resumed roll finds its drained nodes as it left them, or drains them again: a
        node someone resumed meanwhile may have taken jobs, and the play waits for them."""
        if not nodes:
            return
        states = self.slurm.nodes(nodes)
        lost = [n for n in nodes if n in states and not states[n].drained]
        if lost:
            self.slurm.drain(lost, self.reason)
            for node in lost:
                self.say(node, "drained-again", "it was resumed while the roll was stopped")

    def wait_for_jobs(self, nodes: list[str]) -> list[str]:
        """Nodes whose jobs have ended; the others are skipped at the drain timeout."""
        waiting, ready = list(nodes), []
        cancelled: set[str] = set()
        # Saved with the node, so a roll resumed after its jobs ended still records that they did.
        announced = {n for n in nodes if self.state.record(n).get("waited_for")}
        while waiting:
            holding = jobs_by_node(self.slurm.jobs(waiting), waiting)
            now = self.clock()
            for node in list(waiting):
                jobs = holding[node]
                waited = now - float(self.state.record(node).get("drained_at", now))
                if not jobs:
                    ready.append(node)
                    waiting.remove(node)
                    if node in announced:
                        self.say(node, "jobs-ended", f"after {waited:.0f} s")
                    continue
                ids = ",".join(j.job_id for j in jobs)
                if node not in announced:
                    announced.add(node)
                    self.state.record(node)["waited_for"] = ids
                    self.state.save()
                    self.say(node, "waiting", f"for job(s) {ids}")
                kill_after = self.options.kill_after_s
                if kill_after is not None and waited >= kill_after and node not in cancelled:
                    self.slurm.cancel([j.job_id for j in jobs])
                    cancelled.add(node)
                    self.say(node, "cancelled", f"job(s) {ids} after {waited:.0f} s (--kill-after)")
                elif waited >= self.options.drain_timeout_s:
                    waiting.remove(node)
                    self.give_back(node, f"job(s) {ids} still running after {waited:.0f} s")
            if waiting:
                self.sleep(self.options.poll_s)
        return ready

    def give_back(self, node: str, why: str) -> None:
        """A node the roll drained but did not change: back into service as it was."""
        self.resume_if_ours([node])
        self.skip(node, f"{why} (--drain-timeout); not changed, resumed")

    def resume_if_ours(self, nodes: list[str]) -> list[str]:
        states = self.slurm.nodes(nodes)
        ours = [n for n in nodes if n in states and states[n].reason == self.reason]
        for node in nodes:
            if node not in ours:
                reason = states[node].reason if node in states else "unknown to Slurm"
                self.say(node, "not-resumed", f"its reason is no longer the roll's ({reason})")
        if ours:
            self.slurm.resume(ours)
        return ours

    def resume(self, nodes: list[str]) -> None:
        if not nodes:
            return
        resumed = set(self.resume_if_ours(nodes))
        for node in nodes:
            if node in resumed:
                self.state.set(node, "done")
                self.say(node, "resumed")
            else:
                self.state.set(node, "done", "changed and validated; left drained by another")

    def skip(self, node: str, why: str) -> None:
        self.state.set(node, "skipped", why)
        self.say(node, "skipped", why)

    def fail(self, node: str, why: str) -> None:
        self.state.set(node, "failed", why)
        self.say(node, "failed", f"{why}; stays drained")

    def finish(self, outcome: str) -> RollResult:
        self.state.data.update(finished=True, outcome=outcome)
        self.state.save()
        self.say("roll", outcome)
        return result_of(self.state, self.verb, self.clock() - self.started)


def run_roll(
    state: RollState,
    slurm: Slurm,
    steps: Steps,
    progress: Progress,
    controllers: Sequence[str],
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    verb: str = "roll",
) -> RollResult:
    """The roll over the saved batches; its lines go to `progress` as they happen."""
    options = RollOptions.from_dict(state.data["options"])
    loop = RollLoop(state, options, slurm, steps, progress, controllers, clock, sleep, verb)
    try:
        return loop.run()
    except KeyboardInterrupt:
        loop.say("roll", "interrupted", "state saved; continue with `myriad roll SPEC --resume`")
        raise


def new_roll(
    state_root: Path,
    cluster: str,
    options: RollOptions,
    compute: Sequence[str],
    islands: Mapping[str, int | None],
    slurm: Slurm,
) -> RollState:
    """The batches, fixed now (idle nodes first, busy ones last) and saved with the options."""
    pending = unfinished(state_root / "runs")
    if pending is not None:
        raise OpsError(
            f"an unfinished roll is in {pending}: continue it with --resume (or move the "
            "folder away to give it up; its drained nodes stay drained)"
        )
    states = slurm.nodes(compute)
    busy = {n for job in slurm.jobs() for n in job.nodes}
    reason = reason_for("roll", options.reason)
    unavailable = [
        n for n in compute if n in states and states[n].unavailable and states[n].reason != reason
    ]
    order = sorted(compute, key=lambda n: (n in busy, compute.index(n)))
    batches = plan_batches(
        order,
        islands,
        batch=options.batch,
        max_unavailable=options.max_unavailable,
        unavailable=unavailable,
    )
    run_dir = new_run_dir(state_root, "roll")
    return RollState.create(
        run_dir,
        cluster=cluster,
        reason=reason,
        options={**options.to_dict(), "reason": options.reason},
        batches=[{"index": b.index, "island": b.island, "nodes": list(b.nodes)} for b in batches],
    )


# --- Ansible and validation -------------------------------------------------------------


class AnsibleSteps:
    """The real steps: the site play limited to a batch, `validate_cluster` limited to it."""

    def __init__(
        self, cluster: ResolvedCluster, state_root: Path, run_dir: Path, options: RollOptions
    ) -> None:
        self.cluster = cluster
        self.state_root = state_root
        self.run_dir = run_dir
        self.options = options

    @property
    def inventory_dir(self) -> Path:
        return self.state_root / "inventory"

    def _extravars(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "myriad_serial": "100%",
            "myriad_max_fail_percentage": 100,
            # A roll drains a node and waits for its jobs before converging it, so a reboot a
            # layer asks for (a kernel or driver move) is taken at once, before the roll's own
            # validation and resume; never through Slurm, whose nextstate=RESUME would race
            # them. bringup.reboot: never leaves it to the operator here too.
            "myriad_reboot": (
                "never" if self.cluster.spec.bringup.reboot == "never" else "drained"
            ),
            **self.options.variables,
            **(extra or {}),
        }

    def controller_reload(self, controllers: Sequence[str]) -> tuple[Reload, list[str]]:
        return in_worker(lambda: self._controller_reload(controllers))

    def _controller_reload(self, controllers: Sequence[str]) -> tuple[Reload, list[str]]:
        outcome = run_playbook(
            paths.playbook("site.yml"),
            self.inventory_dir / "hosts.yml",
            new_run_dir(self.run_dir, "check"),
            hosts=len(controllers),
            limit=controllers,
            tags=list(self.options.tags) or None,
            extravars=self._extravars(),
            keep_events=True,
            check=True,
        )
        for changed in changed_tasks(outcome.events):
            if changed.task == SLURM_CONF_TASK and changed.texts is not None:
                return reload_for_texts(*changed.texts)
        return "none", []

    def converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        return in_worker(lambda: self._converge(nodes, extravars))

    def _converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        outcome = run_playbook(
            paths.playbook("site.yml"),
            self.inventory_dir / "hosts.yml",
            new_run_dir(self.run_dir, "site"),
            hosts=len(nodes),
            limit=nodes,
            tags=list(self.options.tags) or None,
            extravars=self._extravars(extravars),
            tuning=TUNED,
        )
        failures = {f.host: f"{f.task}: {f.message}" for f in outcome.failures}
        for node in nodes:
            if node not in outcome.stats and node not in failures:
                failures[node] = f"no result from the site play ({outcome.status})"
        return failures

    def validate(self, nodes: Sequence[str]) -> dict[str, str]:
        return in_worker(lambda: self._validate(nodes))

    def _validate(self, nodes: Sequence[str]) -> dict[str, str]:
        from myriad.validate.service import validate_cluster

        report = validate_cluster(
            self.cluster.loaded,
            self.cluster.result,
            self.inventory_dir,
            self.cluster.inventory,
            self.run_dir,
            limit=list(nodes),
        )
        return batch_failures(report.results, report.unreachable, report.gather_failed, nodes)


def batch_failures(
    results: Sequence[Any],
    unreachable: Mapping[str, str],
    gather_failed: Mapping[str, str],
    nodes: Sequence[str],
) -> dict[str, str]:
    """Each node's failed checks in one line (`nccl.conf: expected ..., found ...`)."""
    failures: dict[str, list[str]] = {}
    for node, message in {**unreachable, **gather_failed}.items():
        failures.setdefault(node, []).append(f"unreachable or gathering failed: {message}")
    for result in results:
        if result.status not in ("fail", "error") or result.check in DRAINED_ON_PURPOSE:
            continue
        failures.setdefault(result.node, []).append(
            f"{result.check} (expected {result.expected}, found {result.actual})"
        )
    return {node: "; ".join(failures[node]) for node in nodes if node in failures}


@dataclass(frozen=True, slots=True)
class ChangedTask:
    host: str
    task: str
    texts: tuple[str, str] | None


def changed_tasks(events: Sequence[Mapping[str, Any]]) -> list[ChangedTask]:
    """The tasks a check-mode run would change, per host, with the file diff if any."""
    found = []
    for event in events:
        if event.get("event") != "runner_on_ok":
            continue
        data = event.get("event_data") or {}
        result = data.get("res") or {}
        if not result.get("changed") or not data.get("host"):
            continue
        found.append(
            ChangedTask(
                str(data["host"]), str(data.get("task") or "?"), diff_texts(result.get("diff"))
            )
        )
    return found


# The slurm role's handler for a changed slurm.conf; with `slurm_controller_reload:
# reconfigure` (what the roll passes when it chose a reconfigure) it runs scontrol reconfigure.
RESTART_HANDLER = "Restart slurmctld"


def controller_changes(
    changes: Sequence[ChangedTask], controllers: Sequence[str], reload: Reload
) -> dict[str, list[str]]:
    """What each controller would change, once each, in the words of what the roll will do:
    check mode runs the role's default reload (restart), not the one the roll chose."""
    shown: dict[str, list[str]] = {}
    for change in changes:
        if change.host not in controllers:
            continue
        task = change.task
        if task == RESTART_HANDLER and reload == "reconfigure":
            task = "Reconfigure slurmctld (scontrol reconfigure)"
        tasks = shown.setdefault(change.host, [])
        if task not in tasks:
            tasks.append(task)
    return shown


# --- the command ------------------------------------------------------------------------


def _islands(cluster: ResolvedCluster) -> dict[str, int | None]:
    from myriad.plan.nodes import iter_nodes

    return {n.name: n.island for n in iter_nodes(cluster.spec)}


def prepare(
    spec_path: Path, stack: str | None, stack_outputs: Path | None
) -> tuple[ResolvedCluster, Path, list[str], list[str]]:
    from myriad.bringup.flow import cluster_state, write_node_artefact

    cluster = resolve_cluster(spec_path, stack=stack, stack_outputs=stack_outputs)
    if cluster.spec.software.orchestrator != "slurm":
        raise OpsInputError(f"{spec_path}: `myriad roll` drives Slurm clusters")
    state = cluster_state(cluster.spec.metadata.name)
    write_inventory(cluster.inventory, state.inventory)
    # The site play converges replaced nodes: the rdma role ships this Myriad's node package.
    write_node_artefact(state)
    compute = compute_nodes(cluster.inventory)
    controllers = [
        *cluster.inventory.groups.get("controller", ()),
        *cluster.inventory.groups.get("login", ()),
    ]
    return cluster, state.root, compute, list(dict.fromkeys(controllers))


def roll(
    spec_path: Path,
    progress: Progress,
    options: RollOptions | None,
    *,
    resume: bool = False,
    stack: str | None = None,
    stack_outputs: Path | None = None,
) -> RollResult:
    """`myriad roll SPEC ...` or `myriad roll SPEC --resume`: what the roll did."""
    cluster, state_root, compute, controllers = prepare(spec_path, stack, stack_outputs)
    slurm = Slurm.of(cluster.inventory)
    with cluster_lock(state_root, "roll"), sigterm_stops():
        if resume:
            folder = unfinished(state_root / "runs")
            if folder is None:
                raise OpsError(f"no unfinished roll under {state_root / 'runs'} to resume")
            state = RollState.load(folder)
            state.log("roll", "resumed", f"by {current_user()}")
            progress(f"resuming the roll in {folder}")
        else:
            if options is None:
                raise OpsInputError("myriad roll needs --reason (or --resume)")
            state = new_roll(
                state_root, cluster.spec.metadata.name, options, compute, _islands(cluster), slurm
            )
            state.log("roll", "started", state.data["reason"])
        saved = RollOptions.from_dict(state.data["options"])
        steps = AnsibleSteps(cluster, state_root, state.run_dir, saved)
        return run_roll(state, slurm, steps, progress, controllers)


@dataclass(frozen=True, slots=True)
class PlannedNode:
    batch: int
    island: int | None
    node: str
    state: str  # "" when available, else Slurm's state and reason
    would_change: tuple[str, ...]
    blocked_by: tuple[str, ...]  # jobs: "<id> (<user>)"


@dataclass(frozen=True, slots=True)
class RollPlan:
    """`myriad roll --plan`: the batches, what check mode would change where, the jobs in
    the way and how the controllers would take a changed slurm.conf."""

    cluster: str
    reason: str
    controllers: tuple[str, ...]
    reload: Reload
    reload_keys: tuple[str, ...]
    nodes: tuple[PlannedNode, ...]
    controller_changes: Mapping[str, list[str]]
    failures: tuple[str, ...]

    @property
    def how(self) -> str:
        return {
            "none": "slurm.conf unchanged: nothing to reload",
            "reconfigure": "scontrol reconfigure (no changed setting needs a restart)",
            "restart": "slurmctld restart (a changed setting needs one); running jobs survive it",
        }[self.reload]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "reason": self.reason,
            "controllers": list(self.controllers),
            "reload": self.reload,
            "reload_keys": list(self.reload_keys),
            "nodes": [asdict(node) for node in self.nodes],
            "controller_changes": dict(self.controller_changes),
            "check_mode_failures": list(self.failures),
        }


def plan_roll(
    spec_path: Path,
    options: RollOptions,
    *,
    stack: str | None = None,
    stack_outputs: Path | None = None,
) -> RollPlan:
    """`--plan`: nothing changes on the nodes; the check-mode run's log stays under the
    state folder."""
    cluster, state_root, compute, controllers = prepare(spec_path, stack, stack_outputs)
    slurm = Slurm.of(cluster.inventory)
    states = slurm.nodes(compute)
    jobs = slurm.jobs()
    busy = jobs_by_node(jobs, compute)
    order = sorted(compute, key=lambda n: (bool(busy[n]), compute.index(n)))
    unavailable = [n for n in compute if n in states and states[n].unavailable]
    batches = plan_batches(
        order,
        _islands(cluster),
        batch=options.batch,
        max_unavailable=options.max_unavailable,
        unavailable=unavailable,
    )
    run_dir = new_run_dir(state_root, "roll-plan")
    steps = AnsibleSteps(cluster, state_root, run_dir, options)
    outcome = run_playbook(
        paths.playbook("site.yml"),
        state_root / "inventory" / "hosts.yml",
        new_run_dir(run_dir, "check"),
        hosts=len(compute) + len(controllers),
        limit=[*controllers, *compute],
        tags=list(options.tags) or None,
        extravars=steps._extravars(),
        keep_events=True,
        check=True,
    )
    changes = changed_tasks(outcome.events)
    reload: Reload = "none"
    keys: list[str] = []
    for change in changes:
        if change.host in controllers and change.task == SLURM_CONF_TASK and change.texts:
            reload, keys = reload_for_texts(*change.texts)
    by_host: dict[str, list[str]] = {}
    for change in changes:
        by_host.setdefault(change.host, []).append(change.task)
    planned = tuple(
        PlannedNode(
            batch.index,
            batch.island,
            node,
            f"{states[node].state}: {states[node].reason or 'no reason'}"
            if node in states and states[node].unavailable
            else "",
            tuple(dict.fromkeys(by_host.get(node, []))),
            tuple(f"{j.job_id} ({j.user})" for j in busy[node]),
        )
        for batch in batches
        for node in batch.nodes
    )
    return RollPlan(
        cluster.spec.metadata.name,
        reason_for("roll", options.reason),
        tuple(controllers),
        reload,
        tuple(keys),
        planned,
        controller_changes(changes, controllers, reload),
        tuple(f"{f.host}: {f.task}: {f.message}" for f in outcome.failures),
    )
