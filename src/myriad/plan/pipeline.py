"""Load → plan → lint: the one pipeline behind `myriad plan` and everything that reads a plan."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from myriad.errors import FabricError, PlanError
from myriad.plan.figures import json_figures
from myriad.plan.lints import Finding, lint
from myriad.plan.model import Plan
from myriad.plan.planner import make_plan
from myriad.spec.loader import LoadedSpec, load_spec


@dataclass(frozen=True, slots=True)
class PlanResult:
    """A plan and its findings; `plan` is None when the fabric has no plannable shape."""

    loaded: LoadedSpec
    plan: Plan | None
    findings: tuple[Finding, ...]

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def usable_plan(self) -> Plan:
        """The plan, for the stages that build from it; PlanError when lints found errors."""
        if self.plan is None or self.has_errors:
            errors = "; ".join(f.message for f in self.findings if f.severity == "error")
            raise PlanError(f"the spec has lint errors (see `myriad plan`): {errors}")
        return self.plan

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = json_figures(
            {
                "spec": self.loaded.source.file,
                "plan": None if self.plan is None else self.plan.to_dict(),
                "findings": [f.to_dict(self.loaded) for f in self.findings],
            }
        )
        return document


def plan_loaded(loaded: LoadedSpec) -> PlanResult:
    try:
        plan = make_plan(loaded.spec, loaded.catalog)
    except FabricError as exc:
        finding = Finding(
            id="fabric-shape",
            severity="error",
            message=str(exc),
            suggestion="change network.topology (island_nodes, switch) so the fabric fits",
            path=("network", "topology"),
        )
        return PlanResult(loaded=loaded, plan=None, findings=(finding,))
    return PlanResult(loaded=loaded, plan=plan, findings=_accepting(loaded, lint(loaded, plan)))


def _accepting(loaded: LoadedSpec, findings: list[Finding]) -> tuple[Finding, ...]:
    """The spec's accepted rules carry their reason; an acceptance that matched nothing is
    said, so it cannot wait silently for the next, different finding of its rule."""
    reasons = {a.rule: a.reason for a in loaded.spec.lints.accept}
    used: set[str] = set()
    marked = []
    for finding in findings:
        if finding.id in reasons and finding.severity != "error":
            finding = replace(finding, accepted=reasons[finding.id])
            used.add(finding.id)
        marked.append(finding)
    for index, acceptance in enumerate(loaded.spec.lints.accept):
        if acceptance.rule not in used:
            marked.append(
                Finding(
                    id="accept-unused",
                    severity="info",
                    message=f"lints.accept names {acceptance.rule}, which this plan does not "
                    "report",
                    suggestion="remove the entry, so it accepts nothing it was not meant for",
                    path=("lints", "accept", index),
                )
            )
    return tuple(marked)


def plan_spec(path: str | Path) -> PlanResult:
    return plan_loaded(load_spec(path))
