"""The myriad_* variables are declared in one place: playbooks/vars/myriad.yml.

They are the playbooks' own inputs (not role variables): the renderer writes them into the
inventory, the runner passes some as extra vars, site.yml and facts.yml read them. This
test keeps that one declaration true:

- every myriad_* name the playbooks, roles or Python code use is declared there;
- a playbook's `myriad_x | default(y)` repeats the declared default;
- nothing in playbooks/ or roles/ sets one (a play's vars or set_fact, a role's defaults
  or vars would silently override or shadow what the renderer wrote);
- the rendered values of every example validate against the declaration with ansible-core's
  argument spec validator (in test_role_contract.py, with the role variables).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = ROOT / "playbooks" / "vars" / "myriad.yml"
# myriad_layer_<layer> are the groups site.yml's first play makes, not variables; the
# myriad_health_* metrics and their textfile myriad_health.prom (roles/health) are names of
# Prometheus series, not variables.
NAME = re.compile(r"(?<![\w])myriad_(?!layer_|health_|health\.prom)[a-z0-9_]+")
DEFAULT = re.compile(r"(?<![\w])(myriad_[a-z0-9_]+)\s*\|\s*default\(([^()]*)\)")
ANSIBLE_FILES = ("*.yml", "*.yaml", "*.j2")


def declared() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(DECLARATION.read_text())["myriad_argument_spec"]
    return spec


def ansible_files() -> Iterator[Path]:
    for folder in ("playbooks", "roles", "templates"):
        for pattern in ANSIBLE_FILES:
            for path in (ROOT / folder).rglob(pattern):
                if path != DECLARATION:
                    yield path


def python_names() -> Iterator[tuple[Path, int, str]]:
    """String constants in the Python code that are exactly a myriad_* variable name."""
    for folder in ("src", "stacks"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and NAME.fullmatch(node.value)
                ):
                    yield path, node.lineno, node.value


def test_every_used_myriad_variable_is_declared() -> None:
    names = set(declared())
    unknown = []
    for path in ansible_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name in NAME.findall(line):
                if name not in names:
                    unknown.append(f"{path.relative_to(ROOT)}:{number}: {name}")
    for path, number, name in python_names():
        if name not in names:
            unknown.append(f"{path.relative_to(ROOT)}:{number}: {name}")
    assert unknown == [], f"declare these in {DECLARATION.relative_to(ROOT)}"


def test_the_renderer_and_runner_names_are_found() -> None:
    """The scan of the Python code sees what the renderer writes (else it proves nothing)."""
    found = {name for _, _, name in python_names()}
    assert {"myriad_fabric", "myriad_address", "myriad_serial"} <= found


def test_playbook_defaults_repeat_the_declared_default() -> None:
    spec = declared()
    wrong = []
    for path in (ROOT / "playbooks").rglob("*.yml"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name, given in DEFAULT.findall(line):
                where = f"{path.relative_to(ROOT)}:{number}: {name}"
                try:
                    value = ast.literal_eval(given)
                except (ValueError, SyntaxError):
                    # Computed on the controller (a path next to the playbook): no value to
                    # declare, and the declaration must not pretend one.
                    if "default" in spec.get(name, {}):
                        declared_default = spec[name]["default"]
                        wrong.append(f"{where}: computed default, declared {declared_default!r}")
                    continue
                if spec.get(name, {}).get("default") != value:
                    wrong.append(f"{where}: default {value!r}, declared {spec.get(name)}")
    assert wrong == []


def _keys(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield str(key)
            yield from _keys(value)
    elif isinstance(data, list):
        for item in data:
            yield from _keys(item)


def test_nothing_in_playbooks_or_roles_sets_a_myriad_variable() -> None:
    """A mapping key named myriad_* is a variable being set (vars:, set_fact, defaults)."""
    setters = []
    for path in ansible_files():
        if path.suffix == ".j2":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            setters += [
                f"{path.relative_to(ROOT)}: {key}" for key in _keys(document) if NAME.fullmatch(key)
            ]
    assert setters == []


@pytest.mark.parametrize(
    "line",
    [
        "{{ myriad_fabric | default('roce') }}",
        "{{ myriad_max_fail_percentage | default(50) }}",
    ],
)
def test_a_drifted_default_is_caught(line: str) -> None:
    (name, given) = DEFAULT.findall(line)[0]
    assert declared()[name]["default"] != ast.literal_eval(given)
