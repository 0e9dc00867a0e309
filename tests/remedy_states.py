"""Node states for remediation's tests: a node node health drained a minute before NOW, idle,
with the findings given; keywords change any other field of `NodeState`."""

from __future__ import annotations

from typing import Any

from myriad.health.actions import Finding
from myriad.health.remedy import NodeState

NOW = 1_000_000.0


def drained(node: str, *findings: Finding, **kw: Any) -> NodeState:
    base: dict[str, Any] = {
        "drained": True,
        "drained_by": "myriad-health",
        "since": NOW - 60,
        "running_jobs": 0,
        "gpu_processes": 0,
    }
    base.update(kw)
    return NodeState(node, tuple(findings), **base)
