"""GPU XID errors from the kernel log: node health's check (myriad-health reads the log with a
cursor, so every XID is judged once; a draining XID is held until the node reboots or the
spec's hold ends). The catalog is myriad.node.parsers.kernel_log."""

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
    failed,
    listed,
    passed,
)
from myriad.node.facts import NodeFacts

XID_FIX = (
    "look the XID up in NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors): reset the "
    "GPU (nvidia-smi -r) or reboot {node}, and run the field diagnostic if it comes back; "
    "the node resumes by itself once the hold ends (health.xid_hold_s) or it reboots"
)


def _derive_xid(c: Context) -> Expect | Skip:
    if c.spec.health is None:
        return Skip("health", "no health section: node health is off")
    if c.profile.gpu is None:
        return Skip(f"{c.p}.gpu", f"profile {c.pool.profile} has no GPUs")
    return Expect({"hold_s": c.spec.health.xid_hold_s}, "health.xid_hold_s", XID_FIX)


def _counted(descriptions: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    for text in descriptions:
        seen[text] = seen.get(text, 0) + 1
    return [text if n == 1 else f"{text} x{n}" for text, n in seen.items()]


def _evaluate_xid(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (outcome := between_runs(facts.xid_events)) is not None:
        return outcome
    events = facts.xid_events.get()
    drain = _counted([e.describe() for e in events if e.action == "drain"])
    if drain:
        return failed(listed(drain))
    recorded = _counted([f"XID {e.xid}" for e in events])
    return passed(f"recorded only: {listed(recorded)}" if recorded else "no XID")


def _explain_xid(expected: dict[str, Any]) -> str:
    hold = expected["hold_s"]
    held = f"held {hold} s" if hold else "held until reboot"
    return f"no draining XID ({held}); application XIDs recorded"


GPU_XID = Check(
    id="gpu.xid",
    title="no GPU XID error that needs a reset, reboot or repair",
    spec_fields=("health.xid_hold_s", "profiles.*.gpu"),
    derive=_derive_xid,
    evaluate=_evaluate_xid,
    explain=_explain_xid,
)
