"""spec file → plan → (stack outputs) → inventory on disk: what `myriad render` does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from myriad.planning import plan_spec
from myriad.provision.stack_outputs import StackNode, load_saved, match_spec, read_stack
from myriad.render.inventory import Connection, Inventory, build_inventory
from myriad.render.writer import write_inventory
from myriad.spec.problems import MyriadError

PROJECT_ROOT = Path(__file__).resolve().parents[3]


class RenderError(MyriadError):
    exit_code = 1


@dataclass(frozen=True, slots=True)
class RenderResult:
    cluster: str
    path: Path
    hosts: int
    groups: int
    inventory: Inventory


def render_spec(
    spec_path: Path,
    out: Path,
    *,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    ssh_user: str | None = None,
) -> RenderResult:
    result = plan_spec(spec_path)
    if result.plan is None or result.has_errors:
        errors = [f.message for f in result.findings if f.severity == "error"]
        raise RenderError(
            "the spec has lint errors; `myriad plan` shows them: " + "; ".join(errors)
        )
    spec = result.loaded.spec
    machines: list[StackNode] = []
    if stack is not None:
        machines = read_stack(stack, cwd=PROJECT_ROOT)
    elif stack_outputs is not None:
        machines = load_saved(stack_outputs)
    if machines:
        match_spec(spec, machines, require_all=False)
    inventory = build_inventory(
        spec,
        result.loaded.catalog,
        result.plan,
        machines=machines,
        connection=Connection(user=ssh_user),
    )
    path = write_inventory(inventory, out)
    groups = sum(1 for hosts in inventory.groups.values() if hosts)
    return RenderResult(spec.metadata.name, path, len(inventory.host_vars), groups, inventory)
