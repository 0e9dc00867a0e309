"""The node's hardware: still the map the rdma role recorded when it was brought up.

At bring-up the rdma role checks a bare-metal node's GPUs and ports against its profile and
records the map (/etc/myriad/hardware.json, `myriad.node.hardware`); every name the roles
gave out rests on it. The gatherer discovers the map again; a port that moved, failed or was
renumbered after a board swap is named here, with the fix."""

from __future__ import annotations

from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    failed,
    listed,
    passed,
    unavailable,
)
from myriad.node.facts import NodeFacts
from myriad.node.hardware.compare import differences

RECORD = "/etc/myriad/hardware.json"
MAP_FIX = (
    "if a card failed or was unseated, reseat or replace it; if the change is intended (a "
    "board swap), run `myriad bringup SPEC --limit {node}` to check the node against its "
    "profile again, re-record the map and re-pin the names"
)


def _derive_map(c: Context) -> Expect | Skip:
    if not c.variables.get("rdma_hardware_expectation"):
        return Skip("profiles.*.nics", "no hardware expectation: not a bare-metal server")
    return Expect({"record": RECORD}, "profiles.*.nics", MAP_FIX)


def _evaluate_map(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    record = facts.hardware_record
    if record.state == "missing":
        return failed(f"no {expected['record']}: the rdma role has not recorded this node's map")
    if not record.ok:
        return unavailable(record)
    current = facts.hardware_map
    if not current.ok:
        return unavailable(current)
    problems = differences(record.get(), current.get())
    if problems:
        return failed(listed(problems), f"the map recorded in {expected['record']}")
    counts = {key: record.get().get(key) for key in ("gpus", "ports")}
    gpus, ports = (len(v) if isinstance(v, list) else 0 for v in counts.values())
    return passed(f"{gpus} GPUs and {ports} ports where they were recorded")


HARDWARE_MAP = Check(
    id="hardware.map",
    title="GPUs and ports are where the recorded hardware map has them",
    spec_fields=("profiles.*.nics",),
    derive=_derive_map,
    evaluate=_evaluate_map,
    explain=lambda expected: f"the map in {expected['record']}",
)
