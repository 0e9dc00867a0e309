"""The OS capability table (catalog/os.yaml): what each supported OS really ships.

Each row names, with its source, the Slurm version and plugins, kernel, systemd, netplan,
rdma-core and container engine versions of one `software.os`. The plan's lints, the roles'
per-OS variables (held equal to it by a test) and the preflight matrix read it, so a choice
that depends on the OS is made from one set of facts.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field


class _Fact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    source: str = Field(min_length=3, description="Package, upstream tag or page it was read from")


class TextFact(_Fact):
    value: str


class ListFact(_Fact):
    value: tuple[str, ...]


class HierarchyFact(_Fact):
    value: Literal["unified", "legacy", "hybrid"]


class OsRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    codename: TextFact
    kernel: TextFact
    systemd: TextFact
    cgroup_hierarchy: HierarchyFact
    slurm: TextFact
    slurm_package: TextFact
    cgroup_plugins: ListFact
    topology_plugins: ListFact
    gpu_plugins: ListFact
    nvml_package: TextFact
    netplan: TextFact
    rdma_core: TextFact
    docker_io: TextFact
    containerd: TextFact

    @property
    def boot_cgroup_plugin(self) -> str:
        """The plugin `CgroupPlugin=autodetect` picks on a node booted as the OS does."""
        return "cgroup/v2" if self.cgroup_hierarchy.value == "unified" else "cgroup/v1"

    def cgroup_plugin(self, configured: str, *, legacy_hierarchy: bool = False) -> str:
        """The plugin slurmd loads for a configured CgroupPlugin value on this OS."""
        if configured != "autodetect":
            return configured
        return "cgroup/v1" if legacy_hierarchy else self.boot_cgroup_plugin

    def cgroup_problem(self, configured: str, *, legacy_hierarchy: bool = False) -> str | None:
        """Why slurmd cannot start with this CgroupPlugin here, or None when it can."""
        plugin = self.cgroup_plugin(configured, legacy_hierarchy=legacy_hierarchy)
        if plugin not in self.cgroup_plugins.value:
            return (
                f"Slurm {self.slurm.value} has no {plugin} plugin (it has "
                f"{', '.join(self.cgroup_plugins.value)}; {self.cgroup_plugins.source})"
            )
        booted = "cgroup/v1" if legacy_hierarchy else self.boot_cgroup_plugin
        if plugin != booted:
            hierarchy = "legacy (v1)" if legacy_hierarchy else f"{self.cgroup_hierarchy.value} (v2)"
            return f"{plugin} cannot manage the {hierarchy} cgroup hierarchy the node boots"
        return None


@cache
def os_table() -> dict[str, OsRow]:
    """The shipped table, by `software.os` value."""
    ref = resources.files("myriad") / "catalog" / "os.yaml"
    data = yaml.safe_load(ref.read_text(encoding="utf-8"))
    return {name: OsRow.model_validate(_tuples(row)) for name, row in data.items()}


def _tuples(row: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    """YAML lists as tuples, which the frozen, strict rows hold."""
    return {
        key: {k: tuple(v) if isinstance(v, list) else v for k, v in fact.items()}
        for key, fact in row.items()
    }
