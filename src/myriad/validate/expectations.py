"""What every node should look like: a pure function of spec + plan + inventory.

Hardware figures (GPU count and model, NIC rates, PCIe links) come from the spec and the
catalog; the state the roles produce (/etc/nccl.conf, bonds, QoS, services) comes from the
inventory variables the roles were given, completed by the roles' own defaults, so that the
expectation is what the roles were asked to do. Each expectation names the spec field it
derives from and the fix for a difference; one that the spec makes meaningless for a node
(GPU checks on a CPU-only node) is kept, marked not applicable, with the reason.

Nodes of one pool share one tuple of expectations; only a few (host name, Slurm switch)
are per node, so 12,500 nodes cost a few shared tuples, not half a million objects.
"""

from __future__ import annotations

import sys
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from myriad import paths
from myriad.plan.model import Plan
from myriad.plan.ports import Port, ports
from myriad.render.inventory import Inventory
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster, Pool, Profile

# Roles whose defaults complete what the inventory says (a variable the renderer leaves out
# takes the role's default on the node, so the expectation must too).
DEFAULT_ROLES = (
    "common",
    "nvidia_driver",
    "roce",
    "storage_net",
    "nccl",
    "container_runtime",
    "slurm",
)
# nvidia-smi reports usable memory: 79.6 GiB on an "80 GB" H100, 15 GiB on a "16 GB" T4.
GPU_MEMORY_LOW, GPU_MEMORY_HIGH = 0.92, 1.05
SLURM_GOOD_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")
NOT_APPLICABLE = "not-applicable"

# --- the checks -------------------------------------------------------------------------

CHECK_TITLES: dict[str, str] = {
    "host.name": "host name is the inventory name",
    "hosts.file": "/etc/hosts lists the cluster hosts",
    "time.sync": "time synchronisation service active",
    "time.synchronised": "clock synchronised to its sources",
    "limits.memlock": "memlock unlimited in limits.d",
    "limits.memlock-session": "memlock unlimited in a login session",
    "gpu.count": "GPU count",
    "gpu.model": "GPU model",
    "gpu.memory": "GPU memory",
    "gpu.driver": "NVIDIA driver version",
    "gpu.persistence": "GPU persistence mode",
    "gpu.health": "no pending or failed row remaps / page retirements",
    "gpu.fabricmanager": "Fabric Manager active",
    "gpu.nvlink": "NVLink links up",
    "gpu.pcie": "GPU PCIe link",
    "gpudirect.peermem": "nvidia_peermem loaded",
    "hca.present": "compute HCAs present",
    "hca.state": "HCA ports ACTIVE / LinkUp",
    "hca.rate": "HCA port rate",
    "hca.link-layer": "HCA link layer",
    "nic.pcie": "NIC PCIe link",
    "roce.trust": "RoCE trust dscp",
    "roce.pfc": "PFC on the RoCE priority only",
    "roce.dscp": "DSCP to priority mapping",
    "roce.mtu": "RoCE interface MTU",
    "bond.mode": "storage bond mode",
    "bond.slaves": "storage bond members up",
    "bond.speed": "storage bond member speed",
    "bond.mtu": "storage bond MTU",
    "storage.mount": "shared storage mounted",
    "runtime.engine": "container engine active",
    "runtime.nvidia": "nvidia container runtime configured",
    "nccl.conf": "/etc/nccl.conf content",
    "slurm.munge": "munge active",
    "slurm.slurmd": "slurmd active",
    "slurm.slurmctld": "slurmctld active",
    "slurm.node-state": "Slurm node present and usable",
    "slurm.gres": "Slurm node Gres",
    "slurm.topology": "Slurm node under its switch",
    "k8s.kubelet": "kubelet active",
    "k8s.node-ready": "Kubernetes node Ready",
    "k8s.gpu-allocatable": "allocatable nvidia.com/gpu",
}


def bringup_fix(tag: str, what: str = "") -> str:
    """The fix that re-applies one role to the node; `{node}` is filled per result."""
    lead = f"{what}; " if what else ""
    return f"{lead}re-run the {tag} role: myriad bringup --tags {tag} --limit {{node}}"


@dataclass(frozen=True, slots=True)
class Expectation:
    check: str
    expected: Any
    spec_field: str
    fix: str
    applies: bool = True
    reason: str = ""


def skip(check: str, spec_field: str, reason: str) -> Expectation:
    return Expectation(check, None, spec_field, "", applies=False, reason=reason)


@dataclass(frozen=True, slots=True)
class NodeExpectations:
    """`shared` is one tuple for all the nodes of a pool (and Slurm kind); `own` is this
    node's (host name, Slurm switch)."""

    node: str
    pool: str
    profile: str
    role: str
    shared: tuple[Expectation, ...]
    own: tuple[Expectation, ...] = ()

    @property
    def expectations(self) -> tuple[Expectation, ...]:
        return self.shared + self.own


@dataclass(frozen=True, slots=True)
class ClusterExpectations:
    cluster: str
    provider: str
    orchestrator: str
    nodes: tuple[NodeExpectations, ...]
    # Hosts whose gathered facts carry the orchestrator's view, in order of preference.
    controllers: tuple[str, ...]

    def node(self, name: str) -> NodeExpectations:
        for node in self.nodes:
            if node.node == name:
                return node
        raise KeyError(name)


# --- expected values with more than one part ---------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuModelExpect:
    model: str
    token: str
    pcie: bool


@dataclass(frozen=True, slots=True)
class Driver:
    branch: str
    version: str | None

    def matches(self, found: str) -> bool:
        if self.version is not None:
            return found == self.version
        return found.split(".")[0] == self.branch

    def __str__(self) -> str:
        return self.version or f"branch {self.branch} ({self.branch}.x)"


@dataclass(frozen=True, slots=True)
class Link:
    gen: int
    width: int

    def __str__(self) -> str:
        return f"Gen{self.gen} x{self.width}"


@dataclass(frozen=True, slots=True)
class DeviceLinks:
    links: tuple[tuple[str, Link], ...]


@dataclass(frozen=True, slots=True)
class Each:
    """The same expected value on each of several devices or interfaces."""

    names: tuple[str, ...]
    value: Any


@dataclass(frozen=True, slots=True)
class BondExpect:
    name: str
    mode: str
    slaves: tuple[str, ...]
    speed_mbps: int
    mtu: int


@dataclass(frozen=True, slots=True)
class MountExpect:
    path: str
    kind: str
    fstypes: tuple[str, ...]
    source: str | None


@dataclass(frozen=True, slots=True)
class HostsBlock:
    """The cluster's hosts: (address, names) per host, and the managed block of /etc/hosts
    exactly as roles/common/templates/hosts-block.j2 writes it (interned, see facts)."""

    entries: tuple[tuple[str, tuple[str, ...]], ...]
    text: str


def hosts_block(hosts: Sequence[Mapping[str, Any]]) -> HostsBlock:
    entries = tuple(
        (str(h["address"]), (str(h["name"]), *(str(a) for a in h.get("aliases") or ())))
        for h in hosts
    )
    text = "\n".join(f"{address:<15} {' '.join(names)}" for address, names in entries)
    return HostsBlock(entries, sys.intern(text))


@dataclass(frozen=True, slots=True)
class SessionLimit:
    """The memlock a login session gets. A container (provider local) cannot raise a limit
    above what its engine gave PID 1, so there the ceiling is the most it can show."""

    value: str
    container: bool


@dataclass(frozen=True, slots=True)
class NvidiaRuntime:
    engine: str
    default: bool


@dataclass(frozen=True, slots=True)
class GresExpect:
    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return ":".join(p for p in (self.name, self.type, str(self.count)) if p)


# --- role defaults (the one I/O here, done once) -----------------------------------------


@cache
def load_role_defaults(roles: Path | None = None) -> Mapping[str, Any]:
    """The roles' defaults/main.yml merged: what a node gets where the inventory is silent."""
    merged: dict[str, Any] = {}
    roles = paths.roles_dir() if roles is None else roles
    for role in DEFAULT_ROLES:
        path = roles / role / "defaults" / "main.yml"
        if path.is_file():
            merged.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return merged


# --- /etc/nccl.conf, the nccl role's logic in Python -------------------------------------


def _nccl_gdr_from_topology(topology: Mapping[str, Any]) -> str:
    """PXB when every NIC shares a PCIe switch with GPUs, PHB when each at least shares a
    CPU with GPUs, else nothing (roles/nccl/vars/main.yml `__nccl_topology_gdr_level`)."""
    nics = on_switch = on_cpu = 0
    for cpu in topology.get("cpus") or []:
        switches = cpu.get("pcie_switches") or []
        cpu_gpus = len(cpu.get("gpus") or []) + sum(len(s.get("gpus") or []) for s in switches)
        for switch in switches:
            for _nic in switch.get("nics") or []:
                nics += 1
                if switch.get("gpus"):
                    on_switch += 1
                elif cpu_gpus > 0:
                    on_cpu += 1
        for _nic in cpu.get("nics") or []:
            nics += 1
            if cpu_gpus > 0:
                on_cpu += 1
    if nics and on_switch == nics:
        return "PXB"
    if nics and on_switch + on_cpu == nics:
        return "PHB"
    return ""


def _nccl_value(value: Any) -> str:
    # The template prints booleans as 0/1 and everything else as Jinja would.
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def nccl_settings(variables: Mapping[str, Any]) -> dict[str, Any]:
    """The KEY → value pairs the nccl role writes, from its variables (defaults included)."""
    fabric = variables["nccl_fabric"]
    verbs = fabric in ("infiniband", "roce")
    hcas = list(variables.get("nccl_hcas") or [])
    if hcas and all("rail" in hca for hca in hcas):
        hcas = sorted(hcas, key=lambda hca: hca["rail"])
    topology = variables.get("nccl_topology") or {}
    gdr = variables.get("nccl_net_gdr_level") or _nccl_gdr_from_topology(topology)
    qps = int(variables.get("nccl_ib_qps_per_connection", 1))
    settings: dict[str, Any] = {"NCCL_SOCKET_IFNAME": variables["nccl_socket_ifname"]}
    if verbs and hcas:
        settings["NCCL_IB_HCA"] = "=" + ",".join(f"{h['name']}:{h.get('port', 1)}" for h in hcas)
    if fabric == "roce":
        settings["NCCL_IB_GID_INDEX"] = variables["nccl_roce_gid_index"]
        settings["NCCL_IB_TC"] = int(variables["nccl_roce_dscp"]) * 4
    if fabric == "infiniband":
        settings["NCCL_IB_SL"] = variables["nccl_ib_sl"]
    if fabric == "ethernet":
        settings["NCCL_IB_DISABLE"] = 1
    if variables.get("nccl_rail_optimized"):
        settings["NCCL_CROSS_NIC"] = 0
    if verbs and qps > 1:
        settings["NCCL_IB_QPS_PER_CONNECTION"] = qps
    if verbs and gdr:
        settings["NCCL_NET_GDR_LEVEL"] = gdr
    if topology:
        settings["NCCL_TOPO_FILE"] = variables["nccl_topology_path"]
    settings.update(variables.get("nccl_conf_overrides") or {})
    return {key: value for key, value in settings.items() if value is not None}


NCCL_CONF_HEADER = (
    "# Managed by Ansible (role nccl): local changes are overwritten.\n"
    "# NCCL defaults for every job on this node; a job's own environment overrides them.\n"
)


def nccl_conf(variables: Mapping[str, Any]) -> str:
    """The exact text of /etc/nccl.conf (roles/nccl/templates/nccl.conf.j2)."""
    settings = nccl_settings(variables)
    # Jinja's dictsort compares keys without case.
    lines = [f"{key}={_nccl_value(settings[key])}\n" for key in sorted(settings, key=str.lower)]
    return NCCL_CONF_HEADER + "".join(lines)


# --- per pool ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Context:
    spec: Cluster
    catalog: Catalog
    plan: Plan
    pool: Pool
    profile: Profile
    variables: Mapping[str, Any]

    @property
    def p(self) -> str:
        return f"profiles.{self.pool.profile}"


def _common(c: _Context) -> list[Expectation]:
    v = c.variables
    every = "pools (every node)"
    hosts = hosts_block(v.get("common_hosts") or [])
    out = [
        Expectation(
            "hosts.file",
            hosts,
            "pools, network.addressing.management",
            bringup_fix("common", "the cluster's hosts block in /etc/hosts is incomplete"),
        )
        if hosts.entries
        else skip("hosts.file", "pools", "the inventory lists no cluster hosts"),
    ]
    sync = v.get("common_time_sync", "chrony")
    unit = {"chrony": "chrony", "timesyncd": "systemd-timesyncd"}.get(sync)
    if unit is None:
        out.append(skip("time.sync", every, "common_time_sync is none: time is left alone"))
        out.append(skip("time.synchronised", every, "common_time_sync is none"))
    else:
        out.append(
            Expectation(
                "time.sync",
                unit,
                every,
                bringup_fix("common", f"start {unit}: systemctl enable --now {unit}"),
            )
        )
        if c.spec.provider.kind == "local":
            out.append(
                skip(
                    "time.synchronised",
                    "provider.kind",
                    "local containers run on the host's clock; chronyd only tracks it",
                )
            )
        else:
            out.append(
                Expectation(
                    "time.synchronised",
                    True,
                    every,
                    "check the NTP sources answer: chronyc sources -v (common_time_servers)",
                )
            )
    memlock = str(v.get("common_limits_memlock", "unlimited"))
    out.append(
        Expectation(
            "limits.memlock",
            memlock,
            every,
            bringup_fix("common", "RDMA registers memory and needs memlock unlimited"),
        )
    )
    out.append(
        Expectation(
            "limits.memlock-session",
            SessionLimit(memlock, container=c.spec.provider.kind == "local"),
            every,
            bringup_fix("common", "log in afresh after fixing limits.d"),
        )
    )
    return out


def _gpu(c: _Context) -> list[Expectation]:
    p, v = c.p, c.variables
    gpu_checks = (
        "gpu.count",
        "gpu.model",
        "gpu.memory",
        "gpu.driver",
        "gpu.persistence",
        "gpu.health",
        "gpu.fabricmanager",
        "gpu.nvlink",
        "gpu.pcie",
        "gpudirect.peermem",
    )
    if c.profile.gpu is None:
        reason = f"profile {c.pool.profile} has no GPUs"
        return [skip(check, f"{p}.gpu", reason) for check in gpu_checks]
    gpu = c.profile.gpu
    model = c.catalog.gpus[gpu.model]
    driver_fix = bringup_fix("nvidia_driver")
    out = [
        Expectation(
            "gpu.count",
            gpu.count,
            f"{p}.gpu.count",
            "check `nvidia-smi -L` and `lspci -d 10de:` for a GPU that fell off the bus; "
            "reseat or replace it, or " + driver_fix,
        ),
        Expectation(
            "gpu.model",
            GpuModelExpect(gpu.model, gpu.model.split("-")[0].lower(), model.form_factor == "pcie"),
            f"{p}.gpu.model",
            f"the node has other GPUs than the spec says: correct {p}.gpu.model or the pool",
        ),
        Expectation(
            "gpu.memory",
            model.memory_gb,
            f"{p}.gpu.model",
            "a GPU reports less memory than its model has: check ECC/row remapping, replace it",
        ),
    ]
    driver = c.spec.software.nvidia_driver
    if driver is None:
        out.append(skip("gpu.driver", "software.nvidia_driver", "no driver version in the spec"))
    else:
        branch = str(v.get("nvidia_driver_branch") or driver.split(".")[0])
        version = v.get("nvidia_driver_version") or None
        out.append(
            Expectation(
                "gpu.driver",
                Driver(branch, version),
                "software.nvidia_driver",
                bringup_fix("nvidia_driver", "install the spec's driver, then reboot"),
            )
        )
    if v.get("nvidia_driver_persistenced", True):
        out.append(
            Expectation(
                "gpu.persistence",
                True,
                f"{p}.gpu",
                bringup_fix("nvidia_driver", "systemctl enable --now nvidia-persistenced"),
            )
        )
    else:
        out.append(skip("gpu.persistence", f"{p}.gpu", "nvidia_driver_persistenced is off"))
    out.append(
        Expectation(
            "gpu.health",
            True,
            f"{p}.gpu",
            "drain {node}, reset the GPU (nvidia-smi -r -i N) or reboot to apply pending "
            "remaps; replace a GPU whose remapping failed",
        )
    )
    if c.profile.nvswitch > 0:
        out.append(
            Expectation(
                "gpu.fabricmanager",
                "nvidia-fabricmanager",
                f"{p}.nvswitch",
                bringup_fix("nvidia_driver", "systemctl enable --now nvidia-fabricmanager"),
            )
        )
    else:
        out.append(
            skip("gpu.fabricmanager", f"{p}.nvswitch", "no NVSwitch: no Fabric Manager needed")
        )
    # PCIe cards are bridged in pairs at most; links of SXM parts and NVSwitch systems are
    # what all_reduce rides on, so those are the ones a down link slows.
    if model.nvlink_links > 0 and (model.form_factor != "pcie" or c.profile.nvswitch > 0):
        out.append(
            Expectation(
                "gpu.nvlink",
                model.nvlink_links,
                f"{p}.gpu.model",
                "a GPU has NVLink links down: reset the GPU or the baseboard, replace if it stays",
            )
        )
    else:
        out.append(skip("gpu.nvlink", f"{p}.gpu.model", f"{gpu.model} has no NVLink fabric"))
    out.append(
        Expectation(
            "gpu.pcie",
            Link(min(model.pcie_gen, c.profile.pcie.gen), min(model.pcie_lanes, 16)),
            f"{p}.pcie.gen",
            "a GPU trained below its slot's link: reseat it, check the riser and BIOS settings",
        )
    )
    if v.get("nvidia_driver_gpudirect_rdma"):
        out.append(
            Expectation(
                "gpudirect.peermem",
                "nvidia_peermem",
                "software.gpudirect_rdma",
                bringup_fix("nvidia_driver", "modprobe nvidia_peermem"),
            )
        )
    else:
        out.append(
            skip(
                "gpudirect.peermem",
                "software.gpudirect_rdma",
                "GPUDirect RDMA is off or the fabric has no RDMA",
            )
        )
    return out


def _nic_link(c: _Context, group_name: str, port_list: Sequence[Port]) -> list[tuple[str, Link]]:
    group = getattr(c.profile.nics, group_name)
    nic = c.catalog.nics[group.model]
    if not nic.rdma:
        return []
    gen = min(group.slot_gen or c.profile.pcie.gen, nic.pcie_gen)
    link = Link(gen, min(group.slot_lanes, nic.pcie_lanes))
    return [(port.device, link) for port in port_list]


def _fabric(c: _Context) -> list[Expectation]:
    p, fabric = c.p, c.spec.network.fabric
    compute = ports(c.profile, c.catalog, "compute", fabric)
    storage = ports(c.profile, c.catalog, "storage", fabric)
    field = f"{p}.nics.compute"
    out: list[Expectation] = []
    hca_checks = ("hca.present", "hca.state", "hca.rate", "hca.link-layer")
    if not compute:
        reason = f"profile {c.pool.profile} has no compute NICs"
        out += [skip(check, field, reason) for check in hca_checks]
    elif fabric == "ethernet":
        reason = "fabric is ethernet: no RDMA"
        out += [skip(check, "network.fabric", reason) for check in hca_checks]
    else:
        devices = tuple(port.device for port in compute)
        fix = bringup_fix("rdma", "load the HCA drivers")
        link_fix = "check the cable, transceiver and switch port; `ibstat` shows the port state"
        out += [
            Expectation("hca.present", devices, field, fix),
            Expectation("hca.state", devices, field, link_fix),
            Expectation(
                "hca.rate", Each(devices, compute[0].speed_gbps), f"{field}.model", link_fix
            ),
            Expectation(
                "hca.link-layer",
                Each(devices, "InfiniBand" if fabric == "infiniband" else "Ethernet"),
                "network.fabric",
                "set the port's link type: mlxconfig -d <dev> set LINK_TYPE_P1=1 (IB) / 2 (ETH)",
            ),
        ]
    links = []
    if compute:
        links += _nic_link(c, "compute", compute)
    if storage:
        links += _nic_link(c, "storage", storage)
    if links and c.spec.provider.kind == "aws":
        out.append(skip("nic.pcie", "provider.kind", "cloud NICs are virtual functions, not slots"))
    elif links:
        out.append(
            Expectation(
                "nic.pcie",
                DeviceLinks(tuple(links)),
                f"{p}.nics.*.slot_gen, slot_lanes",
                "a NIC trained below its slot's link: reseat it, check the slot and BIOS",
            )
        )
    else:
        out.append(skip("nic.pcie", f"{p}.nics", "no RDMA NICs to locate on the PCIe bus"))
    out += _roce(c)
    out += _bond(c, storage)
    return out


def _roce(c: _Context) -> list[Expectation]:
    v = c.variables
    nics = v.get("roce_nics") or []
    roce_checks = ("roce.trust", "roce.pfc", "roce.dscp", "roce.mtu")
    if c.spec.network.fabric != "roce":
        return [skip(check, "network.fabric", "fabric is not RoCE") for check in roce_checks]
    if not nics:
        reason = f"profile {c.pool.profile} has no RoCE NICs"
        return [skip(check, f"{c.p}.nics.compute", reason) for check in roce_checks]
    netdevs = tuple(nic["netdev"] for nic in nics)
    fix = bringup_fix("roce", "or restart myriad-roce-qos.service")
    mtu = int(v.get("roce_mtu", 9000))
    return [
        Expectation("roce.trust", Each(netdevs, "dscp"), "network.roce", fix),
        Expectation(
            "roce.pfc", Each(netdevs, int(v["roce_priority"])), "network.roce.pfc_priority", fix
        ),
        Expectation(
            "roce.dscp",
            Each(
                netdevs,
                (
                    (int(v["roce_dscp"]), int(v["roce_priority"])),
                    (int(v["roce_cnp_dscp"]), int(v["roce_cnp_priority"])),
                ),
            ),
            "network.roce.dscp, cnp_dscp",
            fix,
        ),
        (
            Expectation("roce.mtu", Each(netdevs, mtu), "network.roce.mtu", fix)
            if mtu
            else skip("roce.mtu", "network.roce.mtu", "roce_mtu 0 leaves the MTU alone")
        ),
    ]


def _bond(c: _Context, storage: Sequence[Port]) -> list[Expectation]:
    v = c.variables
    field = f"{c.p}.nics.storage.bond"
    bond_checks = ("bond.mode", "bond.slaves", "bond.speed", "bond.mtu")
    interfaces = v.get("storage_net_bond_interfaces") or []
    if not interfaces or not storage:
        reason = f"profile {c.pool.profile} has no bonded storage NICs"
        return [skip(check, field, reason) for check in bond_checks]
    bond = BondExpect(
        name=str(v.get("storage_net_bond_name", "bond0")),
        mode=str(v.get("storage_net_bond_mode", "802.3ad")),
        slaves=tuple(interfaces),
        speed_mbps=storage[0].speed_gbps * 1000,
        mtu=int(v.get("storage_net_mtu", 9000)),
    )
    fix = bringup_fix("storage_net")
    cable = "check the cables and the switch's port-channel (LACP) for the down members"
    return [
        Expectation("bond.mode", bond, field, fix),
        Expectation("bond.slaves", bond, f"{c.p}.nics.storage", cable),
        Expectation("bond.speed", bond, f"{c.p}.nics.storage.model", cable),
        Expectation("bond.mtu", bond, field, fix),
    ]


_FSTYPES = {
    "nfs": ("nfs", "nfs4"),
    "lustre": ("lustre",),
    "beegfs": ("beegfs",),
    "weka": ("wekafs",),
}


def _storage(c: _Context) -> list[Expectation]:
    storage = c.spec.storage
    if storage.kind == "none":
        return [skip("storage.mount", "storage.kind", "storage.kind is none")]
    source = None
    if storage.kind == "nfs":
        source = f"{storage.server}:{storage.export}"
    elif storage.kind == "lustre":
        source = f"{storage.server}:/{storage.export}"
    expect = MountExpect(storage.mount, storage.kind, _FSTYPES[storage.kind], source)
    return [
        Expectation(
            "storage.mount",
            expect,
            "storage.mount, storage.server, storage.export",
            bringup_fix("storage_net", f"mount {storage.mount}"),
        )
    ]


def _runtime(c: _Context) -> list[Expectation]:
    v = c.variables
    if c.pool.role == "storage":
        reason = "the container runtime role runs on compute, login and controller nodes"
        return [
            skip("runtime.engine", "software.container_runtime", reason),
            skip("runtime.nvidia", "software.container_runtime", reason),
        ]
    engine = str(v.get("container_runtime_engine", c.spec.software.container_runtime))
    if engine == "none":
        return [
            skip("runtime.engine", "software.container_runtime", "container_runtime_engine none"),
            skip("runtime.nvidia", "software.container_runtime", "container_runtime_engine none"),
        ]
    out = [
        Expectation(
            "runtime.engine",
            engine,
            "software.container_runtime",
            bringup_fix("container_runtime", f"systemctl enable --now {engine}"),
        )
    ]
    if v.get("container_runtime_nvidia_enabled") and c.profile.gpu is not None:
        out.append(
            Expectation(
                "runtime.nvidia",
                NvidiaRuntime(engine, bool(v.get("container_runtime_nvidia_default_runtime"))),
                f"software.container_runtime, {c.p}.gpu",
                bringup_fix("container_runtime", "the nvidia runtime is missing"),
            )
        )
    else:
        out.append(skip("runtime.nvidia", f"{c.p}.gpu", f"profile {c.pool.profile} has no GPUs"))
    return out


def _nccl(c: _Context) -> list[Expectation]:
    if c.pool.role != "compute":
        return [skip("nccl.conf", "network.fabric", "the nccl role configures compute nodes only")]
    return [
        Expectation(
            "nccl.conf",
            nccl_conf(c.variables),
            f"network.fabric, network.topology.kind, {c.p}.nics.compute, software.nccl",
            bringup_fix("nccl"),
        )
    ]


def _slurm(c: _Context, controller: bool, node_set: Mapping[str, Any] | None) -> list[Expectation]:
    """What the slurm role gives a node: slurmctld where it is a controller, slurmd where it
    is in a node set (the role decides from the same data), munge on both."""
    field = "software.orchestrator"
    checks = ("slurm.munge", "slurm.slurmd", "slurm.slurmctld", "slurm.node-state", "slurm.gres")
    if c.spec.software.orchestrator != "slurm":
        return [skip(check, field, "the orchestrator is kubernetes") for check in checks]
    if c.pool.role == "storage":
        reason = "the slurm role runs on controller, login and compute nodes"
        return [skip(check, field, reason) for check in checks]
    out = [Expectation("slurm.munge", "munge", field, bringup_fix("slurm", "restart munge"))]
    if node_set is not None:
        out.append(
            Expectation("slurm.slurmd", "slurmd", field, bringup_fix("slurm", "restart slurmd"))
        )
    else:
        out.append(skip("slurm.slurmd", field, "not a Slurm compute node"))
    if controller:
        out.append(
            Expectation(
                "slurm.slurmctld", "slurmctld", field, bringup_fix("slurm", "restart slurmctld")
            )
        )
    else:
        out.append(skip("slurm.slurmctld", field, "not a Slurm controller"))
    if node_set is None:
        out.append(skip("slurm.node-state", field, "not a Slurm compute node"))
        out.append(skip("slurm.gres", field, "not a Slurm compute node"))
        return out
    out.append(
        Expectation(
            "slurm.node-state",
            SLURM_GOOD_STATES,
            f"pools.{c.pool.name}",
            "see `scontrol show node {node}` (Reason=); after fixing: "
            "scontrol update nodename={node} state=resume",
        )
    )
    gres = tuple(
        GresExpect(str(g["name"]), g.get("type"), int(g["count"])) for g in node_set.get("gres", [])
    )
    if gres:
        out.append(
            Expectation(
                "slurm.gres",
                gres,
                f"{c.p}.gpu",
                bringup_fix("slurm", "slurm.conf and gres.conf must match the GPUs")
                + "; then scontrol reconfigure",
            )
        )
    else:
        out.append(skip("slurm.gres", f"{c.p}.gpu", f"profile {c.pool.profile} has no GPUs"))
    return out


def _slurm_node_set(variables: Mapping[str, Any], node: str) -> Mapping[str, Any] | None:
    node_sets: list[Mapping[str, Any]] = variables.get("slurm_nodes") or []
    for node_set in node_sets:
        if node in node_set.get("names", []):
            return node_set
    return None


def _kubernetes(c: _Context) -> list[Expectation]:
    field = "software.orchestrator"
    checks = ("k8s.kubelet", "k8s.node-ready", "k8s.gpu-allocatable")
    if c.spec.software.orchestrator != "kubernetes":
        return [skip(check, field, "the orchestrator is slurm") for check in checks]
    if c.pool.role not in ("controller", "compute"):
        reason = "the kubernetes role runs on controller and compute nodes"
        return [skip(check, field, reason) for check in checks]
    fix = bringup_fix("kubernetes", "systemctl restart kubelet")
    out = [
        Expectation("k8s.kubelet", "kubelet", field, fix),
        Expectation("k8s.node-ready", True, f"pools.{c.pool.name}", fix),
    ]
    gpus = int(c.variables.get("kubernetes_node_gpu_count") or 0)
    if gpus:
        out.append(
            Expectation(
                "k8s.gpu-allocatable",
                gpus,
                f"{c.p}.gpu.count",
                "check the NVIDIA device plugin pod on {node} (kubectl -n kube-system logs) "
                "or the GPU Operator; " + bringup_fix("kubernetes"),
            )
        )
    else:
        out.append(skip("k8s.gpu-allocatable", f"{c.p}.gpu", "no GPUs in the profile"))
    return out


def _pool_expectations(c: _Context) -> tuple[Expectation, ...]:
    return tuple(
        _common(c) + _gpu(c) + _fabric(c) + _storage(c) + _runtime(c) + _nccl(c) + _kubernetes(c)
    )


# --- per node ------------------------------------------------------------------------------


def _per_node(
    spec: Cluster, variables: Mapping[str, Any], node: str, pool: Pool, switch: str | None
) -> tuple[Expectation, ...]:
    own = [
        Expectation(
            "host.name", node, f"pools.{pool.name}", bringup_fix("common", f"hostname {node}")
        )
    ]
    if spec.software.orchestrator != "slurm" or _slurm_node_set(variables, node) is None:
        own.append(skip("slurm.topology", "network.topology", "not a Slurm compute node"))
    elif variables.get("slurm_topology_plugin", "topology/tree") != "topology/tree":
        own.append(skip("slurm.topology", "network.topology", "Slurm topology/tree is off"))
    elif switch is None:
        own.append(skip("slurm.topology", "network.topology", "the plan places no switch here"))
    else:
        own.append(
            Expectation(
                "slurm.topology",
                switch,
                "network.topology",
                bringup_fix("slurm", "topology.conf is stale") + "; then scontrol reconfigure",
            )
        )
    return tuple(own)


def _switch_of(variables: Mapping[str, Any]) -> dict[str, str]:
    leaf: dict[str, str] = {}
    for switch in variables.get("slurm_topology_switches") or []:
        for member in switch.get("nodes") or []:
            leaf[member] = switch["name"]
    return leaf


def _group_scopes(inventory: Inventory) -> dict[str, list[str]]:
    """Node → the groups with variables it belongs to, most specific (alphabetically last,
    as Ansible merges groups of one depth) first; `all` is added by the caller."""
    member: dict[str, list[str]] = {}
    for group in sorted(inventory.group_vars, reverse=True):
        if group == "all":
            continue
        for host in inventory.groups.get(group, ()):
            member.setdefault(host, []).append(group)
    return member


def node_variables(
    inventory: Inventory, node: str, defaults: Mapping[str, Any]
) -> Mapping[str, Any]:
    """A node's variables as Ansible merges inventory ones: host, groups, all, role defaults."""
    scopes = _group_scopes(inventory).get(node, [])
    return ChainMap(
        dict(inventory.host_vars.get(node, {})),
        *(dict(inventory.group_vars[g]) for g in scopes),
        dict(inventory.group_vars.get("all", {})),
        dict(defaults),
    )


def expect(
    spec: Cluster,
    catalog: Catalog,
    plan: Plan,
    inventory: Inventory,
    defaults: Mapping[str, Any],
) -> ClusterExpectations:
    """Every node's expectations; linear in nodes, one computation per pool and node kind."""
    scopes = _group_scopes(inventory)
    all_vars = inventory.group_vars.get("all", {})
    switch_of = _switch_of(all_vars)
    controllers = tuple(entry["name"] for entry in all_vars.get("slurm_controllers") or [])
    node_sets = {
        name: index
        for index, node_set in enumerate(all_vars.get("slurm_nodes") or [])
        for name in node_set.get("names", [])
    }
    nodes: list[NodeExpectations] = []
    for pool in spec.pools:
        names = pool.hostnames()
        group_vars = ChainMap(
            *(dict(inventory.group_vars[g]) for g in scopes.get(names[0], [])),
            dict(all_vars),
            dict(defaults),
        )
        context = _Context(spec, catalog, plan, pool, spec.profiles[pool.profile], group_vars)
        shared = _pool_expectations(context)
        slurm: dict[tuple[bool, int | None], tuple[Expectation, ...]] = {}
        for name in names:
            kind = (name in controllers, node_sets.get(name))
            if kind not in slurm:
                node_set = None if kind[1] is None else all_vars["slurm_nodes"][kind[1]]
                slurm[kind] = shared + tuple(_slurm(context, kind[0], node_set))
            own = _per_node(spec, group_vars, name, pool, switch_of.get(name))
            nodes.append(
                NodeExpectations(name, pool.name, pool.profile, pool.role, slurm[kind], own)
            )
    return ClusterExpectations(
        cluster=spec.metadata.name,
        provider=spec.provider.kind,
        orchestrator=spec.software.orchestrator,
        nodes=tuple(nodes),
        controllers=controllers or tuple(inventory.groups.get("controller", ())),
    )
