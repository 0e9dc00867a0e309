"""NodeFacts: one node's facts, one typed field per declared fact.

The field is what a check reads (`facts.gpus`), typed for mypy; the declaration of the same
name in this package (`Declared("gpus", ...)`) says how it is probed and read. The registry
refuses a field without a declaration and a declaration without a field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from myriad.node.facts.clock import TimeSync
from myriad.node.facts.fact import NOT_GATHERED, Fact
from myriad.node.facts.hca import HcaLink
from myriad.node.facts.hosts import HostsFile
from myriad.node.facts.limits import Memlock
from myriad.node.facts.mount import Mount
from myriad.node.facts.pci import PciFunction
from myriad.node.facts.runner import DiskSpace
from myriad.node.facts.slurm import FileDigest, JobRun, SinfoNode
from myriad.node.parsers import (
    Bond,
    DockerInfo,
    IbPort,
    IbReport,
    ImexDomain,
    Interface,
    KubeNode,
    MlnxQos,
    NvidiaSmiReport,
    NvlinkStatus,
    Route,
    SlurmNode,
    SlurmTopology,
)
from myriad.node.parsers.kernel_log import XidEvent

# NodeFacts fields that are not facts: the node's name and how long its gathering took.
NOT_FACTS = ("host", "seconds")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What one node told us. Controller-only facts are `not-gathered` elsewhere."""

    host: str
    hostname: Fact[str]
    gpus: Fact[NvidiaSmiReport]
    nvlink: Fact[NvlinkStatus]
    imex: Fact[ImexDomain]
    hcas: Fact[IbReport]
    hca_links: Fact[Mapping[str, HcaLink]]
    pci: Fact[Mapping[str, PciFunction]]
    qos: Mapping[str, Fact[MlnxQos]]
    bonds: Fact[Mapping[str, Bond]]
    links: Fact[Mapping[str, Interface]]
    docker: Fact[DockerInfo]
    docker_daemon: Fact[Mapping[str, Any]]
    containerd: Fact[Mapping[str, str]]
    nccl_conf: Fact[str]
    memlock: Fact[Memlock]
    limits: Fact[Mapping[str, str]]
    units: Fact[Mapping[str, str]]
    modules: Fact[frozenset[str]]
    hosts_file: Fact[HostsFile]
    mount: Fact[Mount | None]
    time: Fact[TimeSync]
    slurm_nodes: Fact[tuple[SlurmNode, ...]] = NOT_GATHERED
    slurm_topology: Fact[SlurmTopology] = NOT_GATHERED
    sinfo: Fact[tuple[SinfoNode, ...]] = NOT_GATHERED
    kube_nodes: Fact[tuple[KubeNode, ...]] = NOT_GATHERED
    efa_domains: Fact[tuple[str, ...]] = NOT_GATHERED
    hca_counters: Fact[Mapping[str, Mapping[str, int | None]]] = NOT_GATHERED
    addresses: Fact[Mapping[str, tuple[str, ...]]] = NOT_GATHERED
    routes: Fact[tuple[Route, ...]] = NOT_GATHERED
    slurm_files: Fact[Mapping[str, FileDigest | None]] = NOT_GATHERED
    job: Fact[JobRun] = NOT_GATHERED
    xid_events: Fact[tuple[XidEvent, ...]] = NOT_GATHERED
    hca_counter_growth: Fact[Mapping[str, Mapping[str, int]]] = NOT_GATHERED
    disk: Fact[Mapping[str, DiskSpace]] = NOT_GATHERED
    writable: Fact[Mapping[str, str | None]] = NOT_GATHERED
    health_state: Fact[Mapping[str, Any]] = NOT_GATHERED
    kernel_release: Fact[str] = NOT_GATHERED
    image_record: Fact[Mapping[str, Any]] = NOT_GATHERED
    hardware_record: Fact[Mapping[str, Any]] = NOT_GATHERED
    hardware_map: Fact[Mapping[str, Any]] = NOT_GATHERED
    roce_gids: Fact[Mapping[str, Any]] = NOT_GATHERED
    seconds: float | None = None
    # Each RDMA device's first port (the one the spec's NICs use), read once for the
    # several HCA checks.
    hca_ports: Fact[Mapping[str, IbPort | None]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ports = self.hcas.map(
            lambda report: {d.name: (d.ports[0] if d.ports else None) for d in report.devices}
        )
        object.__setattr__(self, "hca_ports", ports)

    def unit(self, name: str) -> Fact[str]:
        """`systemctl is-active` of one unit: active, inactive, failed, ..."""
        return self.units.map(lambda states: states.get(name, "unknown"))
