"""Shared storage writable (node health: a mount that went read-only or hangs fails every
checkpoint). The runner writes and removes a small file under the mount; `myriad validate`
checks the mount itself (storage.mount)."""

from __future__ import annotations

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    between_runs,
    failed,
    passed,
    unknown,
)
from myriad.node.facts import NodeFacts

WRITABLE_FIX = (
    "check the mount on {node} (dmesg for a read-only remount or a hung server, "
    "`findmnt` for its options), then remount it"
)


def _derive_writable(c: Context) -> Expect | Skip:
    if c.spec.health is None:
        return Skip("health", "no health section: node health is off")
    if c.spec.storage.kind == "none":
        return Skip("storage.kind", "storage.kind is none")
    return Expect(c.spec.storage.mount, "storage.mount", WRITABLE_FIX)


def _evaluate_writable(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if (outcome := between_runs(facts.writable)) is not None:
        return outcome
    problems = facts.writable.get()
    if expected not in problems:
        return unknown(f"{expected} not tried")
    problem = problems[expected]
    return passed(f"{expected} writable") if problem is None else failed(f"{expected}: {problem}")


STORAGE_WRITABLE = Check(
    id="storage.writable",
    title="shared storage writable",
    spec_fields=("storage.mount",),
    derive=_derive_writable,
    evaluate=_evaluate_writable,
    explain=lambda expected: f"a file can be written under {expected}",
)
