"""Container runtime checks: the engine the container_runtime role installs, and the
NVIDIA runtime registered in it on GPU nodes (docker info, containerd's config)."""

from __future__ import annotations

import re
from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    explain_unit,
    failed,
    listed,
    passed,
    unavailable,
    unit_active,
)
from myriad.node.facts import NodeFacts

FIELD = "software.container_runtime"
_NVIDIA_RUNTIME = re.compile(r"runtimes\.(?:\"nvidia\"|nvidia)\]")
_NVIDIA_DEFAULT = re.compile(r"default_runtime_name\s*=\s*\"nvidia\"")


def _engine(c: Context) -> str | Skip:
    """The engine the role installs on the pool's nodes, or why there is none."""
    if c.pool.role == "storage":
        return Skip(FIELD, "the container runtime role runs on compute, login and controller nodes")
    engine = str(c.variables.get("container_runtime_engine", c.spec.software.container_runtime))
    if engine == "none":
        return Skip(FIELD, "container_runtime_engine none")
    return engine


# --- runtime.engine --------------------------------------------------------------------------


def _derive_engine(c: Context) -> Expect | Skip:
    engine = _engine(c)
    if isinstance(engine, Skip):
        return engine
    return Expect(
        engine, FIELD, bringup_fix("container_runtime", f"systemctl enable --now {engine}")
    )


RUNTIME_ENGINE = Check(
    id="runtime.engine",
    title="container engine active",
    spec_fields=(FIELD,),
    derive=_derive_engine,
    evaluate=unit_active,
    explain=explain_unit,
)


# --- runtime.nvidia --------------------------------------------------------------------------


def _derive_nvidia(c: Context) -> Expect | Skip:
    engine = _engine(c)
    if isinstance(engine, Skip):
        return engine
    if not c.variables.get("container_runtime_nvidia_enabled") or c.profile.gpu is None:
        return Skip(f"{c.p}.gpu", f"profile {c.pool.profile} has no GPUs")
    return Expect(
        {
            "engine": engine,
            "default": bool(c.variables.get("container_runtime_nvidia_default_runtime")),
        },
        f"{FIELD}, {c.p}.gpu",
        bringup_fix("container_runtime", "the nvidia runtime is missing"),
    )


def _evaluate_nvidia(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    want_default = expected["default"]
    if expected["engine"] == "docker":
        if not facts.docker.ok:
            return unavailable(facts.docker)
        info = facts.docker.get()
        actual = f"runtimes {listed(sorted(info.runtime_names))}, default {info.default_runtime}"
        good = "nvidia" in info.runtime_names and (
            not want_default or info.default_runtime == "nvidia"
        )
        return passed(actual) if good else failed(actual)
    if not facts.containerd.ok:
        return unavailable(facts.containerd)
    text = "\n".join(facts.containerd.get().values())
    has = bool(_NVIDIA_RUNTIME.search(text))
    default = bool(_NVIDIA_DEFAULT.search(text))
    actual = "nvidia runtime " + ("present" if has else "absent")
    actual += ", default " + ("nvidia" if default else "another runtime")
    return passed(actual) if has and (default or not want_default) else failed(actual)


def _explain_nvidia(expected: dict[str, Any]) -> str:
    return f"nvidia runtime in {expected['engine']}" + (" (default)" if expected["default"] else "")


RUNTIME_NVIDIA = Check(
    id="runtime.nvidia",
    title="nvidia container runtime configured",
    spec_fields=(FIELD, "profiles.*.gpu"),
    derive=_derive_nvidia,
    evaluate=_evaluate_nvidia,
    explain=_explain_nvidia,
)
