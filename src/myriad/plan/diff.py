"""`myriad plan SPEC --diff OLD.json`: what a change to the spec adds or removes, in the
figures an operator buys and pays for, as `terraform plan` shows a change before it is made.

Both sides are plan documents (`myriad plan --json` or `--out DIR`'s plan.json), so the old
one can come from another checkout, another version or a colleague; fields an older document
lacks are shown as absent, never as zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from myriad.errors import BadArguments
from myriad.plan.figures import rounded

# (label, path in the plan document): the figures a change is judged by.
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nodes", ("nodes",)),
    ("GPUs", ("gpus",)),
    ("leaf switches", ("fabric", "leaves")),
    ("spine switches", ("fabric", "spines")),
    ("core switches", ("fabric", "core_switches")),
    ("fabric cables", ("fabric", "cables")),
    ("transceivers", ("fabric", "transceivers")),
    ("switch power kW", ("power", "switch_kw")),
    ("IT power kW", ("power", "it_kw")),
    ("facility power kW", ("power", "facility_kw")),
    ("racks", ("power", "racks")),
    ("energy cost USD/year", ("power", "cost_usd_per_year")),
    ("peak BF16 PFLOP/s", ("compute", "peak_bf16_pflops")),
)


@dataclass(frozen=True, slots=True)
class Change:
    what: str
    before: float | str | None
    after: float | str | None

    @property
    def delta(self) -> float | None:
        if isinstance(self.before, int | float) and isinstance(self.after, int | float):
            change = self.after - self.before
            return change if isinstance(change, int) else rounded(change)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "before": self.before, "after": self.after, "delta": self.delta}


def _at(document: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = document
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _pools(plan: Mapping[str, Any]) -> dict[str, Any]:
    pools = plan.get("pools") or []
    return {str(p.get("name")): p.get("nodes") for p in pools if isinstance(p, Mapping)}


def _findings(document: Mapping[str, Any]) -> set[tuple[str, str, str]]:
    found = document.get("findings") or []
    return {
        (str(f.get("severity")), str(f.get("id")), str(f.get("path")))
        for f in found
        if isinstance(f, Mapping)
    }


def plan_document(data: Any, source: str) -> Mapping[str, Any]:
    """The old side, checked enough that a wrong file is named instead of diffed as empty."""
    if not isinstance(data, Mapping) or not isinstance(data.get("plan"), Mapping | None):
        raise BadArguments(f"--diff {source}: not a plan document (myriad plan --json or --out)")
    if data.get("plan") is None and "findings" not in data:
        raise BadArguments(f"--diff {source}: not a plan document (myriad plan --json or --out)")
    return data


def diff_plans(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every figure and pool size that differs, then the findings that came or went."""
    old_plan, new_plan = old.get("plan") or {}, new.get("plan") or {}
    changes = [
        Change(label, _at(old_plan, path), _at(new_plan, path))
        for label, path in FIGURES
        if _at(old_plan, path) != _at(new_plan, path)
    ]
    before, after = _pools(old_plan), _pools(new_plan)
    for name in dict.fromkeys([*before, *after]):
        if before.get(name) != after.get(name):
            changes.append(Change(f"pool {name} nodes", before.get(name), after.get(name)))
    old_findings, new_findings = _findings(old), _findings(new)
    for severity, rule, path in sorted(new_findings - old_findings):
        changes.append(Change(f"finding {rule} at {path}", None, severity))
    for severity, rule, path in sorted(old_findings - new_findings):
        changes.append(Change(f"finding {rule} at {path}", severity, None))
    return changes
