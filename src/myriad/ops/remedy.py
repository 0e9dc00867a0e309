"""`myriad remedy SPEC [--dry-run]`: carry out remediation's decisions, each only when safe.

One pass: gather every compute node's health state and Slurm's view (the gathering of
`myriad health`), read the action log, settle the actions under way (a reboot or power cycle
whose node is back), call `myriad.health.remedy.decide`, then carry out each `act` decision,
checking again right before it that it is still safe:

- drain: `scontrol update state=DRAIN` with a `myriad-remedy: ` reason;
- reset-gpu: on the node, `nvidia-smi -r`, only while Slurm holds it drained, no job runs on
  it and `nvidia-smi --query-compute-apps` lists no process;
- reboot: `scontrol reboot ASAP nextstate=RESUME reason=...` (slurm.conf's RebootProgram once
  its jobs end; slurmd's HealthCheckProgram runs once before the node registers again);
- power-cycle: the node's BMC through the bare-metal provider's Redfish client, only while it
  is drained and still does not answer;
- needs-hardware: the node is (kept) drained with the reason, and the spec's hook runs:
  an executable given the JSON payload on stdin, or an HTTP(S) POST of it.

Every action is appended to the cluster's action log (`remediation-log.json` in its state
folder, `myriad.remediation.log/v1`) as it happens, so that the next pass reads it as history
and a crash half-way loses nothing done. A dry run decides and records nothing.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from myriad.errors import ClusterBusy, OpsError, OpsInputError, RedfishError
from myriad.fsutil import atomic_write_text
from myriad.health.remedy import (
    BY_AUTOMATIC,
    NODE_ACTIONS,
    REASON_PREFIX,
    ActionRecord,
    Decision,
    NodeState,
    RemediationPlan,
    decide,
    findings_from_state,
    hook_payload,
    log_document,
    read_log,
)
from myriad.health.report import HealthGathering, HealthReport, NodeHealth
from myriad.ops.slurm import COMMAND_TIMEOUT_S, HEALTH_PREFIX, Completed, Job, Slurm
from myriad.ops.slurm import NodeState as SlurmNode
from myriad.render.monitoring import TEXTFILE_DIRECTORY
from myriad.spec.health import Remediation

LOG_FILE = Path("remediation-log.json")
METRICS_FILE = Path("remediation.prom")
# On the first controller, where its node exporter's textfile collector reads it (the
# folder the health runner and the Slurm collector write to).
CONTROLLER_METRICS = f"{TEXTFILE_DIRECTORY}/myriad_remediation.prom"
# A reboot or power cycle not back in service within this long is recorded failed, and the
# node's next failure escalates. slurm.conf's ResumeTimeout marks it DOWN well before.
SETTLE_TIMEOUT_S = 3600.0
GPU_APPS = ("nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader")
GPU_RESET = ("nvidia-smi", "-r")

NodeRunner = Callable[[str, Sequence[str]], Completed]
PowerCycler = Callable[[str], str]
HookRunner = Callable[[Mapping[str, Any]], str]


# --- the action log ----------------------------------------------------------------------


def load_history(state_root: Path) -> tuple[ActionRecord, ...]:
    """The cluster's action log, oldest first; empty when remediation never acted here."""
    path = state_root / LOG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise OpsError(f"{path}: cannot read the action log: {exc}") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OpsError(f"{path}: the action log is not JSON ({exc}); move it aside") from exc
    if not isinstance(document, Mapping):
        raise OpsError(f"{path}: the action log is not a JSON object; move it aside")
    return read_log(document)


def append_history(state_root: Path, records: Sequence[ActionRecord]) -> None:
    """Add `records` to the log (rewritten whole, atomically: a reader never sees half)."""
    if not records:
        return
    kept = load_history(state_root)
    document = log_document([*kept, *records])
    atomic_write_text(state_root / LOG_FILE, json.dumps(document, indent=1) + "\n", mode=0o600)


# --- what the controller sees -------------------------------------------------------------


def drained_by(reason: str | None) -> Literal["myriad-health", "myriad-remedy", "other"]:
    text = reason or ""
    if text.startswith(REASON_PREFIX):
        return "myriad-remedy"
    if text.startswith(HEALTH_PREFIX):
        return "myriad-health"
    return "other"


def node_states(
    report: HealthReport,
    states: Mapping[str, Mapping[str, Any]],
    slurm_nodes: Mapping[str, SlurmNode],
    jobs: Sequence[Job],
    gpu_processes: Mapping[str, int | None],
    history: Sequence[ActionRecord],
    *,
    racks: Mapping[str, str] | None = None,
    islands: Mapping[str, int] | None = None,
) -> tuple[NodeState, ...]:
    """`decide`'s input, from one gathering: each compute node's findings (its state file),
    whether it answered, Slurm's drain and reason, its running jobs and GPU processes."""
    busy: dict[str, int] = {}
    for job in jobs:
        for node in job.nodes:
            busy[node] = busy.get(node, 0) + 1
    out = []
    for row in report.nodes:
        slurm = slurm_nodes.get(row.node)
        drained = slurm.drained if slurm is not None else bool(row.drained)
        reason = slurm.reason if slurm is not None else row.reason
        out.append(
            NodeState(
                node=row.node,
                findings=findings_from_state(states.get(row.node, {})) if row.reachable else (),
                reachable=row.reachable,
                drained=drained,
                drained_by=drained_by(reason) if drained else None,
                since=_since(row, history),
                running_jobs=busy.get(row.node, 0),
                gpu_processes=gpu_processes.get(row.node),
                island=(islands or {}).get(row.node),
                rack=(racks or {}).get(row.node),
            )
        )
    return tuple(out)


def _since(row: NodeHealth, history: Sequence[ActionRecord]) -> float | None:
    """When the node's failure began: node health's drain time; for one that stopped
    answering, remediation's drain of it (so the power-cycle grace counts across passes)."""
    if row.since is not None:
        return row.since
    drains = [r.when for r in history if r.node == row.node and r.action == "drain"]
    if not row.reachable and drains:
        return max(drains)
    return None


def gpu_process_count(run_on: NodeRunner, node: str) -> int | None:
    """Processes on the node's GPUs (`nvidia-smi --query-compute-apps`); None: not read."""
    try:
        done = run_on(node, GPU_APPS)
    except OpsError:
        return None
    if done.rc != 0:
        return None
    return len([line for line in done.stdout.splitlines() if line.strip()])


# --- settling what is under way -----------------------------------------------------------


def settle(
    history: Sequence[ActionRecord],
    report: HealthReport,
    slurm_nodes: Mapping[str, SlurmNode],
    now: float,
) -> tuple[ActionRecord, ...]:
    """A `succeeded` record for each reboot or power cycle whose node is back, a `failed`
    one for each not back within SETTLE_TIMEOUT_S; nothing for the rest, still under way.

    Back after a reboot: it answers and Slurm holds it no longer (nextstate=RESUME returned
    it). Back after a power cycle: it answers and slurmd registered (not down, not `*`); it
    stays drained (Slurm's ReturnToService returns only DOWN nodes) until `returning`."""
    latest = _latest_repairs(history)
    rows = {row.node: row for row in report.nodes}
    out = []
    for node, record in sorted(latest.items()):
        if record.result != "started" or record.action not in ("reboot", "power-cycle"):
            continue
        row, slurm = rows.get(node), slurm_nodes.get(node)
        if row is None or slurm is None:
            continue
        if record.action == "reboot":
            back = (
                row.reachable
                and not slurm.unavailable
                and not (slurm.drained and drained_by(slurm.reason) == "myriad-remedy")
            )
        else:
            registered = not any(w in slurm.state for w in ("down", "unknown", "reboot"))
            back = row.reachable and registered and not slurm.state.endswith("*")
        if back:
            out.append(_follow_up(record, now, "succeeded", f"back ({slurm.state})"))
        elif now - record.when > SETTLE_TIMEOUT_S:
            detail = f"not back after {now - record.when:.0f} s (Slurm: {slurm.state})"
            out.append(_follow_up(record, now, "failed", detail))
    return tuple(out)


def returning(
    history: Sequence[ActionRecord],
    report: HealthReport,
    slurm_nodes: Mapping[str, SlurmNode],
) -> tuple[str, ...]:
    """Nodes remediation drained because they stopped answering (then power-cycled, or back
    by themselves) that answer again and whose own health run since passes: to resume.
    Not a node sent for repair (`myriad resume` tests it again) nor one with findings."""
    latest: dict[str, ActionRecord] = {}
    for entry in sorted(history, key=lambda r: r.when):
        if entry.result != "dry-run":
            latest[entry.node] = entry
    out = []
    for row in report.nodes:
        last, slurm = latest.get(row.node), slurm_nodes.get(row.node)
        if last is None or slurm is None or drained_by(slurm.reason) != "myriad-remedy":
            continue
        unanswered = last.action == "drain" or (
            last.action == "power-cycle" and last.result == "succeeded"
        )
        ran_since = row.last_run is not None and row.last_run > last.when
        if unanswered and slurm.drained and row.reachable and ran_since and not row.failing:
            out.append(row.node)
    return tuple(out)


def _latest_repairs(history: Sequence[ActionRecord]) -> dict[str, ActionRecord]:
    latest: dict[str, ActionRecord] = {}
    for record in sorted(history, key=lambda r: r.when):
        if record.result != "dry-run" and record.action != "drain":
            latest[record.node] = record
    return latest


def _follow_up(record: ActionRecord, now: float, result: Any, detail: str) -> ActionRecord:
    return ActionRecord(record.node, record.action, record.why, now, BY_AUTOMATIC, result, detail)


# --- carrying decisions out ---------------------------------------------------------------


@dataclass
class Actuators:
    """How a pass reaches the cluster: Slurm on the controller, a command on a node, the
    node's BMC (None: the provider has none, e.g. a cloud or the local twin) and the hook
    (None: the spec names none)."""

    slurm: Slurm
    run_on: NodeRunner
    power_cycle: PowerCycler | None = None
    hook: HookRunner | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one `act` decision: `done` (an action record was written) or
    `skipped` (the check right before it found it no longer safe; nothing recorded)."""

    decision: Decision
    status: Literal["done", "skipped", "dry-run"]
    record: ActionRecord | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.decision.node,
            "action": self.decision.action,
            "status": self.status,
            "record": self.record.to_dict() if self.record else None,
            "note": self.note,
        }


@dataclass(frozen=True)
class RemedyResult:
    cluster: str
    plan: RemediationPlan
    settled: tuple[ActionRecord, ...]
    outcomes: tuple[Outcome, ...]
    log: tuple[ActionRecord, ...] = field(default=())
    metrics: str = ""
    resumed: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.record and o.record.result == "failed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "myriad.remedy/v1",
            "cluster": self.cluster,
            "plan": self.plan.to_dict(),
            "settled": [r.to_dict() for r in self.settled],
            "outcomes": [o.to_dict() for o in self.outcomes],
            "metrics": self.metrics,
            "resumed": list(self.resumed),
        }


class _Unsafe(Exception):
    """The check right before an action found it no longer safe."""


def _slurm_reason(decision: Decision) -> str:
    # As the decision's `how` shows it (remedy._how): a quote would be mangled by the shell
    # that ssh hands the command to.
    return (REASON_PREFIX + decision.reason).replace("'", "")[:240]


def _still_drained_and_idle(act: Actuators, node: str) -> None:
    state = act.slurm.nodes([node]).get(node)
    if state is None or not state.drained:
        raise _Unsafe(f"Slurm no longer holds {node} drained")
    if drained_by(state.reason) == "other":
        raise _Unsafe(f"{node} is now drained by someone else ({state.reason})")
    jobs = act.slurm.jobs([node])
    if jobs:
        raise _Unsafe(f"job {', '.join(j.job_id for j in jobs)} now runs on {node}")


def _carry_out(
    decision: Decision, act: Actuators, cluster: str, history: Sequence[ActionRecord], now: float
) -> tuple[Any, str]:
    """Carry out one decision; its result (`started`, `succeeded`, `failed`) and detail."""
    node = decision.node
    if decision.action == "drain":
        act.slurm.drain([node], _slurm_reason(decision))
        return "succeeded", "drained"
    if decision.action == "reset-gpu":
        _still_drained_and_idle(act, node)
        processes = gpu_process_count(act.run_on, node)
        if processes != 0:
            said = "could not be read" if processes is None else f"{processes} running"
            raise _Unsafe(f"GPU processes {said} on {node}")
        done = act.run_on(node, GPU_RESET)
        text = (done.stdout + done.stderr).strip().splitlines()
        last = text[-1] if text else "no output"
        if done.rc != 0:
            return "failed", f"nvidia-smi -r exit {done.rc}: {last}"
        return "succeeded", f"nvidia-smi -r: {last}"
    if decision.action == "reboot":
        _still_drained_and_idle(act, node)
        act.slurm.reboot([node], _slurm_reason(decision))
        return "started", "scontrol reboot ASAP nextstate=RESUME"
    if decision.action == "power-cycle":
        if act.power_cycle is None:
            return "failed", "no BMC client: the provider is not bare metal (or no credentials)"
        state = act.slurm.nodes([node]).get(node)
        if state is None or not state.drained:
            raise _Unsafe(f"Slurm no longer holds {node} drained")
        try:
            answered = act.run_on(node, ("true",)).rc == 0
        except OpsError:
            answered = False
        if answered:
            raise _Unsafe(f"{node} answers again: no power cycle")
        sent = act.power_cycle(node)
        return "started", f"Redfish ResetType {sent}"
    if decision.action == "needs-hardware":
        act.slurm.drain([node], _slurm_reason(decision))
        if act.hook is None:
            return "succeeded", "kept drained; no hook configured (the alert and this log only)"
        payload = hook_payload(cluster, decision, history, now)
        return "succeeded", f"kept drained; hook: {act.hook(payload)}"
    raise OpsError(f"{node}: {decision.action} is not an action remediation carries out")


def execute(
    plan: RemediationPlan,
    act: Actuators,
    cluster: str,
    history: Sequence[ActionRecord],
    state_root: Path,
    *,
    clock: Callable[[], float] = time.time,
) -> tuple[Outcome, ...]:
    """Carry out the plan's `act` decisions in order, each appended to the log as it ends.
    A failing action is recorded `failed` and the pass goes on with the next node."""
    outcomes = []
    for decision in plan.acting():
        if plan.dry_run:
            outcomes.append(
                Outcome(decision, "dry-run", decision.record(plan.generated, dry_run=True))
            )
            continue
        when = clock()
        try:
            result, detail = _carry_out(decision, act, cluster, history, when)
        except _Unsafe as exc:
            outcomes.append(Outcome(decision, "skipped", note=f"not safe any more: {exc}"))
            continue
        except OpsError as exc:
            result, detail = "failed", str(exc)
        record = ActionRecord(
            decision.node, decision.action, decision.reason, when, BY_AUTOMATIC, result, detail
        )
        append_history(state_root, [record])
        outcomes.append(Outcome(decision, "done", record))
    return tuple(outcomes)


# --- the hook -----------------------------------------------------------------------------


def _without_secrets(hook: str) -> str:
    """A webhook URL as logs may show it: no user, password, query or fragment (where chat
    and ticket services put their tokens)."""
    if not hook.startswith(("http://", "https://")):
        return hook
    parts = urllib.parse.urlsplit(hook)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    hidden = " (query hidden)" if parts.query or parts.fragment else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")) + hidden


def hook_runner(hook: str, timeout_s: float) -> HookRunner:
    """Run the spec's hook with a payload: an executable (the JSON on stdin; exit 0 is
    success) or an http(s) URL (POSTed as application/json; a 2xx is success). A failure is
    an OpsError naming the hook and why."""

    shown = _without_secrets(hook)

    def run(payload: Mapping[str, Any]) -> str:
        body = json.dumps(payload).encode()
        if hook.startswith(("http://", "https://")):
            request = urllib.request.Request(
                hook, data=body, method="POST", headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=timeout_s) as response:
                    return f"POST {shown}: HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                raise OpsError(f"hook POST {shown}: HTTP {exc.code} {exc.reason}") from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise OpsError(f"hook POST {shown}: {reason}") from None
        try:
            done = subprocess.run(
                [hook], input=body, capture_output=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise OpsError(f"hook {hook}: still running after {timeout_s:g} s; stopped") from exc
        except OSError as exc:
            raise OpsError(f"hook {hook}: cannot run: {exc}") from exc
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        if done.returncode != 0:
            last = said[-1] if said else "no output"
            raise OpsError(f"hook {hook}: exit {done.returncode}: {last}")
        return f"{hook}: exit 0"

    return run


# --- Prometheus ---------------------------------------------------------------------------


def metrics_text(log: Sequence[ActionRecord], plan: RemediationPlan, policy: Remediation) -> str:
    """The pass's Prometheus textfile: actions taken (from the whole log), the budget in use,
    the breaker, and the nodes waiting for hardware."""
    taken: dict[tuple[str, str], int] = {}
    for record in log:
        if record.result != "dry-run":
            key = (record.action, record.result)
            taken[key] = taken.get(key, 0) + 1
    lines = [
        "# HELP myriad_remediation_actions_total Remediation actions recorded, by result.",
        "# TYPE myriad_remediation_actions_total counter",
    ]
    lines += [
        f'myriad_remediation_actions_total{{action="{a}",result="{r}"}} {n}'
        for (a, r), n in sorted(taken.items())
    ]
    latest: dict[str, ActionRecord] = {}
    for record in sorted(log, key=lambda r: r.when):
        if record.result != "dry-run" and record.action != "drain":
            latest[record.node] = record
    # After this pass's actions, not before: a reboot it started is in progress.
    under_way = [r for r in latest.values() if r.result == "started" and r.action in NODE_ACTIONS]
    waiting = sorted(
        d.node for d in plan.decisions if d.action == "needs-hardware" and d.status != "held"
    )
    lines += [
        "# HELP myriad_remediation_in_progress Nodes with a reset, reboot or power cycle begun.",
        "# TYPE myriad_remediation_in_progress gauge",
        f"myriad_remediation_in_progress {len(under_way)}",
        "# HELP myriad_remediation_budget_nodes health.remediation.max_nodes.",
        "# TYPE myriad_remediation_budget_nodes gauge",
        f"myriad_remediation_budget_nodes {policy.max_nodes}",
        "# HELP myriad_remediation_breaker_tripped 1 while the breaker stops automatic actions.",
        "# TYPE myriad_remediation_breaker_tripped gauge",
        f"myriad_remediation_breaker_tripped {int(plan.breaker.tripped)}",
        "# HELP myriad_remediation_breaker_failing Nodes that began failing in the window.",
        "# TYPE myriad_remediation_breaker_failing gauge",
        f"myriad_remediation_breaker_failing {plan.breaker.failing}",
        "# HELP myriad_remediation_needs_hardware 1 for a node (host) kept drained for repair.",
        "# TYPE myriad_remediation_needs_hardware gauge",
    ]
    # `host`, not `node`: the scrape's own `node` label names the controller.
    lines += [f'myriad_remediation_needs_hardware{{host="{n}"}} 1' for n in waiting]
    lines += [
        "# HELP myriad_remediation_last_run_timestamp_seconds When remediation last decided.",
        "# TYPE myriad_remediation_last_run_timestamp_seconds gauge",
        f"myriad_remediation_last_run_timestamp_seconds {plan.generated:.3f}",
    ]
    return "\n".join(lines) + "\n"


# --- the verb -----------------------------------------------------------------------------


def publish_metrics(slurm: Slurm, text: str) -> str:
    """Write the textfile on the controller (atomically: a scrape never reads half); returns
    where, or why not (a pass that acted is not undone by a metrics file it could not write)."""
    script = 'umask 022 && printf "%s" "$1" > "$2.tmp" && mv "$2.tmp" "$2"'
    try:
        slurm.run("sh", "-c", script, "sh", text, CONTROLLER_METRICS)
    except OpsError as exc:
        return f"metrics not published on the controller: {exc}"
    return f"metrics published on the controller: {CONTROLLER_METRICS}"


def node_runner(inventory: Any, run: Callable[..., Any] = subprocess.run) -> NodeRunner:
    """Run one command on a compute node as root, the way Ansible reaches it."""
    from myriad.ops.slurm import host_command

    def on(node: str, argv: Sequence[str]) -> Completed:
        prefix = host_command(inventory, node)
        command = [*prefix, shlex.join(argv)] if prefix[0] == "ssh" else [*prefix, *argv]
        try:
            done = run(
                command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OpsError(f"could not reach {node} ({shlex.join(command)}): {exc}") from exc
        return Completed(done.returncode, done.stdout, done.stderr)

    return on


def remedy(
    spec_path: Path,
    *,
    dry_run: bool = False,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    actuators: Actuators | None = None,
    clock: Callable[[], float] = time.time,
) -> RemedyResult:
    """One remediation pass over the cluster (see the module's docstring); all but a dry
    run hold the cluster's lock (ClusterBusy while a roll, a bring-up or another pass runs)."""
    from myriad.bringup.flow import cluster_state
    from myriad.bringup.lock import hold_cluster_lock
    from myriad.health.report import gather_health

    gathering = gather_health(spec_path, stack=stack, stack_outputs=stack_outputs)
    cluster = gathering.cluster
    spec = cluster.spec
    policy = spec.health.remediation if spec.health is not None else None
    if policy is None:
        raise OpsInputError(
            f"{spec_path}: health.remediation is not set: remediation is off (see README, "
            "'Keeping nodes healthy')"
        )
    if spec.software.orchestrator != "slurm":
        raise OpsInputError(
            f"{spec_path}: remediation acts through Slurm; this cluster's orchestrator is "
            f"{spec.software.orchestrator}"
        )
    act = actuators or default_actuators(cluster, policy)
    state = cluster_state(spec.metadata.name)
    # The cluster's run lock, as a roll or a bring-up takes it: two passes at once could each
    # take the budget's last place, and a reboot mid-roll would break the roll's batch.
    lock: AbstractContextManager[object] = (
        nullcontext() if dry_run else hold_cluster_lock(state.root, "remedy")
    )
    with lock:
        return _one_pass(gathering, policy, act, state.root, dry_run, clock)


def _one_pass(
    gathering: HealthGathering,
    policy: Remediation,
    act: Actuators,
    root: Path,
    dry_run: bool,
    clock: Callable[[], float],
) -> RemedyResult:
    from myriad.health.actions import load_action_map
    from myriad.plan.nodes import iter_nodes
    from myriad.render.monitoring import racks

    cluster = gathering.cluster
    spec = cluster.spec
    history = load_history(root)
    report = gathering.report
    names = [row.node for row in report.nodes]
    slurm_nodes = act.slurm.nodes(names)
    jobs = act.slurm.jobs(names)
    now = clock()
    settled = settle(history, report, slurm_nodes, now)
    if settled and not dry_run:
        append_history(root, settled)
    history = (*history, *settled)
    back = returning(history, report, slurm_nodes)
    if back and not dry_run:
        act.slurm.resume(list(back))
    gpu = {
        row.node: gpu_process_count(act.run_on, row.node)
        for row in report.nodes
        if row.reachable and slurm_nodes.get(row.node) and slurm_nodes[row.node].drained
    }
    records = list(iter_nodes(spec))
    nodes = node_states(
        report,
        gathering.states,
        slurm_nodes,
        jobs,
        gpu,
        history,
        racks=racks(spec, cluster.loaded.catalog, records),
        islands={r.name: r.island for r in records if r.island is not None},
    )
    plan = decide(nodes, history, policy, load_action_map(), now, dry_run=dry_run)
    outcomes = execute(plan, act, spec.metadata.name, history, root, clock=clock)
    log = load_history(root)
    published = ""
    if not dry_run:
        text = metrics_text(log, plan, policy)
        atomic_write_text(root / METRICS_FILE, text, mode=0o644)
        if spec.monitoring.enabled:
            published = publish_metrics(act.slurm, text)
        else:
            published = f"monitoring is off: metrics only in {root / METRICS_FILE}"
    return RemedyResult(spec.metadata.name, plan, settled, outcomes, log, published, back)


# The shortest time between two passes of `remedy --every`: a reboot through Slurm takes
# minutes, and a pass reads every node's health file and Slurm's view each time.
MIN_EVERY_S = 60


def remedy_every(
    run_pass: Callable[[], RemedyResult],
    every_s: float,
    report: Callable[[RemedyResult | str], None],
    stop: threading.Event,
) -> int:
    """Pass after pass, `every_s` seconds apart, until `stop` is set (the caller sets it on
    SIGTERM or Ctrl-C, so a pass in progress finishes first); each pass's result goes to
    `report`; returns how many passes ran. A pass refused because another run holds the
    cluster, or one that could not reach it, is reported as a line and the next comes as
    planned; a spec or input error (OpsInputError) ends the loop, as it ends one pass."""
    passes = 0
    while not stop.is_set():
        try:
            report(run_pass())
        except OpsInputError:
            raise
        except (ClusterBusy, OpsError, RedfishError) as exc:
            report(f"pass skipped: {exc}")
        passes += 1
        if stop.wait(every_s):
            break
    return passes


def default_actuators(cluster: Any, policy: Remediation) -> Actuators:
    """Slurm and ssh/docker as Ansible reaches the nodes; the BMC for a bare-metal cluster
    whose credentials are in MYRIAD_BMC_USERNAME / MYRIAD_BMC_PASSWORD (as `myriad provision
    wait` reads them); the spec's hook."""
    from myriad.provision.redfish import NodeTarget, power_cycle_node
    from myriad.provision.wait import bmc_credentials_from_env

    spec = cluster.spec
    power: PowerCycler | None = None
    credentials = bmc_credentials_from_env()
    if spec.provider.kind == "baremetal" and credentials is not None:
        hosts = {host.name: host for host in spec.provider.hosts}

        def power(node: str) -> str:
            host = hosts.get(node)
            if host is None:
                raise OpsError(f"{node}: no bare-metal host entry, so no BMC to power-cycle it")
            target = NodeTarget(
                name=node,
                bmc_address=host.bmc_address,
                credentials=credentials,
                address=host.address,
                os=spec.software.os,
                redfish_system=host.redfish_system,
            )
            try:
                return power_cycle_node(target)
            except RedfishError as exc:
                raise OpsError(f"{node}: power cycle through its BMC failed: {exc}") from exc

    hook = hook_runner(policy.hook, policy.hook_timeout_s) if policy.hook else None
    return Actuators(Slurm.of(cluster.inventory), node_runner(cluster.inventory), power, hook)
