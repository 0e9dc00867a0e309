"""`myriad health SPEC [--json]`: the cluster's health as its nodes last judged it, in one
gathering pass (the validation gatherer: every node's myriad-health state file, and the
orchestrator's view from a controller).

Per compute node (where the health role installs the runner): drained or not and by whom
(myriad-health, or anyone else with their reason), since when, the failing checks with
expected and actual, warnings, checks it could not judge, and whether its last run is stale
(older than health.stale_after_s, default three intervals, or never). The `HealthReport` is
the verb's result: the CLI exits 1 unless every node is healthy, `myriad.views.health` draws it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from myriad.errors import ValidateError
from myriad.fsutil import atomic_write_text
from myriad.health.render import check_drain_ids
from myriad.node.checks import ClusterView, cluster_view
from myriad.node.facts import NodeFacts
from myriad.node.health import REASON_PREFIX, bare_reason
from myriad.provision.resolve import ResolvedCluster, resolve_cluster
from myriad.render.writer import write_inventory
from myriad.runner import new_run_dir
from myriad.validate.expectations import expect, load_role_defaults
from myriad.validate.gather import gather
from myriad.validate.report import read_kept


@dataclass(frozen=True)
class NodeHealth:
    node: str
    reachable: bool
    drained: bool | None
    drained_by: str | None  # "myriad-health", "other", or None
    reason: str | None
    since: float | None
    last_run: float | None
    stale: bool
    failing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def healthy(self) -> bool:
        return self.reachable and not self.drained and not self.failing and not self.stale


@dataclass(frozen=True)
class HealthReport:
    cluster: str
    generated: float
    stale_after_s: int
    nodes: tuple[NodeHealth, ...]

    @property
    def healthy(self) -> bool:
        return all(n.healthy for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "generated": self.generated,
            "stale_after_s": self.stale_after_s,
            "healthy": self.healthy,
            "nodes": [{**asdict(n), "healthy": n.healthy} for n in self.nodes],
        }


# Beside the cluster's other state; `myriad report` shows it. Not under health/, which holds
# the nodes' documents by node name.
LAST_REPORT = Path("health-report.json")


def keep_last(report: HealthReport, state_root: Path) -> None:
    """The cluster's latest health report, whole (replaced by each `myriad health`)."""
    atomic_write_text(state_root / LAST_REPORT, json.dumps(report.to_dict()) + "\n", mode=0o600)


def read_last(state_root: Path) -> dict[str, Any] | None:
    """The kept report, or None when `myriad health` never ran for the cluster here."""
    return read_kept(state_root / LAST_REPORT, "health report")


def _by_whom(reason: str | None) -> str:
    return "myriad-health" if (reason or "").startswith(REASON_PREFIX) else "other"


def node_health(
    node: str,
    facts: NodeFacts | None,
    view: ClusterView,
    now: float,
    stale_after_s: int,
    unreachable: str | None = None,
) -> NodeHealth:
    """One node's row from its state file (its facts) and the orchestrator's view."""
    drained: bool | None = None
    reason: str | None = None
    if view.slurm_nodes.ok and node in view.slurm_nodes.get():
        slurm = view.slurm_nodes.get()[node]
        # Without the [user@time] scontrol appends.
        drained, reason = slurm.drained, bare_reason(slurm.reason) or None
    if facts is None:
        return NodeHealth(
            node,
            False,
            drained,
            _by_whom(reason) if drained else None,
            reason,
            None,
            None,
            True,
            note=f"unreachable: {unreachable or 'no facts'}",
        )
    state: Mapping[str, Any] = facts.health_state.get() if facts.health_state.ok else {}
    last = state.get("last_run")
    last_run = float(last) if isinstance(last, (int, float)) else None
    stale = last_run is None or now - last_run > stale_after_s
    recorded = state.get("slurm")
    own: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    if drained is None and own:
        # No controller answered: the node's own record of what it last did.
        drained = bool(own.get("drained"))
        reason = bare_reason(own.get("reason")) or None
    since = own.get("since") if drained and _by_whom(reason) == "myriad-health" else None
    note = "" if facts.health_state.ok else f"no state file: {facts.health_state.detail}"
    return NodeHealth(
        node=node,
        reachable=True,
        drained=drained,
        drained_by=_by_whom(reason) if drained else None,
        reason=reason,
        since=float(since) if isinstance(since, (int, float)) else None,
        last_run=last_run,
        stale=stale,
        failing=[str(x) for x in state.get("failing") or []],
        warnings=[str(x) for x in state.get("warnings") or []],
        unknown=[str(x) for x in state.get("unknown") or []],
        note=note,
    )


@dataclass(frozen=True)
class HealthGathering:
    """One gathering pass: the report, and each reachable compute node's state file (what
    remediation reads its findings from) under its name."""

    report: HealthReport
    states: Mapping[str, Mapping[str, Any]]
    cluster: ResolvedCluster


def health_report(
    spec_path: Path, *, stack: str | None = None, stack_outputs: Path | None = None
) -> HealthReport:
    return gather_health(spec_path, stack=stack, stack_outputs=stack_outputs).report


def gather_health(
    spec_path: Path, *, stack: str | None = None, stack_outputs: Path | None = None
) -> HealthGathering:
    from myriad.bringup.flow import cluster_state

    cluster = resolve_cluster(spec_path, stack=stack, stack_outputs=stack_outputs)
    loaded, inventory = cluster.loaded, cluster.inventory
    health = check_drain_ids(loaded)
    if health is None:
        raise ValidateError(
            f"{spec_path} has no health section: node health is off (see README, "
            "'Keeping nodes healthy')"
        )
    state = cluster_state(loaded.spec.metadata.name)
    write_inventory(inventory, state.inventory)
    hosts = list(inventory.hosts)
    gathered = gather(state.inventory, new_run_dir(state.root, "health"), hosts)
    expectations = expect(
        loaded.spec, loaded.catalog, cluster.plan, inventory, load_role_defaults()
    )
    unreachable = {**gathered.unreachable, **gathered.failed}
    view = cluster_view(expectations, gathered.facts, unreachable)
    now = time.time()
    # The health role runs the runner on compute nodes (site.yml).
    compute = [n.node for n in expectations.nodes if n.role == "compute"]
    report = HealthReport(
        cluster=loaded.spec.metadata.name,
        generated=now,
        stale_after_s=health.stale_s,
        nodes=tuple(
            node_health(
                node,
                gathered.facts.get(node),
                view,
                now,
                health.stale_s,
                unreachable.get(node),
            )
            for node in compute
        ),
    )
    keep_last(report, state.root)
    states: dict[str, Mapping[str, Any]] = {}
    for node in compute:
        facts = gathered.facts.get(node)
        if facts is not None and facts.health_state.ok:
            states[node] = facts.health_state.get()
    return HealthGathering(report, states, cluster)
