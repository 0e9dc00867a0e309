"""Every role variable the renderer writes is declared in that role's argument spec.

Ansible ignores a variable no role reads; without this test a renamed role variable
would silently stop reaching the nodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory

from spec_builder import load_example

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta").is_dir())
OWN_PREFIXES = ("myriad_", "ansible_")


def declared(role: str) -> set[str]:
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    names: set[str] = set()
    for entry in specs["argument_specs"].values():
        names |= set(entry.get("options", {}))
    return names


def owner(variable: str) -> str | None:
    matches = [role for role in ROLES if variable.startswith(f"{role}_")]
    return max(matches, key=len) if matches else None


@pytest.mark.parametrize("example", ["local", "starter-64", "roce-10k", "h100-100k", "aws-dev"])
def test_rendered_role_variables_are_declared_by_their_roles(example: str) -> None:
    result = plan_loaded(load_example(example))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    variables = {name for values in inventory.group_vars.values() for name in values}
    variables |= {name for values in list(inventory.host_vars.values())[:50] for name in values}
    undeclared = []
    for name in sorted(variables):
        if name.startswith(OWN_PREFIXES):
            continue
        role = owner(name)
        if role is None or name not in declared(role):
            undeclared.append(f"{name} (role {role})")
    assert undeclared == []
