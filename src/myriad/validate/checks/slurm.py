"""Slurm checks: munge and the Slurm daemons on the nodes the slurm role gives them, and
each compute node as the controller sees it (state, Gres, switch)."""

from __future__ import annotations

from typing import Any

from myriad.validate.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    SlurmNodeView,
    bringup_fix,
    explain_unit,
    failed,
    passed,
    unit_active,
    unknown,
)
from myriad.validate.facts import NodeFacts

FIELD = "software.orchestrator"
GOOD_STATES = ["IDLE", "ALLOCATED", "MIXED", "COMPLETING"]
NOT_A_NODE = "not a Slurm compute node"


def _slurm_role(c: Context) -> Skip | None:
    """Why the slurm role leaves the node alone, if it does."""
    if c.spec.software.orchestrator != "slurm":
        return Skip(FIELD, "the orchestrator is kubernetes")
    if c.pool.role == "storage":
        return Skip(FIELD, "the slurm role runs on controller, login and compute nodes")
    return None


def _slurm_node(view: ClusterView, node: str) -> SlurmNodeView | Outcome:
    """The node as Slurm sees it, or the outcome when Slurm cannot say."""
    if not view.slurm_nodes.ok:
        return unknown(f"Slurm's view unavailable: {view.slurm_nodes.detail}")
    found = view.slurm_nodes.get().get(node)
    if found is None:
        return failed(f"{node} unknown to Slurm (controller {view.source})")
    return found


# --- slurm.munge, slurm.slurmd, slurm.slurmctld ----------------------------------------------


def _derive_munge(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    return Expect("munge", FIELD, bringup_fix("slurm", "restart munge"))


SLURM_MUNGE = Check(
    id="slurm.munge",
    title="munge active",
    spec_fields=(FIELD,),
    derive=_derive_munge,
    evaluate=unit_active,
    explain=explain_unit,
)


def _derive_slurmd(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    if c.slurm_node_set is None:
        return Skip(FIELD, NOT_A_NODE)
    return Expect("slurmd", FIELD, bringup_fix("slurm", "restart slurmd"))


SLURM_SLURMD = Check(
    id="slurm.slurmd",
    title="slurmd active",
    spec_fields=(FIELD,),
    derive=_derive_slurmd,
    evaluate=unit_active,
    explain=explain_unit,
)


def _derive_slurmctld(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    if not c.slurm_controller:
        return Skip(FIELD, "not a Slurm controller")
    return Expect("slurmctld", FIELD, bringup_fix("slurm", "restart slurmctld"))


SLURM_SLURMCTLD = Check(
    id="slurm.slurmctld",
    title="slurmctld active",
    spec_fields=(FIELD,),
    derive=_derive_slurmctld,
    evaluate=unit_active,
    explain=explain_unit,
)


# --- slurm.node-state ------------------------------------------------------------------------


def _derive_state(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    if c.slurm_node_set is None:
        return Skip(FIELD, NOT_A_NODE)
    return Expect(
        GOOD_STATES,
        f"pools.{c.pool.name}",
        "see `scontrol show node {node}` (Reason=); after fixing: "
        "scontrol update nodename={node} state=resume",
    )


def _evaluate_state(expected: list[str], facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    found = _slurm_node(view, node)
    if isinstance(found, Outcome):
        return found
    good = found.state in expected and not found.drained and not found.not_responding
    return passed(found.describe()) if good else failed(found.describe())


SLURM_NODE_STATE = Check(
    id="slurm.node-state",
    title="Slurm node present and usable",
    spec_fields=("pools",),
    derive=_derive_state,
    evaluate=_evaluate_state,
    explain=lambda expected: "/".join(expected).lower() + ", not drained",
)


# --- slurm.gres ------------------------------------------------------------------------------


def _derive_gres(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    if c.slurm_node_set is None:
        return Skip(FIELD, NOT_A_NODE)
    gres = [
        {"name": str(g["name"]), "type": g.get("type"), "count": int(g["count"])}
        for g in c.slurm_node_set.get("gres", [])
    ]
    if not gres:
        return Skip(f"{c.p}.gpu", f"profile {c.pool.profile} has no GPUs")
    return Expect(
        gres,
        f"{c.p}.gpu",
        bringup_fix("slurm", "slurm.conf and gres.conf must match the GPUs")
        + "; then scontrol reconfigure",
    )


def _gres_text(name: str, type_: str | None, count: int) -> str:
    return ":".join(str(part) for part in (name, type_, count) if part is not None and part != "")


def _evaluate_gres(
    expected: list[dict[str, Any]], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    found = _slurm_node(view, node)
    if isinstance(found, Outcome):
        return found
    have = {(g.name, g.type, g.count) for g in found.gres}
    want = {(g["name"], g["type"], g["count"]) for g in expected}
    shown = ",".join(_gres_text(*g) for g in sorted(have, key=str))
    return passed(shown) if want <= have else failed(shown or "no Gres")


SLURM_GRES = Check(
    id="slurm.gres",
    title="Slurm node Gres",
    spec_fields=("profiles.*.gpu",),
    derive=_derive_gres,
    evaluate=_evaluate_gres,
    explain=lambda expected: ",".join(
        _gres_text(g["name"], g["type"], g["count"]) for g in expected
    ),
)


# --- slurm.topology (per node) ---------------------------------------------------------------


def _derive_topology(c: Context) -> Expect | Skip:
    field = "network.topology"
    if c.spec.software.orchestrator != "slurm" or c.slurm_node_set is None:
        return Skip(field, NOT_A_NODE)
    if c.variables.get("slurm_topology_plugin", "topology/tree") != "topology/tree":
        return Skip(field, "Slurm topology/tree is off")
    if c.switch is None:
        return Skip(field, "the plan places no switch here")
    return Expect(
        c.switch,
        field,
        bringup_fix("slurm", "topology.conf is stale") + "; then scontrol reconfigure",
    )


def _evaluate_topology(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not view.slurm_topology.ok:
        return unknown(f"Slurm's topology unavailable: {view.slurm_topology.detail}")
    leaf = view.slurm_topology.get().leaf_of(node)
    if leaf is None:
        return failed("under no switch")
    return passed(leaf) if leaf == expected else failed(leaf)


SLURM_TOPOLOGY = Check(
    id="slurm.topology",
    title="Slurm node under its switch",
    spec_fields=("network.topology",),
    derive=_derive_topology,
    evaluate=_evaluate_topology,
    explain=lambda expected: f"under switch {expected}",
    per_node=True,
)
