"""`myriad drain` and `myriad resume`: Slurm's drain and resume, with who and why.

Through Myriad rather than scontrol so that the reason always says who drained a node and
why (`myriad: drain by alice: bad DIMM`), and so that a node the health runner drained
(`myriad-health: ...`) is not put back into service by accident: `resume` refuses it
unless forced, and resumes nothing when it refuses any node.

A node remediation drained (`myriad-remedy: ...`, sent for repair) returns only after it is
tested again: `resume` hands such nodes to `retest` (acceptance, `myriad accept --nodes-from
drained`) and resumes none of them that fail; without `retest` it refuses them unless forced.
Either way the return (or the refusal) goes into remediation's action log, by the person.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from myriad.errors import OpsError, OpsInputError
from myriad.health.remedy import ActionRecord, Result
from myriad.ops.slurm import NodeState, Slurm, check_names, current_user, reason_for
from myriad.provision.resolve import ResolvedCluster, resolve_cluster
from myriad.render.inventory import Inventory

# Acceptance for nodes back from repair: given their names, each one that failed with why.
Retest = Callable[[Sequence[str]], Mapping[str, str]]
# Between a repair's reason and the figure of the re-test it then failed.
RETEST_FAILED = "; failed its re-test: "


@dataclass(frozen=True, slots=True)
class NodeChange:
    """What drain or resume did to one node, and the reason Slurm holds for it."""

    node: str
    outcome: Literal["drained", "draining", "resumed", "unchanged"]
    reason: str
    note: str = ""

    def describe(self) -> str:
        if self.outcome == "draining":
            return f"{self.node}: draining: its jobs run to their end (reason {self.reason!r})"
        if self.outcome == "drained":
            return f"{self.node}: drained (reason {self.reason!r})"
        if self.outcome == "resumed":
            return f"{self.node}: resumed (was {self.reason!r})"
        return f"{self.node}: not drained ({self.note}); left as it is"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compute_nodes(inventory: Inventory) -> list[str]:
    return list(inventory.groups.get("compute", ()))


def _cluster(
    spec_path: Path, stack: str | None, stack_outputs: Path | None
) -> tuple[ResolvedCluster, Slurm]:
    cluster = resolve_cluster(spec_path, stack=stack, stack_outputs=stack_outputs)
    if cluster.spec.software.orchestrator != "slurm":
        raise OpsInputError(
            f"{spec_path}: day-2 commands drive Slurm; this cluster's orchestrator is "
            f"{cluster.spec.software.orchestrator}"
        )
    return cluster, Slurm.of(cluster.inventory)


def drain(
    spec_path: Path,
    nodes: Sequence[str],
    reason: str,
    *,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    slurm: Slurm | None = None,
) -> list[NodeChange]:
    cluster, default = _cluster(spec_path, stack, stack_outputs)
    slurm = slurm or default
    check_names(nodes, compute_nodes(cluster.inventory), cluster.spec.metadata.name)
    if not reason.strip():
        raise OpsInputError("--reason is empty: say why the nodes leave service")
    text = reason_for("drain", reason)
    slurm.drain(nodes, text)
    busy = {n for job in slurm.jobs(nodes) for n in job.nodes}
    return [NodeChange(node, "draining" if node in busy else "drained", text) for node in nodes]


def resume(
    spec_path: Path,
    nodes: Sequence[str],
    *,
    force: bool = False,
    retest: Retest | None = None,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    slurm: Slurm | None = None,
) -> list[NodeChange]:
    cluster, default = _cluster(spec_path, stack, stack_outputs)
    slurm = slurm or default
    check_names(nodes, compute_nodes(cluster.inventory), cluster.spec.metadata.name)
    states = slurm.nodes(nodes)
    missing = [n for n in nodes if n not in states]
    if missing:
        raise OpsError(f"Slurm does not know {', '.join(missing)}: is slurmctld up to date?")
    held = [states[n] for n in nodes if states[n].held_by_health]
    if held and not force:
        lines = "; ".join(f"{s.name} ({s.reason})" for s in held)
        raise OpsError(
            f"the node health runner drained {lines}: fix the cause, or pass --force to "
            "resume anyway; no node was resumed"
        )
    before = states
    repaired = [n for n in nodes if states[n].held_by_remedy]
    if repaired and not force:
        if retest is None:
            lines = "; ".join(f"{n} ({states[n].reason})" for n in repaired)
            raise OpsError(
                f"remediation sent {lines} for repair: test it again before it returns "
                "(acceptance on the drained nodes), or pass --force to resume it untested; "
                "no node was resumed"
            )
        failed = retest(repaired)
        for node, why in sorted(failed.items()):
            # The test drained it with its own reason; held for repair again, so the next
            # resume tests it again rather than returning it untested.
            slurm.drain([node], f"{_held_for(before[node].reason)}{RETEST_FAILED}{why}")
        _record_returns(
            cluster,
            {
                node: ("failed", f"failed its re-test: {failed[node]}; stays drained")
                if node in failed
                else ("succeeded", "passed its re-test")
                for node in repaired
            },
            before,
        )
        if failed:
            lines = "; ".join(f"{n}: {why}" for n, why in sorted(failed.items()))
            raise OpsError(
                f"back from repair but failed its test again: {lines}; it stays drained; "
                "no node was resumed"
            )
        # The test resumed those that passed itself (inside its reservation); read again.
        states = slurm.nodes(nodes)
    to_resume = [n for n in nodes if states[n].drained]
    if to_resume:
        slurm.resume(to_resume)
    if repaired and force:
        _record_returns(cluster, {n: ("succeeded", "untested (--force)") for n in repaired}, before)
    back = set(to_resume) | {n for n in repaired if not states[n].drained}
    return [
        NodeChange(node, "resumed", before[node].reason or "")
        if node in back
        else NodeChange(node, "unchanged", states[node].reason or "", states[node].state)
        for node in nodes
    ]


def _held_for(reason: str | None) -> str:
    """A repair's drain reason without the figure of a re-test it failed since."""
    return str(reason).split(RETEST_FAILED)[0]


def _record_returns(
    cluster: ResolvedCluster,
    outcomes: Mapping[str, tuple[Result, str]],
    before: Mapping[str, NodeState],
) -> None:
    """A person's resume of nodes sent for repair, in the action log (`myriad health`
    shows it): by whom, the repair it ends, and whether the node came back."""
    from myriad.bringup.flow import cluster_state
    from myriad.ops.remedy import append_history

    now, by = time.time(), current_user()
    append_history(
        cluster_state(cluster.spec.metadata.name).root,
        [
            ActionRecord(node, "resume", _held_for(before[node].reason), now, by, result, detail)
            for node, (result, detail) in sorted(outcomes.items())
        ],
    )
