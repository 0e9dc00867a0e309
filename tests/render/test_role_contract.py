"""The Python ↔ Ansible contract: what the renderer writes is what the roles accept.

For every host of every example inventory, the variables Ansible would see on that host
(group_vars of `all`, then of its groups by name, then its host_vars, as Ansible merges a
flat inventory, and the cluster-wide tables the runs load as extra vars) are validated
against every role's `meta/argument_specs.yml` (and the myriad_* variables against
`playbooks/vars/myriad.yml`) by ansible-core's own validator, the one the role's
generated `validate_argument_spec` task runs before the role starts. A
wrong type, a value outside `choices`, a missing required key of a list element fails here
instead of on the nodes. What the renderer leaves out falls back to the spec's default,
which `test_defaults_agree_with_the_argument_spec` holds equal to `defaults/main.yml` (a
Jinja default is templated on the node and is no rendered value). Every role is checked
on every host, not only the hosts of its layer: a host that does not run a role still
must not hold a value the role would refuse, since a layer group can grow to include it.

The rendered values must also already have the declared types: ansible-core converts
`"8"` to 8 silently, which would hide a renderer that writes strings where numbers belong.

A value shared by many hosts (group_vars, the tables) is validated once (h100-100k has 12,519 hosts;
its cluster-wide Slurm and Kubernetes lists would otherwise be copied 12,519 times).

And: every variable the renderer writes is declared by the role its prefix names (Ansible
ignores a variable no role reads; a renamed role variable would silently stop reaching
the nodes), and every `myriad_*` variable is one the site playbook declares.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import Inventory, build_inventory

from spec_builder import load_example

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta").is_dir())
EXAMPLES = sorted(p.parent.name for p in (ROOT / "inventories").glob("*/cluster.yaml"))
PLAYBOOK_VARS = ROOT / "playbooks" / "vars" / "myriad.yml"
# The myriad_* variables the playbooks read, declared like a role's (test_playbook_vars.py).
PLAYBOOK = "playbooks/vars/myriad.yml"


@cache
def argument_spec(role: str) -> dict[str, Any]:
    if role == PLAYBOOK:
        return dict(yaml.safe_load(PLAYBOOK_VARS.read_text())["myriad_argument_spec"])
    document = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return document["argument_specs"]["main"].get("options", {})


@cache
def role_defaults(role: str) -> dict[str, Any]:
    if role == PLAYBOOK:
        return {}
    path = ROOT / "roles" / role / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def owner(variable: str) -> str | None:
    matches = [role for role in ROLES if variable.startswith(f"{role}_")]
    return max(matches, key=len) if matches else None


@cache
def render(example: str) -> Inventory:
    result = plan_loaded(load_example(example))
    assert result.plan is not None, example
    return build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)


def host_variables(inventory: Inventory) -> Iterator[tuple[str, dict[str, Any]]]:
    """(host, variables) as Ansible merges them: all < groups by name < host_vars < tables.

    The writer puts every group directly under `all`, so all groups have depth 1 and
    Ansible orders them by name (ansible_group_priority is never set).
    """
    memberships: dict[str, list[str]] = {host: [] for host in inventory.host_vars}
    for group, hosts in sorted(inventory.groups.items()):
        for host in hosts:
            memberships[host].append(group)
    base = dict(inventory.group_vars.get("all", {}))
    for host, values in inventory.host_vars.items():
        merged = dict(base)
        for group in memberships[host]:
            merged.update(inventory.group_vars.get(group, {}))
        merged.update(values)
        # The cluster-wide tables: extra vars (cluster_tables.yml), above everything else.
        merged.update(inventory.tables)
        yield host, merged


def same_types(given: Any, validated: Any) -> bool:
    """True when validation changed nothing but filled in defaults of list elements."""
    if isinstance(given, Mapping) and isinstance(validated, Mapping):
        return all(key in validated and same_types(v, validated[key]) for key, v in given.items())
    if isinstance(given, list) and isinstance(validated, list):
        return len(given) == len(validated) and all(map(same_types, given, validated))
    return type(given) is type(validated) and given == validated


@cache
def validator(role: str, name: str) -> ArgumentSpecValidator:
    return ArgumentSpecValidator({name: argument_spec(role)[name]})


def validate(role: str, values: dict[str, Any]) -> list[str]:
    """ansible-core's verdict on `values`, plus any type it had to convert."""
    problems = []
    for name, given in values.items():
        result = validator(role, name).validate({name: given}, validate_role_argument_spec=True)
        problems += result.error_messages
        if not result.error_messages and not same_types(given, result.validated_parameters[name]):
            converted = result.validated_parameters[name]
            problems.append(f"{name}: rendered {given!r}, the spec turns it into {converted!r}")
    return problems


# Scalar argument types and the Python type whose every value ansible-core accepts for them.
NATIVE: dict[str, type] = {"str": str, "path": str, "int": int, "bool": bool, "float": float}


def canonical(value: Any, option: Mapping[str, Any]) -> Any:
    """`value` with every scalar that ansible-core accepts whatever it holds made blank.

    A scalar of its option's own Python type, with no `choices`, passes by its type alone
    (any str for a str), so two values that differ only there get the same verdict: the
    12,519 management addresses of h100-100k, or HCA lists that differ in leaf names, are
    validated once. List elements and dict keys are walked with their sub-options.
    """
    kind = option.get("type", "str")
    if "choices" not in option and type(value) is NATIVE.get(kind):
        return NATIVE[kind]()
    options = option.get("options") or {}
    if kind == "list" and isinstance(value, list):
        element = {"type": option.get("elements", "raw"), "options": options}
        if "choices" in option:
            element["choices"] = option["choices"]
        return [canonical(item, element) for item in value]
    if kind == "dict" and isinstance(value, dict) and options:
        return {
            key: canonical(item, options[key]) if key in options else item
            for key, item in value.items()
        }
    return value


# Argument spec keys that tie options together. Options are validated one at a time below
# (each distinct value once), which is only the whole verdict while no spec uses these.
CROSS_OPTION_KEYS = {
    "mutually_exclusive",
    "required_together",
    "required_one_of",
    "required_if",
    "required_by",
}


@pytest.mark.parametrize("role", [*ROLES, PLAYBOOK])
def test_options_are_independent(role: str) -> None:
    if role == PLAYBOOK:
        return
    document = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    main = document["argument_specs"]["main"]
    assert CROSS_OPTION_KEYS.isdisjoint(main), (
        f"{role} ties options together ({CROSS_OPTION_KEYS & set(main)}): validate whole "
        "variable sets in test_every_host_validates_against_every_role_argument_spec"
    )


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_host_validates_against_every_role_argument_spec(example: str) -> None:
    """Each distinct value of each option is validated once.

    Values from group_vars are the same object on every host of the group, so a 12,519-host
    inventory writes out its cluster-wide lists once; equal per-host values (the leaves of
    the nodes of one rack position) are validated once.
    """
    inventory = render(example)
    assert inventory.host_vars, example
    hosts_by_value: dict[tuple[str, str, str], list[str]] = {}
    failures: dict[tuple[str, str, str], list[str]] = {}
    missing: list[str] = []
    # Each value object is written out once: group_vars values are shared by their hosts.
    texts: dict[int, str] = {}
    required = {
        role: {
            name
            for name, option in argument_spec(role).items()
            if option.get("required") and name not in role_defaults(role)
        }
        for role in [*ROLES, PLAYBOOK]
    }
    for host, variables in host_variables(inventory):
        for role in [*ROLES, PLAYBOOK]:
            spec = argument_spec(role)
            missing += [
                f"{role} on {host}: {name} is required and not rendered"
                for name in required[role] - variables.keys()
            ]
            for name in spec.keys() & variables.keys():
                option, value = spec[name], variables[name]
                if (text := texts.get(id(value))) is None:
                    text = texts[id(value)] = json.dumps(canonical(value, option), sort_keys=True)
                key = (role, name, text)
                if key not in hosts_by_value:
                    hosts_by_value[key] = []
                    problems = validate(role, {name: value})
                    if problems:
                        failures[key] = problems
                hosts_by_value[key].append(host)
    report = missing + [
        f"{role} on {len(hosts_by_value[key])} hosts (e.g. {hosts_by_value[key][0]}): "
        + "; ".join(problems)
        for key, problems in failures.items()
        for role in [key[0]]
    ]
    assert report == [], "\n".join(report)
    validated_hosts = {host for hosts in hosts_by_value.values() for host in hosts}
    assert validated_hosts == set(inventory.host_vars)


@pytest.mark.parametrize("example", EXAMPLES)
def test_rendered_variables_are_declared(example: str) -> None:
    inventory = render(example)
    names = {name for values in inventory.group_vars.values() for name in values}
    names |= set(inventory.tables)
    names |= {name for values in inventory.host_vars.values() for name in values}
    playbook_vars = set(argument_spec(PLAYBOOK))
    undeclared = []
    for name in sorted(names):
        if name.startswith("ansible_"):
            continue
        if name.startswith("myriad_"):
            if name not in playbook_vars:
                undeclared.append(f"{name} (not in {PLAYBOOK_VARS.relative_to(ROOT)})")
            continue
        role = owner(name)
        if role is None or name not in argument_spec(role):
            undeclared.append(f"{name} (role {role})")
    assert undeclared == [], undeclared


def test_the_validator_catches_a_wrong_value() -> None:
    """The contract test can fail: a rendered value of the wrong type or choice is refused."""
    assert validate("nccl", {"nccl_fabric": "token-ring"})
    assert validate("nccl", {"nccl_ib_sl": "0"})
    assert validate("nccl", {"nccl_hcas": [{"port": 1}]})
    assert validate("nccl", {"nccl_fabric": "roce", "nccl_ib_sl": 0}) == []


def templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


@pytest.mark.parametrize("role", ROLES)
def test_defaults_agree_with_the_argument_spec(role: str) -> None:
    """defaults/main.yml and the spec name the same variables with the same defaults.

    A default that is a Jinja expression is computed on the node; the spec cannot hold it
    as a value (ansible-doc would print the template), so its description says it in words.
    """
    spec = argument_spec(role)
    defaults = role_defaults(role)
    problems = [f"{name}: in defaults/main.yml, not in the spec" for name in defaults.keys() - spec]
    for name, option in spec.items():
        if name not in defaults:
            if option.get("default") is not None:
                problems.append(f"{name}: spec default {option['default']!r}, not in defaults")
            elif not option.get("required"):
                problems.append(f"{name}: optional without a default in defaults/main.yml")
            continue
        if templated(defaults[name]):
            continue
        if "default" in option and option["default"] != defaults[name]:
            problems.append(
                f"{name}: defaults/main.yml says {defaults[name]!r}, "
                f"the spec says {option['default']!r}"
            )
        elif "default" not in option and defaults[name] is not None:
            problems.append(f"{name}: defaults/main.yml says {defaults[name]!r}, spec has none")
    assert problems == [], problems
