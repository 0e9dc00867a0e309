"""Every check, collected from the subject modules of this package.

A subject module is any module here other than the model's own (model, registry, engine);
every `Check` it defines at module level is a check, in the order it is defined. Subjects
come in the order of SUBJECTS, then any other subject module by name, so a new subject or
a new check needs no line here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from myriad.node.checks.model import Check

# The order of the report's table: what a node is, then up the stack to the orchestrator.
SUBJECTS = (
    "host",
    "image",
    "gpu",
    "fabric",
    "roce",
    "efa",
    "bond",
    "storage",
    "runtime",
    "nccl",
    "slurm",
    "kubernetes",
)
_MODEL = ("model", "registry", "engine")
_PACKAGE = "myriad.node.checks"


def subject_modules() -> list[str]:
    package = importlib.import_module(_PACKAGE)
    found = [
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if info.name not in _MODEL and not info.name.startswith("_")
    ]
    rank = {name: i for i, name in enumerate(SUBJECTS)}
    return sorted(found, key=lambda name: (rank.get(name, len(rank)), name))


def collect() -> tuple[Check, ...]:
    """The checks of every subject module; a check id declared twice is an error."""
    checks: dict[str, Check] = {}
    for name in subject_modules():
        module = importlib.import_module(f"{_PACKAGE}.{name}")
        for value in vars(module).values():
            if not isinstance(value, Check):
                continue
            if value.id in checks and checks[value.id] is not value:
                raise RuntimeError(f"check {value.id} is declared twice (again in {name}.py)")
            checks[value.id] = value
    return tuple(checks.values())


CHECKS: tuple[Check, ...] = collect()
BY_ID: Mapping[str, Check] = MappingProxyType({check.id: check for check in CHECKS})
