"""Evaluation: every node's expectations against its facts; pure, in memory, linear in nodes.

Every (node, check) pair yields one CheckResult: `pass`, `fail` (the node differs from the
spec, or a tool the spec needs is missing or reports a fault), `not-applicable` (the spec
makes the check meaningless for this node; the reason is the `actual`), or `error` (a fact
could not be read, so nothing is claimed either way: unknown is never a pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from myriad.node.checks.gpu import nvlink_domain_of
from myriad.node.checks.model import (
    CheckResult,
    ClusterExpectations,
    ClusterView,
    Evaluate,
    Expectation,
    NodeExpectations,
    SlurmNodeView,
)
from myriad.node.checks.registry import BY_ID, CHECKS
from myriad.node.facts import Fact, NodeFacts, ok
from myriad.node.parsers import KubeNode

REACHABLE = "node.reachable"
TITLES = {REACHABLE: "facts gathered from the node", **{c.id: c.title for c in CHECKS}}
CHECK_ORDER = {check: i for i, check in enumerate(TITLES)}


# --- the orchestrator's view ---------------------------------------------------------------


def _from_sinfo(facts: NodeFacts) -> Fact[Mapping[str, SlurmNodeView]]:
    # sinfo's %T: "idle", "mixed-", "down*", "drained" (IDLE+DRAIN), "draining" (busy+DRAIN),
    # or with flags after "+"; "*" marks a node that does not respond.
    busy_drain = {"DRAINED": "IDLE", "DRAINING": "MIXED"}

    def view(rows: Sequence[Any]) -> Mapping[str, SlurmNodeView]:
        nodes = {}
        for row in rows:
            raw = row.state.upper()
            base = raw.split("+")[0].rstrip("*~#!%$@^-")
            nodes[row.node] = SlurmNodeView(
                state=busy_drain.get(base, base),
                drained="DRAIN" in raw,
                not_responding="*" in raw,
                gres=row.gres,
                reason=None,
                raw_state=row.state,
            )
        return nodes

    return facts.sinfo.map(view)


def _slurm_nodes(facts: NodeFacts) -> Fact[Mapping[str, SlurmNodeView]]:
    scontrol: Fact[Mapping[str, SlurmNodeView]] = facts.slurm_nodes.map(
        lambda nodes: {
            n.name: SlurmNodeView(
                n.state, n.drained, n.not_responding, n.gres, n.reason, n.fields.get("State", "")
            )
            for n in nodes
        }
    )
    if scontrol.ok:
        return scontrol
    # sinfo reads the same controller state; it answers when only scontrol's output is odd.
    fallback = _from_sinfo(facts)
    return fallback if fallback.ok else scontrol


def view_of(facts: NodeFacts, source: str) -> ClusterView:
    """The orchestrator's view in one node's facts (a controller's, or a node's own when
    it asked the orchestrator itself); parts it did not gather are `not-gathered`."""
    kube: Fact[Mapping[str, KubeNode]] = facts.kube_nodes.map(
        lambda nodes: {n.name: n for n in nodes}
    )
    return ClusterView(
        source,
        _slurm_nodes(facts),
        facts.slurm_topology,
        kube,
        controller_files=facts.slurm_files,
        files_source=source,
        job=facts.job,
    )


def cluster_view(
    expectations: ClusterExpectations, facts: Mapping[str, NodeFacts], unreachable: Iterable[str]
) -> ClusterView:
    """The orchestrator's view from the first controller that answered it, and the NVLink
    domain each gathered node's GPUs report."""
    domains = {
        name: nvlink_domain_of(node.gpus.get()) if node.gpus.ok else None
        for name, node in facts.items()
    }
    return replace(_orchestrator_view(expectations, facts, unreachable), gpu_domains=ok(domains))


def _orchestrator_view(
    expectations: ClusterExpectations, facts: Mapping[str, NodeFacts], unreachable: Iterable[str]
) -> ClusterView:
    down = set(unreachable)
    tried = []
    for name in expectations.controllers:
        node = facts.get(name)
        if node is None:
            tried.append(f"{name} {'unreachable' if name in down else 'not gathered'}")
            continue
        view = view_of(node, name)
        answer = view.slurm_nodes if expectations.orchestrator == "slurm" else view.kube_nodes
        if answer.ok:
            return view
        tried.append(f"{name}: {answer.detail}")
    reason = "no controller answered (" + "; ".join(tried) + ")" if tried else "no controllers"
    nothing: Fact[Any] = Fact("unreadable", detail=reason)
    # The munge key and Slurm files compare with a controller's even when slurmctld is down.
    for name in expectations.controllers:
        node = facts.get(name)
        if node is not None:
            return ClusterView(
                None, nothing, nothing, nothing,
                controller_files=node.slurm_files, files_source=name, job=node.job,
            )  # fmt: skip
    return ClusterView(None, nothing, nothing, nothing)


# --- results without a check -----------------------------------------------------------------


def reachable_result(node: str, seconds: float | None) -> CheckResult:
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    return CheckResult(node, REACHABLE, "pass", "facts gathered", f"gathered{took}", "pools")


def unreachable_result(node: str, message: str, *, gathered: bool = False) -> CheckResult:
    """A node without facts: unreachable (fail), or the gatherer itself failed (error)."""
    if gathered:
        return CheckResult(
            node,
            REACHABLE,
            "error",
            "facts gathered",
            f"the gatherer failed: {message}",
            "pools",
            "run it by hand to see why: python3 gather.py (needs python3 on the node)",
        )
    return CheckResult(
        node,
        REACHABLE,
        "fail",
        "facts gathered",
        f"unreachable: {message}",
        "pools",
        f"check that {node} is up and reachable: ansible {node} -m ansible.builtin.ping",
    )


# --- evaluation ------------------------------------------------------------------------------

# An expectation ready to evaluate: itself, its check's evaluate (None: not applicable, or
# a check this version does not know) and the expected value in words. Worked out once per
# tuple of shared expectations.
Prepared = list[tuple[Expectation, Evaluate | None, str]]


def prepare(expectations: Sequence[Expectation]) -> Prepared:
    ready: Prepared = []
    for e in expectations:
        check = BY_ID.get(e.check)
        if not e.applies or check is None:
            ready.append((e, None, ""))
        else:
            ready.append((e, check.evaluate, check.explain(e.expected)))
    return ready


def evaluate_node(
    expectations: NodeExpectations,
    facts: NodeFacts,
    view: ClusterView,
    shared: Prepared | None = None,
) -> list[CheckResult]:
    """Every check of one node; `shared` is prepare(expectations.shared), made once per kind."""
    node = expectations.node
    results = [reachable_result(node, facts.seconds)]
    append = results.append
    ready = shared if shared is not None else prepare(expectations.shared)
    for exp, evaluate_one, text in (*ready, *prepare(expectations.own)):
        if evaluate_one is None:
            if exp.applies:
                # An expectation file from a newer Myriad than the code on this node.
                append(
                    CheckResult(
                        node,
                        exp.check,
                        "error",
                        str(exp.expected),
                        f"check {exp.check} is unknown to this version of Myriad",
                        exp.spec_field,
                        "install the Myriad version that rendered the expectations",
                    )
                )
            else:
                append(
                    CheckResult(node, exp.check, "not-applicable", "", exp.reason, exp.spec_field)
                )
            continue
        status, actual, detail = evaluate_one(exp.expected, facts, view, node)
        fix = exp.fix.replace("{node}", node) if status in ("fail", "error") else ""
        append(CheckResult(node, exp.check, status, text, actual, exp.spec_field, fix, detail))
    return results


def evaluate(
    expectations: ClusterExpectations,
    facts: Mapping[str, NodeFacts],
    unreachable: Mapping[str, str],
    gather_failed: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """All results, node by node in spec order; nodes without facts get one result."""
    failed_to_gather = gather_failed or {}
    view = cluster_view(expectations, facts, unreachable)
    prepared: dict[int, Prepared] = {}
    results: list[CheckResult] = []
    for node in expectations.nodes:
        found = facts.get(node.node)
        if found is not None:
            shared = prepared.get(id(node.shared))
            if shared is None:
                shared = prepared[id(node.shared)] = prepare(node.shared)
            results.extend(evaluate_node(node, found, view, shared))
        elif node.node in failed_to_gather:
            results.append(
                unreachable_result(node.node, failed_to_gather[node.node], gathered=True)
            )
        elif node.node in unreachable:
            results.append(unreachable_result(node.node, unreachable[node.node]))
    return results
