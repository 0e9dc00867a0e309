"""Load → plan → lint: the one pipeline behind `myriad plan` and everything that reads a plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myriad.plan import make_plan
from myriad.plan.model import Plan
from myriad.spec.lints import Finding, lint
from myriad.spec.loader import LoadedSpec, load_spec


@dataclass(frozen=True, slots=True)
class PlanResult:
    loaded: LoadedSpec
    plan: Plan
    findings: tuple[Finding, ...]

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.loaded.source.file,
            "plan": self.plan.to_dict(),
            "findings": [f.to_dict(self.loaded) for f in self.findings],
        }


def plan_loaded(loaded: LoadedSpec) -> PlanResult:
    plan = make_plan(loaded.spec, loaded.catalog)
    return PlanResult(loaded=loaded, plan=plan, findings=tuple(lint(loaded, plan)))


def plan_spec(path: str | Path) -> PlanResult:
    return plan_loaded(load_spec(path))
