"""Slurm checks: munge and the Slurm daemons on the nodes the slurm role gives them, and
each compute node as the controller sees it (state, Gres, switch)."""

from __future__ import annotations

from typing import Any

from myriad.node.checks.model import (
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
    unavailable,
    unit_active,
    unknown,
)
from myriad.node.facts import FileDigest, NodeFacts

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
    # Every flag is judged (parsers/slurm_state.py): IDLE+COMPLETING+NOT_RESPONDING is idle
    # in name only, slurmctld starts nothing on a node that does not answer.
    state = found.node_state()
    problems = state.problems()
    if state.base not in expected and not problems:
        problems = [f"base state {state.base} is not {'/'.join(expected)}"]
    return failed(found.describe(), "; ".join(problems)) if problems else passed(found.describe())


SLURM_NODE_STATE = Check(
    id="slurm.node-state",
    title="Slurm node present and usable",
    spec_fields=("pools",),
    derive=_derive_state,
    evaluate=_evaluate_state,
    explain=lambda expected: (
        "/".join(expected).lower()
        + ", no flag that stops jobs (drain, fail, not responding, power, reboot, maint, ...)"
    ),
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


# --- slurm.munge-key and slurm.config-files: the same files on every node --------------------

MUNGE_KEY = "/etc/munge/munge.key"


def _same_as_controller(
    path: str, facts: NodeFacts, view: ClusterView
) -> tuple[FileDigest | None, list[str], Outcome | None]:
    """The node's file, what differs from the controller's copy, or the outcome when either
    side cannot say. Only digests are compared; no file content leaves a node."""
    if not facts.slurm_files.ok:
        return None, [], unavailable(facts.slurm_files)
    if path not in facts.slurm_files.get():
        return None, [], unknown(f"{path} was not gathered (the gatherer reads /etc)")
    mine = facts.slurm_files.get()[path]
    if mine is None:
        return None, [f"{path} does not exist"], None
    if not view.controller_files.ok:
        return (
            mine,
            [],
            unknown(f"the controller's copy unavailable: {view.controller_files.detail}"),
        )
    theirs = view.controller_files.get().get(path)
    if theirs is None:
        return mine, [], unknown(f"controller {view.files_source} holds no {path} to compare with")
    if mine.sha256 != theirs.sha256:
        return (
            mine,
            [
                f"{path} differs from {view.files_source}'s (sha256 {mine.sha256[:12]}, "
                f"{view.files_source} {theirs.sha256[:12]})"
            ],
            None,
        )
    return mine, [], None


def _derive_munge_key(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    return Expect(
        {"path": MUNGE_KEY, "owner": "munge"},
        FIELD,
        bringup_fix("slurm", "every node needs the controller's munge key, readable by munge only"),
    )


def _evaluate_munge_key(
    expected: dict[str, str], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    mine, problems, outcome = _same_as_controller(expected["path"], facts, view)
    if mine is not None:
        if mine.owner != expected["owner"]:
            problems.append(f"owned by {mine.owner}:{mine.group}")
        # munged refuses a key that others may read; write access for them is no better.
        if int(mine.mode, 8) & 0o077:
            problems.append(f"mode {mine.mode} lets others at it")
    if problems:
        return failed("; ".join(problems))
    if outcome is not None:
        return outcome
    assert mine is not None
    return passed(
        f"same key as {view.files_source} (sha256 {mine.sha256[:12]}), {mine.owner}, {mine.mode}"
    )


SLURM_MUNGE_KEY = Check(
    id="slurm.munge-key",
    title="munge key the controller's",
    spec_fields=(FIELD,),
    derive=_derive_munge_key,
    evaluate=_evaluate_munge_key,
    explain=lambda expected: (
        f"{expected['path']} equal to the controller's, owner "
        f"{expected['owner']}, no group/other access"
    ),
)


def _derive_config_files(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    folder = str(c.variables.get("slurm_config_dir", "/etc/slurm"))
    names = ["slurm.conf", "cgroup.conf", "gres.conf"]
    if c.variables.get("slurm_topology_plugin", "topology/tree") == "topology/tree":
        names.append("topology.conf")
    return Expect(
        [f"{folder}/{name}" for name in names],
        FIELD,
        bringup_fix("slurm", "slurmctld and every slurmd must read the same configuration")
        + "; then scontrol reconfigure",
    )


def _evaluate_config_files(
    expected: list[str], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    problems: list[str] = []
    for path in expected:
        _, differs, outcome = _same_as_controller(path, facts, view)
        problems += differs
        if outcome is not None and not differs:
            return outcome
    if problems:
        return failed("; ".join(problems))
    return passed(f"{len(expected)} files as on {view.files_source}")


SLURM_CONFIG_FILES = Check(
    id="slurm.config-files",
    title="Slurm configuration the controller's",
    spec_fields=(FIELD,),
    derive=_derive_config_files,
    evaluate=_evaluate_config_files,
    explain=lambda expected: (
        ", ".join(p.rsplit("/", 1)[-1] for p in expected) + " present and equal to the controller's"
    ),
)


# --- slurm.job: a job ran on the node --------------------------------------------------------


def _derive_job(c: Context) -> Expect | Skip:
    if (skip := _slurm_role(c)) is not None:
        return skip
    if c.slurm_node_set is None:
        return Skip(FIELD, NOT_A_NODE)
    return Expect(
        "hostname",
        f"pools.{c.pool.name}",
        "see the job's error above and `scontrol show node {node}`; "
        "skip the job with `myriad validate --no-jobs`",
    )


def _evaluate_job(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if view.job.state == "not-gathered":
        return Outcome("not-applicable", "no job run (--no-jobs)")
    if not view.job.ok:
        return unavailable(view.job)
    job = view.job.get()
    if node in job.ran:
        return passed(f"ran on {node}")
    if node in job.errors:
        return failed(f"the job did not run: {job.errors[node]}")
    if node in job.skipped:
        # slurm.node-state judges the state; a busy node is not a broken one.
        return Outcome("not-applicable", f"no job sent: the node was {job.skipped[node]}")
    return Outcome("not-applicable", "not among the nodes the job was asked to run on")


SLURM_JOB = Check(
    id="slurm.job",
    title="a Slurm job runs on the node",
    spec_fields=("pools",),
    derive=_derive_job,
    evaluate=_evaluate_job,
    explain=lambda expected: f"srun {expected} ran on the node (one bounded job per node)",
)
