"""From drained to repaired: what to do about each failing node, decided on the controller.

`decide` is a pure function. Given every compute node's state (its findings, whether Slurm has
it drained and by whom, its running jobs and GPU processes, whether it answers, its island and
rack), the action history and the spec's `health.remediation` policy, it returns a
`RemediationPlan`: one `Decision` per node that needs one, each `act`, `wait` (not yet safe, or
over the budget) or `held` (the breaker, a rack fault, someone else's drain), with the reason.
The decisions are data: a dry run prints them, a run executes the `act` ones (Slurm, the node,
the BMC) and records each as an `ActionRecord`. Nothing here runs a command.

The rules, in order:

1. **The action** a node's findings ask for is the worst of their entries in the action map
   (`myriad.health.actions`): none < reset-gpu < reboot < power-cycle < needs-hardware. A
   node that stopped answering is the finding `node.unreachable` (power-cycle).
2. **Racks and NVLink domains**: when at least two of a rack's nodes fail and they are at least
   `rack_share` of it, the rack is drained as a unit (its other nodes get `drain`) and its
   failing nodes are held: a fault shared by a rack (power, cooling, an NVLink switch tray) is
   not fixed node by node.
3. **The breaker**: when `breaker_nodes` or more nodes began failing within `breaker_window_s`,
   nothing acts on a node (drains still happen: they only stop new work) and the plan says why.
4. **Escalation**: a node failing again within `escalation_window_s` of an action gets the next
   action up the ladder, never the same one again; a reachable node goes reset → reboot → needs
   hardware, an unreachable one power cycle → needs hardware.
5. **Safety**: nothing acts on a node with a running job, or whose jobs could not be read; a GPU
   reset needs the node drained and its GPUs free of processes; a reboot goes through Slurm
   (`scontrol reboot ASAP nextstate=RESUME`); a BMC power cycle only for a node that is
   unreachable and drained for `power_cycle_grace_s`; needs-hardware keeps the node drained and
   fires the hook. Only nodes drained by node health or by remediation itself are acted on.
6. **The budget**: at most `max_nodes` nodes in remediation at once (an action started and not
   yet finished), and at most `max_island_share` of an island (at least one node).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from myriad.errors import ValidateError
from myriad.health.actions import (
    LADDER,
    RECOVERY_CHECK,
    UNREACHABLE,
    XID_CHECK,
    Action,
    ActionMap,
    Finding,
    Rule,
)
from myriad.spec.health import Remediation

REASON_PREFIX = "myriad-remedy: "
BY_AUTOMATIC = "myriad-remedy"
LOG_FORMAT = "myriad.remediation.log/v1"
HOOK_FORMAT = "myriad.remediation.hook/v1"

DecidedAction = Literal["drain", "none", "reset-gpu", "reboot", "power-cycle", "needs-hardware"]
# What the action log keeps: the decided actions, and a person's `myriad resume` of a node
# sent for repair (ops/nodes.py), which ends that repair.
RecordedAction = Literal[
    "drain", "none", "reset-gpu", "reboot", "power-cycle", "needs-hardware", "resume"
]
Status = Literal["act", "wait", "held"]
Result = Literal["dry-run", "started", "succeeded", "failed"]
DrainedBy = Literal["myriad-health", "myriad-remedy", "other"]
RESULTS: tuple[Result, ...] = ("dry-run", "started", "succeeded", "failed")
# The actions that change a node and so count against the budget while under way.
NODE_ACTIONS: tuple[Action, ...] = ("reset-gpu", "reboot", "power-cycle")
_RECORDED: tuple[str, ...] = ("drain", *LADDER, "resume")


@dataclass(frozen=True, slots=True)
class NodeState:
    """What the controller knows of one compute node now.

    `since` is when its current failure was first seen (its drain, or when it stopped
    answering); `running_jobs` and `gpu_processes` are None when they could not be read."""

    node: str
    findings: tuple[Finding, ...] = ()
    reachable: bool = True
    drained: bool = False
    drained_by: DrainedBy | None = None
    since: float | None = None
    running_jobs: int | None = 0
    gpu_processes: int | None = 0
    island: int | None = None
    rack: str | None = None

    @property
    def failing(self) -> bool:
        return bool(self.findings) or not self.reachable

    def all_findings(self) -> tuple[Finding, ...]:
        if self.reachable or any(f.check == UNREACHABLE for f in self.findings):
            return self.findings
        return (*self.findings, Finding(UNREACHABLE))


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One action, as the action log keeps it: what, on which node, why, when, by whom
    (`myriad-remedy` when automatic, else the person), and its result."""

    node: str
    action: RecordedAction
    why: str
    when: float
    by: str
    result: Result
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> ActionRecord:
        problems = []
        for key, kind in (("node", str), ("action", str), ("why", str), ("by", str)):
            if not isinstance(data.get(key), kind) or not data.get(key):
                problems.append(f"{key} is missing or not text")
        when = data.get("when")
        if not isinstance(when, (int, float)) or isinstance(when, bool):
            problems.append("when is not a time in seconds")
        if data.get("action") not in _RECORDED:
            problems.append(f"action {data.get('action')!r} is not one of {', '.join(_RECORDED)}")
        if data.get("result") not in RESULTS:
            problems.append(f"result {data.get('result')!r} is not one of {', '.join(RESULTS)}")
        unknown = sorted(set(data) - {f for f in cls.__dataclass_fields__})
        if unknown:
            problems.append(f"unknown field {', '.join(unknown)}")
        if problems:
            raise ValidateError(f"action log, {where}: {'; '.join(problems)}")
        return cls(
            node=data["node"],
            action=data["action"],
            why=data["why"],
            when=float(data["when"]),
            by=data["by"],
            result=data["result"],
            detail=str(data.get("detail") or ""),
        )


def log_document(records: Sequence[ActionRecord]) -> dict[str, Any]:
    """The action log as one JSON document (oldest first)."""
    return {"format": LOG_FORMAT, "records": [r.to_dict() for r in records]}


def read_log(document: Mapping[str, Any]) -> tuple[ActionRecord, ...]:
    """The records of an action log document; a damaged one is a `ValidateError` naming the
    record and what is wrong with it."""
    if document.get("format") != LOG_FORMAT:
        raise ValidateError(f"action log: format is {document.get('format')!r}, not {LOG_FORMAT}")
    records = document.get("records")
    if not isinstance(records, list):
        raise ValidateError("action log: records is not a list")
    out = []
    for index, item in enumerate(records):
        if not isinstance(item, Mapping):
            raise ValidateError(f"action log, record {index}: not an object")
        out.append(ActionRecord.from_dict(item, f"record {index}"))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Decision:
    node: str
    action: DecidedAction
    status: Status
    reason: str
    findings: tuple[str, ...] = ()
    escalated_from: Action | None = None
    how: str = ""

    def record(self, when: float, *, dry_run: bool, by: str = BY_AUTOMATIC) -> ActionRecord:
        """The log entry for carrying this decision out (or for a dry run saying it would)."""
        return ActionRecord(
            self.node,
            self.action,
            self.reason,
            when,
            by,
            "dry-run" if dry_run else "started",
            self.how,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "findings": list(self.findings)}


@dataclass(frozen=True, slots=True)
class Breaker:
    tripped: bool
    failing: int
    threshold: int
    window_s: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RackFault:
    rack: str
    failing: tuple[str, ...]
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class RemediationPlan:
    generated: float
    dry_run: bool
    decisions: tuple[Decision, ...]
    breaker: Breaker
    in_remediation: tuple[str, ...]
    max_nodes: int
    racks: tuple[RackFault, ...] = ()
    island_budget: Mapping[int, int] = field(default_factory=dict)

    def acting(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.status == "act")

    def for_node(self, node: str) -> Decision | None:
        return next((d for d in self.decisions if d.node == node), None)

    def records(self, *, by: str = BY_AUTOMATIC) -> tuple[ActionRecord, ...]:
        """The log entries of the decisions that act: `dry-run` or `started`."""
        return tuple(d.record(self.generated, dry_run=self.dry_run, by=by) for d in self.acting())

    def to_dict(self) -> dict[str, Any]:
        return {
            "generated": self.generated,
            "dry_run": self.dry_run,
            "breaker": asdict(self.breaker),
            "budget": {
                "in_remediation": list(self.in_remediation),
                "max_nodes": self.max_nodes,
                "islands": {str(k): v for k, v in sorted(self.island_budget.items())},
            },
            "racks": [{**asdict(r), "failing": list(r.failing)} for r in self.racks],
            "decisions": [d.to_dict() for d in self.decisions],
        }


def hook_payload(
    cluster: str, decision: Decision, history: Sequence[ActionRecord], when: float
) -> dict[str, Any]:
    """The JSON a needs-hardware hook receives (on stdin, or as the POST body):

    ```
    {"format": "myriad.remediation.hook/v1", "cluster": "<name>", "node": "<node>",
     "action": "needs-hardware", "reason": "<why, in words>",
     "findings": ["gpu.xid:79", ...], "when": <unix seconds>, "by": "myriad-remedy",
     "history": [<the node's action records, oldest first: node, action, why, when, by,
                  result, detail>]}
    ```
    """
    return {
        "format": HOOK_FORMAT,
        "cluster": cluster,
        "node": decision.node,
        "action": decision.action,
        "reason": decision.reason,
        "findings": list(decision.findings),
        "when": when,
        "by": BY_AUTOMATIC,
        "history": [r.to_dict() for r in history if r.node == decision.node],
    }


# --- what a node's own health runner found --------------------------------------------------

# gpu.recovery-action's failing value: "GPU 0: Reset, GPU 3: Drain and Reset"; a GPU that
# reported nothing reads "GPU 1: no recovery action reported" (lower case: not a value).
_ASKED = re.compile(r"GPU \d+: ([A-Z][A-Za-z0-9 _-]*)")


def findings_from_state(state: Mapping[str, Any]) -> tuple[Finding, ...]:
    """The findings in a node's myriad-health state file (`/var/lib/myriad-health/
    state.json`, which `myriad health` gathers): one per draining check that fails, with its
    detail where the map decides by it: each held XID for gpu.xid, each GPU's value for
    gpu.recovery-action. A check whose detail cannot be read keeps none (and so asks a
    person: unknown is never healthy)."""
    checks = []
    for line in state.get("failing") or []:
        check = str(line).split(" ", 1)[0]
        if check not in checks:
            checks.append(check)
    results = {str(r.get("check")): r for r in state.get("results") or [] if isinstance(r, Mapping)}
    found: list[Finding] = []
    for check in checks:
        details: list[str | int] = []
        if check == XID_CHECK:
            held = state.get("xid_held") or []
            numbers = {e.get("xid") for e in held if isinstance(e, Mapping)}
            details = sorted(n for n in numbers if isinstance(n, int) and not isinstance(n, bool))
        elif check == RECOVERY_CHECK:
            actual = str((results.get(check) or {}).get("actual") or "")
            details = list(dict.fromkeys(v.strip() for v in _ASKED.findall(actual)))
        if details:
            found.extend(Finding(check, d) for d in details)
        else:
            found.append(Finding(check))
    return tuple(found)


# --- deciding -----------------------------------------------------------------------------


def _rank(action: Action) -> int:
    return LADDER.index(action)


def _worst(rules: Sequence[tuple[Finding, Rule]]) -> tuple[Finding, Rule]:
    return max(rules, key=lambda pair: _rank(pair[1].action))


def _step_up(action: Action, reachable: bool) -> Action:
    """The next action after `action` failed to keep a node well."""
    if action == "reset-gpu" and reachable:
        return "reboot"
    if action in ("reset-gpu", "reboot") and not reachable:
        return "power-cycle"
    return "needs-hardware"


def _latest(history: Sequence[ActionRecord]) -> dict[str, ActionRecord]:
    """Each node's newest repair (a drain is not one: it must not hide a reboot before it;
    a dry run did nothing)."""
    latest: dict[str, ActionRecord] = {}
    for record in sorted(history, key=lambda r: r.when):
        if record.result != "dry-run" and record.action in (*NODE_ACTIONS, "needs-hardware"):
            latest[record.node] = record
    return latest


def _how(action: DecidedAction, node: str, reason: str) -> str:
    said = (REASON_PREFIX + reason).replace("'", "")[:240]
    return {
        "drain": f"scontrol update nodename={node} state=DRAIN reason='{said}'",
        "none": "",
        "reset-gpu": f"on {node}: nvidia-smi -r (every GPU; the node is drained and idle)",
        "reboot": f"scontrol reboot ASAP nextstate=RESUME reason='{said}' {node}",
        "power-cycle": f"{node}'s BMC: Redfish ComputerSystem.Reset, ResetType PowerCycle",
        "needs-hardware": f"keep {node} drained ('{said}'); run the hook",
    }[action]


def _racks(
    nodes: Sequence[NodeState], policy: Remediation
) -> tuple[tuple[RackFault, ...], dict[str, RackFault]]:
    by_rack: dict[str, list[NodeState]] = defaultdict(list)
    for n in nodes:
        if n.rack is not None:
            by_rack[n.rack].append(n)
    faults = []
    for rack, members in sorted(by_rack.items()):
        failing = tuple(sorted(n.node for n in members if n.failing))
        if len(failing) >= 2 and len(failing) / len(members) >= policy.rack_share:
            reason = (
                f"rack {rack}: {len(failing)} of {len(members)} nodes failing together "
                f"(health.remediation.rack_share {policy.rack_share:g}): the rack is drained "
                "as a unit and repaired as one"
            )
            faults.append(RackFault(rack, failing, len(members), reason))
    return tuple(faults), {f.rack: f for f in faults}


def _breaker(nodes: Sequence[NodeState], policy: Remediation, now: float) -> Breaker:
    start = now - policy.breaker_window_s
    recent = [n for n in nodes if n.failing and (n.since is None or n.since >= start)]
    tripped = len(recent) >= policy.breaker_nodes
    reason = ""
    if tripped:
        reason = (
            f"{len(recent)} nodes began failing within {policy.breaker_window_s} s "
            f"(health.remediation.breaker_nodes {policy.breaker_nodes}): a fault shared by "
            "many nodes (a leaf switch, a PDU, a bad image) is not fixed by resetting or "
            "rebooting them; automatic actions stop until fewer fail"
        )
    return Breaker(tripped, len(recent), policy.breaker_nodes, policy.breaker_window_s, reason)


def _island_budget(nodes: Sequence[NodeState], policy: Remediation) -> dict[int, int]:
    sizes = Counter(n.island for n in nodes if n.island is not None)
    return {
        island: max(1, math.floor(size * policy.max_island_share + 1e-9))
        for island, size in sizes.items()
    }


@dataclass(slots=True)
class _Candidate:
    state: NodeState
    action: Action
    reason: str
    findings: tuple[str, ...]
    escalated_from: Action | None


def _wanted(
    n: NodeState,
    amap: ActionMap,
    policy: Remediation,
    latest: ActionRecord | None,
    now: float,
) -> Decision | _Candidate | None:
    """What one failing node needs before the budget is applied: a final decision (wait,
    held, or an action that changes nothing on the node), a candidate, or nothing."""
    findings = n.all_findings()
    pairs = [(f, amap.resolve(f)) for f in findings]
    named = tuple(f.describe() for f in findings)
    worst_finding, rule = _worst(pairs)
    action: Action = rule.action
    reason = f"{worst_finding.describe()}: {rule.why}"

    if n.drained and n.drained_by not in ("myriad-health", "myriad-remedy"):
        # Node health's convention: resume, and so repair, only your own drains.
        who = "someone else" if n.drained_by == "other" else "someone unknown"
        return Decision(n.node, action, "held", f"drained by {who}: left to them", named)
    if not n.drained:
        if not n.reachable:
            why = "unreachable: drained so that no job is placed on it"
            return Decision(n.node, "drain", "act", why, named, how=_how("drain", n.node, why))
        # Node health has not drained it: its findings only warn.
        return None
    if action == "none":
        return Decision(
            n.node, "none", "wait", f"{reason}; node health resumes it when its checks pass", named
        )

    escalated_from: Action | None = None
    if latest is not None and latest.action in LADDER:
        previous: Action = latest.action
        if latest.result == "started":
            return Decision(
                n.node,
                previous,
                "wait",
                f"{previous} under way since {latest.when:.0f}: {latest.why}",
                named,
            )
        if now - latest.when <= policy.escalation_window_s:
            # Only `myriad resume`, after an acceptance run, lifts needs-hardware's own drain:
            # a node node health drained again is back from that repair and failing anew.
            if previous == "needs-hardware" and n.drained_by == "myriad-remedy":
                return Decision(
                    n.node,
                    "needs-hardware",
                    "wait",
                    f"waiting for repair since {latest.when:.0f} (the hook has fired)",
                    named,
                )
            stepped = _step_up(previous, n.reachable)
            if _rank(stepped) > _rank(action):
                escalated_from, action = previous, stepped
                reason = (
                    f"failed again within {policy.escalation_window_s} s of {previous} "
                    f"({latest.result}): escalated; {reason}"
                )

    if not n.reachable and action in ("reset-gpu", "reboot"):
        # Neither nvidia-smi nor slurmd answers on a node that does not.
        action = "power-cycle"
        reason = f"unreachable, so {rule.action} cannot run: power cycle; {reason}"
    if n.reachable and action == "power-cycle":
        # The BMC power-cycles only nodes that stopped answering.
        escalated_from = escalated_from or "power-cycle"
        action = "needs-hardware"
        reason = f"reachable, so no power cycle: needs hardware; {reason}"

    if action == "needs-hardware":
        return Decision(
            n.node,
            action,
            "act",
            reason,
            named,
            escalated_from,
            _how(action, n.node, reason),
        )
    if n.running_jobs is None:
        return Decision(
            n.node, action, "wait", f"its jobs could not be read; {reason}", named, escalated_from
        )
    if n.running_jobs > 0:
        return Decision(
            n.node,
            action,
            "wait",
            f"{n.running_jobs} job(s) still running: nothing acts on a node with a running "
            f"job; {reason}",
            named,
            escalated_from,
        )
    if action == "reset-gpu" and n.gpu_processes != 0:
        said = "could not be read" if n.gpu_processes is None else f"{n.gpu_processes} running"
        return Decision(
            n.node,
            action,
            "wait",
            f"GPU processes {said}: a GPU reset needs none; {reason}",
            named,
            escalated_from,
        )
    if action == "power-cycle":
        since = n.since if n.since is not None else now
        if now - since < policy.power_cycle_grace_s:
            return Decision(
                n.node,
                action,
                "wait",
                f"unreachable for {now - since:.0f} s of the {policy.power_cycle_grace_s} s "
                f"grace; {reason}",
                named,
                escalated_from,
            )
    return _Candidate(n, action, reason, named, escalated_from)


def decide(
    nodes: Sequence[NodeState],
    history: Sequence[ActionRecord],
    policy: Remediation,
    amap: ActionMap,
    now: float,
    *,
    dry_run: bool = False,
) -> RemediationPlan:
    """Every node's decision; see the module's docstring for the rules."""
    latest = _latest(history)
    in_remediation = sorted(
        node
        for node, record in latest.items()
        if record.result == "started" and record.action in NODE_ACTIONS
    )
    island_of = {n.node: n.island for n in nodes}
    island_budget = _island_budget(nodes, policy)
    island_used: Counter[int | None] = Counter(island_of.get(node) for node in in_remediation)
    racks, rack_fault = _racks(nodes, policy)
    breaker = _breaker(nodes, policy, now)

    decisions: list[Decision] = []
    candidates: list[_Candidate] = []
    for n in sorted(nodes, key=lambda s: s.node):
        fault = rack_fault.get(n.rack) if n.rack is not None else None
        if fault is not None:
            named = tuple(f.describe() for f in n.all_findings())
            if not n.drained:
                how = _how("drain", n.node, fault.reason)
                decisions.append(Decision(n.node, "drain", "act", fault.reason, named, how=how))
            elif n.failing:
                # Drained already; nothing node by node while the rack is at fault.
                decisions.append(Decision(n.node, "none", "held", fault.reason, named))
            continue
        if not n.failing:
            continue
        wanted = _wanted(n, amap, policy, latest.get(n.node), now)
        if wanted is None:
            continue
        if breaker.tripped and (
            isinstance(wanted, _Candidate) or (wanted.status == "act" and wanted.action != "drain")
        ):
            action = wanted.action
            named = wanted.findings
            decisions.append(Decision(n.node, action, "held", f"breaker: {breaker.reason}", named))
            continue
        if isinstance(wanted, Decision):
            decisions.append(wanted)
        else:
            candidates.append(wanted)

    # The budget: the longest-failing first, so no node starves.
    used = len(in_remediation)
    for c in sorted(candidates, key=lambda c: (c.state.since or now, c.state.node)):
        island = c.state.island
        if used >= policy.max_nodes:
            why = (
                f"budget: {used} of {policy.max_nodes} nodes in remediation "
                f"(health.remediation.max_nodes); {c.reason}"
            )
            decisions.append(
                Decision(c.state.node, c.action, "wait", why, c.findings, c.escalated_from)
            )
            continue
        if island is not None and island_used[island] >= island_budget.get(island, 1):
            why = (
                f"budget: island {island} has {island_used[island]} of "
                f"{island_budget.get(island, 1)} nodes in remediation "
                f"(health.remediation.max_island_share); {c.reason}"
            )
            decisions.append(
                Decision(c.state.node, c.action, "wait", why, c.findings, c.escalated_from)
            )
            continue
        used += 1
        island_used[island] += 1
        decisions.append(
            Decision(
                c.state.node,
                c.action,
                "act",
                c.reason,
                c.findings,
                c.escalated_from,
                _how(c.action, c.state.node, c.reason),
            )
        )

    return RemediationPlan(
        generated=now,
        dry_run=dry_run,
        decisions=tuple(sorted(decisions, key=lambda d: d.node)),
        breaker=breaker,
        in_remediation=tuple(in_remediation),
        max_nodes=policy.max_nodes,
        racks=racks,
        island_budget=island_budget,
    )
