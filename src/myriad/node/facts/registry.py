"""Every fact, collected from the fact modules of this package.

A fact module is any module here other than the model's own (MODEL); every `Declared` it
defines at module level is a fact, and the probes those facts name are what the gatherer
runs. So a fact is one declaration in one module, and a new fact is a new module (or a
declaration in its family's) plus its typed field in node.py. Discovery goes through
pkgutil, which lists the modules of a zipapp as well as of a directory.

Refused when the package is imported, so no node runs a half-declared fact:
a fact name declared twice, a probe name used by two different probes, a NodeFacts field
no module declares, a declaration NodeFacts has no field for.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import fields
from types import MappingProxyType, ModuleType
from typing import Any, NamedTuple

from myriad.node.facts.declare import Declared, Probe
from myriad.node.facts.node import NOT_FACTS, NodeFacts

MODEL = ("declare", "fact", "node", "probe", "read", "registry")
_PACKAGE = "myriad.node.facts"


class DeclarationError(RuntimeError):
    """The fact declarations contradict each other or NodeFacts."""


class Registry(NamedTuple):
    facts: Mapping[str, Declared[Any]]
    probes: tuple[Probe, ...]


def fact_modules() -> list[ModuleType]:
    package = importlib.import_module(_PACKAGE)
    names = sorted(
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if info.name not in MODEL and not info.name.startswith("_")
    )
    return [importlib.import_module(f"{_PACKAGE}.{name}") for name in names]


def _where(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[-1] + ".py"


def collect(modules: Iterable[ModuleType], fields_: Iterable[str] | None = None) -> Registry:
    """The facts and probes `modules` declare, checked against NodeFacts' fields."""
    facts: dict[str, Declared[Any]] = {}
    found_in: dict[str, str] = {}
    probes: dict[str, Probe] = {}
    probe_in: dict[str, str] = {}
    for module in modules:
        for value in vars(module).values():
            if not isinstance(value, Declared):
                continue
            here = _where(module)
            if value.name in facts and facts[value.name] is not value:
                raise DeclarationError(
                    f"fact {value.name!r} is declared twice: in {found_in[value.name]} and {here}"
                )
            facts[value.name] = value
            found_in.setdefault(value.name, here)
            for probe in value.probes:
                if probe.name in probes and probes[probe.name] is not probe:
                    raise DeclarationError(
                        f"probe {probe.name!r} is declared twice: in {probe_in[probe.name]} "
                        f"and {here}; declare it once and name it in both facts"
                    )
                probes[probe.name] = probe
                probe_in.setdefault(probe.name, here)
    wanted = list(fields_) if fields_ is not None else node_fields()
    for name in wanted:
        if name not in facts:
            raise DeclarationError(
                f"NodeFacts.{name} has no declaration: declare it in a module of "
                f"{_PACKAGE} (Declared({name!r}, probes, read))"
            )
    for name, where in found_in.items():
        if name not in wanted:
            raise DeclarationError(
                f"fact {name!r} ({where}) is not a field of NodeFacts: add `{name}: Fact[...]` "
                f"to {_PACKAGE}.node"
            )
    return Registry(MappingProxyType(facts), tuple(probes.values()))


def node_fields() -> list[str]:
    """NodeFacts' fields that are facts (given when it is made, not host or seconds)."""
    return [f.name for f in fields(NodeFacts) if f.init and f.name not in NOT_FACTS]


REGISTRY = collect(fact_modules())
FACTS: Mapping[str, Declared[Any]] = REGISTRY.facts
PROBES: tuple[Probe, ...] = REGISTRY.probes
