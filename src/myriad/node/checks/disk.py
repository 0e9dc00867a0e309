"""Free disk space on the paths the spec's health section names (node health: a full /tmp
or /var fails jobs and slurmd alike)."""

from __future__ import annotations

from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    between_runs,
    listed,
    verdict,
)
from myriad.node.facts import NodeFacts

DISK_FIX = "free space on {node} (old job output, core files, container images) or grow the disk"


def _derive_space(c: Context) -> Expect | Skip:
    if c.spec.health is None:
        return Skip("health", "no health section: node health is off")
    if not c.spec.health.disk:
        return Skip("health.disk", "no paths named")
    return Expect(dict(c.spec.health.disk), "health.disk", DISK_FIX)


def _evaluate_space(
    expected: dict[str, int], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (outcome := between_runs(facts.disk)) is not None:
        return outcome
    disks = facts.disk.get()
    problems, unread, good = [], [], []
    for path, minimum in expected.items():
        disk = disks.get(path)
        if disk is None:
            unread.append(f"{path} not read")
        elif disk.free_percent < minimum:
            problems.append(f"{path} {disk.free_percent:.1f}% free")
        else:
            good.append(f"{path} {disk.free_percent:.0f}%")
    return verdict(problems, f"free: {listed(good)}", unread)


def _explain_space(expected: dict[str, Any]) -> str:
    return "free at least " + ", ".join(f"{p} {v}%" for p, v in expected.items())


DISK_SPACE = Check(
    id="disk.space",
    title="free disk space on the health section's paths",
    spec_fields=("health.disk",),
    derive=_derive_space,
    evaluate=_evaluate_space,
    explain=_explain_space,
)
