"""Hardware-selection lints: the rules an experienced cluster builder applies before buying.

Each lint is a pure function of the loaded spec and its plan that yields findings with an
id, a severity, the numbers behind it and a suggestion. A finding names the spec path it
comes from, so the report can point at `file:line`.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from myriad.errors import AddressError, Path, format_path
from myriad.plan.addresses import FIRST_HOST_OFFSET, rail_addresses
from myriad.plan.bandwidth import pcie_slot_gbs
from myriad.plan.fabric import fabric_limits, rail_leaves, two_tier_capacity
from myriad.plan.model import NvlinkDomains, Plan
from myriad.plan.nodes import iter_nodes
from myriad.plan.nvlink import rack_system_of
from myriad.spec.catalog_models import NicModel
from myriad.spec.loader import LoadedSpec
from myriad.spec.models import NicGroup, Profile
from myriad.spec.os_table import os_table

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[Severity, int] = {"error": 0, "warning": 1, "info": 2}

# REFERENCE.md: air cooling is commonly limited to roughly 30-40 kW per rack.
AIR_COOLED_RACK_KW = 40.0
# Data loaders, NCCL proxy threads and the launcher each want host cores per GPU.
MIN_CORES_PER_GPU = 8
# Checkpoint staging and pinned buffers: host memory of at least the GPUs' memory, ideally 2x.
HOST_MEMORY_RATIO_WARN = 1.0
HOST_MEMORY_RATIO_GOOD = 2.0
# A checkpoint draining to storage for more than this share of its interval competes with
# the next one and with data loading.
DRAIN_SHARE_WARN = 0.25
# Addresses a subnet loses to network, broadcast and gateway.
RESERVED_ADDRESSES = 3
# Slurm's topology plugin for NVLink domains (topology.conf(5), new in 23.11).
BLOCK_PLUGIN = "topology/block"


@dataclass(frozen=True, slots=True)
class Finding:
    id: str
    severity: Severity
    message: str
    suggestion: str
    path: Path = ()
    numbers: dict[str, float | int | str] = field(default_factory=dict)
    # The spec's reason when its lints.accept names this rule (warnings and notes only).
    accepted: str | None = None

    def location(self, loaded: LoadedSpec) -> str:
        mark = loaded.source.mark_for(self.path)
        return f"{loaded.source.file}:{mark.line}:{mark.column}"

    def to_dict(self, loaded: LoadedSpec) -> dict[str, object]:
        return {
            "id": self.id,
            "severity": self.severity,
            "message": self.message,
            "suggestion": self.suggestion,
            "path": format_path(self.path),
            "location": self.location(loaded),
            "numbers": self.numbers,
            "accepted": self.accepted,
        }


Lint = Callable[[LoadedSpec, Plan], Iterator[Finding]]


def _nic_groups(profile: Profile) -> Iterator[tuple[str, NicGroup]]:
    for purpose in ("compute", "storage", "management"):
        group = getattr(profile.nics, purpose)
        if group is not None:
            yield purpose, group


def _line_gbs(nic: NicModel) -> float:
    return nic.speed_gbps * nic.ports / 8


def nic_faster_than_slot(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    for name, profile in loaded.spec.profiles.items():
        for purpose, group in _nic_groups(profile):
            nic = loaded.catalog.nics[group.model]
            slot_gen = group.slot_gen or profile.pcie.gen
            gen = min(slot_gen, nic.pcie_gen)
            lanes = min(group.slot_lanes, nic.pcie_lanes)
            slot = pcie_slot_gbs(gen, lanes)
            line = _line_gbs(nic)
            if line <= slot:
                continue
            yield Finding(
                id="nic-pcie-bottleneck",
                severity="warning",
                message=(
                    f"{group.model} ({nic.speed_gbps * nic.ports} Gb/s = {line:.1f} GB/s) in a "
                    f"PCIe Gen{gen} x{lanes} slot, which carries {slot:.1f} GB/s: each "
                    f"{purpose} NIC runs at {slot / line:.0%} of its line rate"
                ),
                suggestion=(
                    f"use PCIe Gen{nic.pcie_gen} hosts for this NIC, or a NIC of at most "
                    f"{int(slot * 8 // 100 * 100)} Gb/s"
                ),
                path=("profiles", name, "nics", purpose),
                numbers={"nic_gbs": line, "slot_gbs": slot, "pcie_gen": gen, "lanes": lanes},
            )


def nics_per_gpu(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    compute_profiles = {p.profile for p in loaded.spec.pools if p.role == "compute"}
    for name in sorted(compute_profiles):
        profile = loaded.spec.profiles[name]
        if profile.gpu is None or profile.gpu.count < 2:
            continue
        gpus = profile.gpu.count
        group = profile.nics.compute
        if group is None:
            yield Finding(
                id="nics-per-gpu",
                severity="warning",
                message=f"{gpus}-GPU nodes have no compute NICs: traffic between nodes uses TCP",
                suggestion=f"add nics.compute with one RDMA NIC per GPU ({gpus}) or per pair",
                path=("profiles", name, "nics"),
                numbers={"gpus": gpus, "compute_nics": 0},
            )
            continue
        if gpus / group.count > 2:
            yield Finding(
                id="nics-per-gpu",
                severity="warning",
                message=(
                    f"{gpus} GPUs share {group.count} compute NICs ({gpus / group.count:g} GPUs "
                    "per NIC): inter-node all-reduce is capped well below NVLink speed"
                ),
                suggestion=f"use {gpus} (one per GPU) or {gpus // 2} (one per GPU pair) NICs",
                path=("profiles", name, "nics", "compute", "count"),
                numbers={"gpus": gpus, "compute_nics": group.count},
            )


def gpu_nic_placement(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    rail = loaded.spec.network.topology.kind == "rail-optimized"
    for name, profile in loaded.spec.profiles.items():
        group = profile.nics.compute
        if profile.gpu is None or group is None or profile.gpu.count < 2:
            continue
        if rack_system_of(profile, loaded.catalog) is not None:
            # A Grace Blackwell tray's GPUs reach their Grace CPU over NVLink-C2C, not PCIe:
            # the NICs hang off Grace's root ports by design, with no PCIe switch to share.
            continue
        switches = profile.pcie.switches
        if switches == 0:
            yield Finding(
                id="gpu-nic-placement",
                severity="warning" if rail else "info",
                message=(
                    "no PCIe switches: GPU-to-NIC traffic crosses the CPU root complex, so "
                    "GPUDirect RDMA runs at PHB/SYS distance"
                ),
                suggestion="pick a layout with PCIe switches pairing each NIC with its GPUs",
                path=("profiles", name, "pcie", "switches"),
                numbers={"pcie_switches": 0},
            )
            continue
        if profile.gpu.count % switches or group.count % switches:
            yield Finding(
                id="gpu-nic-placement",
                severity="warning",
                message=(
                    f"{profile.gpu.count} GPUs and {group.count} compute NICs do not split evenly "
                    f"over {switches} PCIe switches: some GPUs reach their NIC through the CPU"
                ),
                suggestion=(
                    f"use a multiple of {switches} NICs so each switch holds its GPUs' NIC"
                ),
                path=("profiles", name, "pcie", "switches"),
                numbers={
                    "gpus": profile.gpu.count,
                    "compute_nics": group.count,
                    "pcie_switches": switches,
                },
            )


def host_resources(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    for name, profile in loaded.spec.profiles.items():
        if profile.gpu is None:
            continue
        gpu = loaded.catalog.gpus[profile.gpu.model]
        gpu_memory_gib = gpu.memory_gb * profile.gpu.count * 1e9 / 2**30
        ratio = profile.memory_gib / gpu_memory_gib
        if ratio < HOST_MEMORY_RATIO_GOOD:
            yield Finding(
                id="host-memory",
                severity="warning" if ratio < HOST_MEMORY_RATIO_WARN else "info",
                message=(
                    f"{profile.memory_gib} GiB host memory for {gpu_memory_gib:.0f} GiB of GPU "
                    f"memory ({ratio:.2f}x): checkpoint staging and pinned buffers need room"
                ),
                suggestion=(
                    f"plan at least {math.ceil(gpu_memory_gib * HOST_MEMORY_RATIO_GOOD)} GiB "
                    "(2x the GPU memory)"
                ),
                path=("profiles", name, "memory_gib"),
                numbers={"host_gib": profile.memory_gib, "gpu_gib": round(gpu_memory_gib, 1)},
            )
        per_gpu = profile.cpu.cores / profile.gpu.count
        if per_gpu < MIN_CORES_PER_GPU:
            yield Finding(
                id="cpu-cores-per-gpu",
                severity="warning",
                message=(
                    f"{profile.cpu.cores} CPU cores for {profile.gpu.count} GPUs "
                    f"({per_gpu:g} per GPU): data loading will starve the GPUs"
                ),
                suggestion=f"plan at least {MIN_CORES_PER_GPU} cores per GPU",
                path=("profiles", name, "cpu"),
                numbers={"cores": profile.cpu.cores, "gpus": profile.gpu.count},
            )


def rack_power(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    facility = loaded.spec.facility
    racks = {d.pool: d for d in plan.nvlink if d.system is not None}
    for pool in plan.pools:
        index = next(i for i, p in enumerate(loaded.spec.pools) if p.name == pool.name)
        domains = racks.get(pool.name)
        if domains is not None:
            yield from _rack_system_fit(loaded, domains, index)
            continue
        if pool.server_kw > facility.rack_kw:
            yield Finding(
                id="rack-power",
                severity="error",
                message=(
                    f"one {pool.profile} server draws {pool.server_kw:g} kW, more than the "
                    f"{facility.rack_kw:g} kW a rack may draw"
                ),
                suggestion="raise facility.rack_kw (with liquid cooling) or pick smaller servers",
                path=("pools", index, "profile"),
                numbers={"server_kw": pool.server_kw, "rack_kw": facility.rack_kw},
            )
    yield from _tor_rack_fit(loaded, plan)
    if facility.cooling == "air" and facility.rack_kw > AIR_COOLED_RACK_KW:
        yield Finding(
            id="rack-cooling",
            severity="warning",
            message=(
                f"{facility.rack_kw:g} kW per rack with air cooling: air is commonly limited "
                f"to {AIR_COOLED_RACK_KW:g} kW per rack"
            ),
            suggestion="use liquid cooling (rear-door or direct-to-chip), or lower rack_kw",
            path=("facility", "rack_kw"),
            numbers={"rack_kw": facility.rack_kw, "air_limit_kw": AIR_COOLED_RACK_KW},
        )


def _tor_rack_fit(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    """A ToR rack holds leaf_nodes servers and their leaves: both must fit its budgets."""
    facility = loaded.spec.facility
    for fill in plan.power.rack_fills:
        if not fill.tor_leaves:
            continue
        units = fill.per_rack * fill.units_each + fill.tor_units
        kw = fill.per_rack * fill.kw_each + fill.tor_kw
        what = (
            f"a rack of {fill.per_rack} {fill.profile} servers and {fill.tor_leaves} leaf "
            f"switch{'es' if fill.tor_leaves != 1 else ''} (network.topology.leaf_nodes)"
        )
        if units > facility.rack_units:
            yield Finding(
                id="rack-tor",
                severity="error",
                message=f"{what} takes {units} U, more than the {facility.rack_units} U of a "
                "rack (facility.rack_units)",
                suggestion="lower leaf_nodes, or raise facility.rack_units if the racks are taller",
                path=("network", "topology", "leaf_nodes"),
                numbers={"units": units, "rack_units": facility.rack_units},
            )
        if kw > facility.rack_kw + 1e-9:
            yield Finding(
                id="rack-tor",
                severity="error",
                message=f"{what} draws {kw:g} kW, more than the {facility.rack_kw:g} kW a rack "
                "may draw (facility.rack_kw)",
                suggestion="lower leaf_nodes, or raise facility.rack_kw with the cooling to "
                "carry it",
                path=("network", "topology", "leaf_nodes"),
                numbers={"rack_kw_needed": kw, "rack_kw": facility.rack_kw},
            )


def _rack_system_fit(loaded: LoadedSpec, domains: NvlinkDomains, index: int) -> Iterator[Finding]:
    """A rack-scale system comes whole: its power and cooling are the facility's to carry."""
    facility = loaded.spec.facility
    rack_kw = domains.rack_kw or 0.0
    what = (
        f"one {domains.system} rack ({domains.nodes_per_domain} compute trays, "
        f"{domains.switch_trays_per_domain} NVLink switch trays)"
    )
    if rack_kw > facility.rack_kw:
        yield Finding(
            id="rack-power",
            severity="error",
            message=f"{what} draws {rack_kw:g} kW, more than the {facility.rack_kw:g} kW a rack "
            "may draw (facility.rack_kw); its trays cannot be spread over more racks",
            suggestion=f"raise facility.rack_kw to at least {rack_kw:g} in a hall built for it, "
            "or plan servers that fit the racks you have",
            path=("pools", index, "profile"),
            numbers={"rack_system_kw": rack_kw, "rack_kw": facility.rack_kw},
        )
    if domains.cooling == "liquid" and facility.cooling != "liquid":
        yield Finding(
            id="rack-liquid-cooling",
            severity="error",
            message=f"{what} is liquid-cooled only and draws {rack_kw:g} kW; the facility "
            f"cools racks with {facility.cooling}",
            suggestion="set facility.cooling: liquid where the hall has direct-to-chip liquid "
            "cooling (coolant distribution units), or plan air-cooled servers",
            path=("facility", "cooling"),
            numbers={"rack_system_kw": rack_kw},
        )
    if domains.partial_nodes:
        full = domains.domains - 1
        pool = loaded.spec.pools[index]
        yield Finding(
            id="nvlink-domain-partial",
            severity="error",
            message=f"pool {pool.name} has {pool.count} {domains.system} compute trays: "
            f"{full} full rack(s) of {domains.nodes_per_domain} and {domains.partial_nodes} "
            f"in a rack short of {domains.nodes_per_domain - domains.partial_nodes}; a "
            f"{domains.system} is one NVLink domain of {domains.nodes_per_domain} trays, and "
            "Slurm's topology/block (23.11) refuses blocks of unequal size",
            suggestion=f"make count a multiple of {domains.nodes_per_domain}: "
            f"{full * domains.nodes_per_domain} or {(full + 1) * domains.nodes_per_domain}",
            path=("pools", index, "count"),
            numbers={"trays": pool.count, "trays_per_rack": domains.nodes_per_domain},
        )


def facility_power(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    limit = loaded.spec.facility.power_limit_mw
    if limit is not None and plan.power.facility_kw > limit * 1000:
        yield Finding(
            id="facility-power",
            severity="error",
            message=(
                f"the cluster needs {plan.power.facility_kw / 1000:.2f} MW at the facility "
                f"(IT {plan.power.it_kw / 1000:.2f} MW x PUE), more than the {limit:g} MW available"
            ),
            suggestion="fewer nodes, a lower PUE, or more facility power",
            path=("facility", "power_limit_mw"),
            numbers={"facility_mw": round(plan.power.facility_kw / 1000, 3), "limit_mw": limit},
        )


def fabric_shape(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    """Where the fabric counted by ports is not a real non-blocking Clos inside islands."""
    for limit in fabric_limits(loaded.spec, loaded.catalog):
        yield Finding(
            id=f"fabric-{limit.what}",
            severity="error",
            message=limit.message,
            suggestion=limit.suggestion,
            path=("network", "topology", "island_nodes"),
            numbers={"needed": limit.needed, "available": limit.available},
        )


def fabric_fit(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    spec, fabric = loaded.spec, plan.fabric
    if fabric is None:
        return
    topology_path: Path = ("network", "topology")
    k = fabric.radix
    spine_ports = loaded.catalog.switches[fabric.spine_model].ports
    two_tier = two_tier_capacity(k, spine_ports, fabric.leaf_downlinks)
    island_endpoints = fabric.island_nodes * fabric.rails
    if len(fabric.islands) == 1 and island_endpoints > two_tier:
        switches = (
            f"{k}-port switches"
            if spine_ports <= k
            else f"{k}-port leaves under {spine_ports}-port spines"
        )
        yield Finding(
            id="island-radix",
            severity="info",
            message=(
                f"{island_endpoints} endpoints exceed the {two_tier} a two-tier fat-tree of "
                f"{switches} reaches: the fabric needs three tiers"
            ),
            suggestion=f"islands of at most {two_tier // fabric.rails} nodes stay two-tier",
            path=(*topology_path, "island_nodes"),
            numbers={"island_endpoints": island_endpoints, "max_two_tier": two_tier},
        )
    leaf = loaded.catalog.switches[spec.network.topology.switch]
    wants = "infiniband" if spec.network.fabric == "infiniband" else "ethernet"
    if leaf.kind != wants:
        yield Finding(
            id="fabric-switch-kind",
            severity="error",
            message=f"{spec.network.topology.switch} is an {leaf.kind} switch; the fabric is "
            f"{spec.network.fabric}",
            suggestion=f"pick an {wants} switch from the catalog",
            path=(*topology_path, "switch"),
        )
    for name, profile in spec.profiles.items():
        group = profile.nics.compute
        if group is None:
            continue
        nic = loaded.catalog.nics[group.model]
        if wants not in nic.link_layers:
            yield Finding(
                id="fabric-nic-kind",
                severity="error",
                message=f"{group.model} speaks {', '.join(nic.link_layers)}; the fabric is "
                f"{spec.network.fabric}",
                suggestion="pick a compute NIC that supports the fabric's link layer",
                path=("profiles", name, "nics", "compute", "model"),
            )
        elif spec.network.fabric != "ethernet" and not nic.rdma:
            yield Finding(
                id="fabric-nic-kind",
                severity="error",
                message=f"{group.model} has no RDMA; {spec.network.fabric} needs it",
                suggestion="pick an RDMA-capable NIC (ConnectX family)",
                path=("profiles", name, "nics", "compute", "model"),
            )
        if nic.speed_gbps > leaf.port_speed_gbps:
            yield Finding(
                id="nic-switch-speed",
                severity="warning",
                message=f"{group.model} runs at {nic.speed_gbps} Gb/s but "
                f"{spec.network.topology.switch} ports at {leaf.port_speed_gbps} Gb/s",
                suggestion="pick a leaf switch whose ports match the NIC speed",
                path=(*topology_path, "switch"),
                numbers={"nic_gbps": nic.speed_gbps, "port_gbps": leaf.port_speed_gbps},
            )
        elif nic.speed_gbps < leaf.port_speed_gbps:
            yield Finding(
                id="nic-switch-speed",
                severity="info",
                message=f"{group.model} at {nic.speed_gbps} Gb/s on {leaf.port_speed_gbps} Gb/s "
                "ports leaves switch capacity idle",
                suggestion="use the switch's split-port entry (e.g. SN5600-400G) so each port "
                "serves several NICs",
                path=(*topology_path, "switch"),
                numbers={"nic_gbps": nic.speed_gbps, "port_gbps": leaf.port_speed_gbps},
            )


def addressing(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    spec = loaded.spec
    compute_ports = 0
    for pool in spec.pools:
        group = spec.profiles[pool.profile].nics.compute
        if group is not None:
            compute_ports += pool.count * group.count * loaded.catalog.nics[group.model].ports
    needs = {"management": plan.nodes, "storage": plan.nodes, "compute": compute_ports}
    for network_name, needed in needs.items():
        cidr = getattr(spec.network.addressing, network_name)
        if cidr is None or needed == 0:
            continue
        usable = ipaddress.ip_network(cidr).num_addresses - RESERVED_ADDRESSES
        if needed > usable:
            prefix = 32 - math.ceil(math.log2(needed + RESERVED_ADDRESSES))
            yield Finding(
                id="addressing",
                severity="error",
                message=f"the {network_name} network {cidr} has {max(usable, 0)} usable addresses "
                f"for {needed} interfaces",
                suggestion=f"use a /{prefix} or larger",
                path=("network", "addressing", network_name),
                numbers={"needed": needed, "usable": max(usable, 0)},
            )


def _nodes_at(
    loaded: LoadedSpec, plan: Plan, address: ipaddress.IPv4Address | ipaddress.IPv6Address
) -> Iterator[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network, int, str]]:
    """(network, its CIDR, node index, node name) where `address` is a node's own: render
    hands nodes the addresses from FIRST_HOST_OFFSET on, one per node in spec order."""
    spec = loaded.spec
    for network_name in ("storage", "management"):
        cidr = getattr(spec.network.addressing, network_name)
        if cidr is None or address not in (network := ipaddress.ip_network(cidr)):
            continue
        index = int(address) - int(network.network_address) - FIRST_HOST_OFFSET
        if 0 <= index < plan.nodes:
            node = next(n for i, n in enumerate(iter_nodes(spec)) if i == index)
            yield network_name, network, index, node.name


def storage_server_address(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    """The storage server must not sit on an address Myriad plans for a node's port."""
    spec = loaded.spec
    server = (spec.storage.server or "").split("@", 1)[0]  # Lustre NIDs: 10.32.0.2@tcp
    try:
        address = ipaddress.ip_address(server)
    except ValueError:
        return  # a host name: resolved at the site, nothing to compare here
    for network_name, network, index, node in _nodes_at(loaded, plan, address):
        free = network.network_address + 2
        yield Finding(
            id="storage-server-address",
            severity="error",
            message=f"storage.server {address} is {node}'s {network_name} address: node "
            f"addresses start at the {FIRST_HOST_OFFSET}th of {network}, one per node in spec "
            "order, so the node and the server would answer for the same address",
            suggestion=f"give the server an address below the nodes' range (for example "
            f"{free}), or one outside {network}",
            path=("storage", "server"),
            numbers={"node_index": index},
        )


def rail_addressing(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    """RoCEv2 needs an IPv4 address on every rail: its RDMA device gets a RoCEv2 GID from it."""
    spec = loaded.spec
    if spec.network.fabric != "roce":
        return
    rails, nodes = 0, 0
    for pool in spec.pools_with_role("compute"):
        group = spec.profiles[pool.profile].nics.compute
        if group is not None:
            rails = max(rails, group.count * loaded.catalog.nics[group.model].ports)
            nodes += pool.count
    if rails == 0:
        return
    cidr = spec.network.addressing.compute
    if cidr is None:
        yield Finding(
            id="rail-addresses",
            severity="error",
            message=f"the {rails} RoCE rails of each compute node get no IPv4 address, and RoCEv2 "
            "has no GID (and NCCL no path) on a rail without one",
            suggestion="set network.addressing.compute (for example 10.64.0.0/16); Myriad cuts it "
            "into one network per rail, and that into one subnet per leaf",
            path=("network", "addressing"),
            numbers={"rails": rails, "nodes": nodes},
        )
        return
    leaves = rail_leaves(plan.fabric) if plan.fabric is not None else None
    stretched = spec.network.addressing.rail_subnets == "stretched"
    try:
        rail_addresses(cidr, rails, nodes, None if stretched else leaves)
    except AddressError as exc:
        needs = (
            f"{nodes} node addresses after the first {FIRST_HOST_OFFSET}"
            if stretched or leaves is None
            else f"a subnet for each of its {leaves.per_rail} leaves"
        )
        yield Finding(
            id="rail-addresses",
            severity="error",
            message=str(exc),
            suggestion=f"each of the {rails} rail networks needs {needs}: use a larger "
            "network.addressing.compute",
            path=("network", "addressing", "compute"),
            numbers={"rails": rails, "nodes": nodes},
        )
    if stretched and leaves is not None:
        yield Finding(
            id="rail-subnets-stretched",
            severity="warning",
            message=f"each rail's subnet spans its {leaves.per_rail} leaves "
            "(network.addressing.rail_subnets: stretched): a host ARPs for peers behind other "
            "leaves, which answer only if the fabric carries the rail's L2 between leaves",
            suggestion="configure the switches to stretch each rail's L2 over its leaves "
            "(EVPN/VXLAN) or to answer ARP for the other leaves' hosts (proxy-ARP); or use "
            "rail_subnets: per-leaf (the default), a subnet per leaf with the leaf as gateway",
            path=("network", "addressing", "rail_subnets"),
            numbers={"leaves_per_rail": leaves.per_rail, "rails": rails},
        )


def storage_not_mounted(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    storage = loaded.spec.storage
    if storage.kind == "weka":
        yield Finding(
            id="storage-not-mounted",
            severity="warning",
            message=f"bring-up does not mount WEKA: its client is installed from the WEKA "
            f"cluster itself, so {storage.mount} is left to the site",
            suggestion="install the WEKA client and mount it on every node before `myriad "
            "validate` (which checks the mount), or accept this in lints.accept",
            path=("storage", "kind"),
        )


def storage_for_checkpoints(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    storage = loaded.spec.storage
    checkpoint = plan.checkpoint
    if storage.checkpoint is None or checkpoint is None:
        return
    path: Path = ("storage", "checkpoint")
    if storage.kind == "none":
        yield Finding(
            id="storage-checkpoint",
            severity="error",
            message="checkpoints are planned but storage kind is none",
            suggestion="set storage.kind (nfs, lustre, ...) with its write bandwidth",
            path=("storage", "kind"),
        )
        return
    drain = next((s for s in checkpoint.stalls if s.strategy == "distributed"), None)
    interval_s = checkpoint.interval_minutes * 60
    if drain is not None and drain.seconds > interval_s:
        yield Finding(
            id="storage-checkpoint",
            severity="error",
            message=(
                f"writing one {checkpoint.size_gb:.0f} GB checkpoint takes {drain.seconds:.0f} s "
                f"at best, longer than the {interval_s:.0f} s interval: checkpoints would pile up"
            ),
            suggestion="faster storage (write_gbs), more storage NICs, or a longer interval",
            path=(*path, "interval_minutes"),
            numbers={"write_seconds": round(drain.seconds, 1), "interval_seconds": interval_s},
        )
    if checkpoint.storage_write_gbs is None:
        yield Finding(
            id="storage-checkpoint",
            severity="info",
            message="storage.write_gbs is not set, so the storage system's own limit is not "
            "part of the checkpoint figures",
            suggestion="set storage.write_gbs to the storage system's aggregate write GB/s",
            path=("storage",),
        )
    elif checkpoint.storage_write_gbs < checkpoint.burst_gbs and drain is not None:
        # Storage slower than the burst is normal; it matters once the drain eats the interval.
        share = drain.seconds / interval_s
        yield Finding(
            id="storage-checkpoint",
            severity="warning" if share > DRAIN_SHARE_WARN else "info",
            message=(
                f"all nodes together can write {checkpoint.burst_gbs:,.0f} GB/s but storage takes "
                f"{checkpoint.storage_write_gbs:,g} GB/s: a checkpoint drains in "
                f"{drain.seconds:,.0f} s, {share:.1%} of the {interval_s:,.0f} s interval"
            ),
            suggestion="size storage for the burst, or stagger checkpoints",
            path=("storage", "write_gbs"),
            numbers={
                "burst_gbs": round(checkpoint.burst_gbs, 1),
                "storage_gbs": checkpoint.storage_write_gbs,
                "drain_seconds": round(drain.seconds, 1),
            },
        )
    if checkpoint.overhead_fraction > 0.05:
        yield Finding(
            id="checkpoint-overhead",
            severity="warning",
            message=(
                f"checkpoints block training {checkpoint.overhead_fraction:.1%} of the time "
                f"({checkpoint.chosen})"
            ),
            suggestion="use distributed-async checkpoints, or a longer interval",
            path=(*path, "strategy"),
            numbers={"overhead": round(checkpoint.overhead_fraction, 4)},
        )


def software_fit(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    spec = loaded.spec
    if plan.gpus and spec.software.nvidia_driver is None:
        yield Finding(
            id="driver-missing",
            severity="error",
            message=f"the cluster has {plan.gpus} GPUs but no nvidia_driver branch",
            suggestion='set software.nvidia_driver, for example "580"',
            path=("software",),
        )
    yield from _driver_branch(loaded)
    yield from _driver_gpu(loaded)
    yield from _slurm_fit(loaded)
    yield from _slurm_topology(loaded, plan)
    yield from _kubernetes_fit(loaded, plan)
    if spec.network.fabric == "infiniband":
        ib = spec.network.ib
        if ib.subnet_manager == "opensm" and len(ib.sm_nodes) < 2:
            yield Finding(
                id="subnet-manager",
                severity="warning",
                message=f"OpenSM runs on {len(ib.sm_nodes)} node(s): the fabric has no standby "
                "subnet manager",
                suggestion="name two nodes in network.infiniband.sm_nodes (master and standby), "
                "or use ufm",
                path=("network", "infiniband"),
                numbers={"sm_nodes": len(ib.sm_nodes)},
            )
        yield from _subnet_manager_domains(loaded)
    if (
        spec.software.orchestrator == "kubernetes"
        and spec.software.container_runtime != "containerd"
    ):
        yield Finding(
            id="kubernetes-runtime",
            severity="error",
            message="Kubernetes has not run on Docker since 1.24 (dockershim was removed); "
            "kubeadm needs containerd",
            suggestion="set software.container_runtime: containerd",
            path=("software", "container_runtime"),
        )
    if spec.network.fabric == "roce" and spec.software.doca_version is None:
        yield Finding(
            id="roce-tools",
            severity="error",
            message="a RoCE fabric needs mlnx_qos (DOCA's mlnx-tools) on every node to set "
            "trust, PFC and DSCP mapping, and no distribution ships it",
            suggestion='set software.doca_version (for example "2.9.1") so the DOCA repository '
            "is configured, also with ofed: inbox",
            path=("software",),
        )
    for name, profile in spec.profiles.items():
        if profile.server is None or profile.gpu is None:
            continue
        layout = loaded.catalog.servers[profile.server]
        if (layout.gpu_model, layout.gpu_count) != (profile.gpu.model, profile.gpu.count):
            yield Finding(
                id="server-layout-mismatch",
                severity="warning",
                message=f"{profile.server} holds {layout.gpu_count} x {layout.gpu_model}; the "
                f"profile says {profile.gpu.count} x {profile.gpu.model}",
                suggestion="make the profile's gpu match the server layout, or drop server",
                path=("profiles", name, "gpu"),
            )


def _driver_branch(loaded: LoadedSpec, today: date | None = None) -> Iterator[Finding]:
    """A branch past its end of life gets no security or bug fixes (catalog driver_branches)."""
    driver = loaded.spec.software.nvidia_driver
    if driver is None:
        return
    branch = driver.split(".")[0]
    month = (today or date.today()).strftime("%Y-%m")
    supported = {
        name: entry
        for name, entry in loaded.catalog.driver_branches.items()
        if entry.end_of_life >= month
    }
    entry = loaded.catalog.driver_branches.get(branch)
    if branch in supported:
        return
    newest = max(loaded.catalog.driver_branches, key=int, default=None)
    if entry is None and newest is not None and int(branch) > int(newest):
        # Newer than the catalog's table: not known to be ended.
        return
    ended = f"ended in {entry.end_of_life}" if entry else "is not on NVIDIA's supported list"
    choices = ", ".join(
        f"{name} ({item.designation}, until {item.end_of_life})"
        for name, item in sorted(supported.items(), key=lambda kv: int(kv[0]))
    )
    yield Finding(
        id="driver-end-of-life",
        severity="warning",
        message=f"NVIDIA driver branch {branch} {ended}: no more security or bug fixes",
        suggestion=f"pick a supported branch: {choices} (catalog driver_branches)",
        path=("software", "nvidia_driver"),
        numbers={"branch": branch},
    )


# The first driver branch that knows each architecture, newest first: (lowest compute
# capability, architecture, branch, first CUDA toolkit). NVIDIA's "CUDA Toolkit, Driver, and
# Architecture Matrix" (docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-
# architecture-matrix.html) gives each architecture's first toolkit; that toolkit's release
# notes ("CUDA Toolkit and Corresponding Driver Versions") its minimum Linux driver: 12.8
# needs 570.26, 11.8 needs 520.61.05, 11.0 needs 450.36.06.
FIRST_DRIVER: tuple[tuple[int, str, int, str], ...] = (
    (100, "Blackwell", 570, "CUDA 12.8"),
    (90, "Hopper", 520, "CUDA 11.8"),
    (89, "Ada", 520, "CUDA 11.8"),
    (80, "Ampere", 450, "CUDA 11.0"),
)


def _driver_gpu(loaded: LoadedSpec) -> Iterator[Finding]:
    """A branch older than a GPU's architecture does not drive it: the first run installs a
    driver that sees no GPU."""
    spec, catalog = loaded.spec, loaded.catalog
    major = (spec.software.nvidia_driver or "").split(".")[0]
    if not major.isdigit():
        return
    branch = int(major)
    profiles: dict[str, list[str]] = {}
    for name, profile in spec.profiles.items():
        if profile.gpu is not None:
            profiles.setdefault(profile.gpu.model, []).append(name)
    for model, names in profiles.items():
        capability = catalog.gpus[model].compute_capability
        if capability is None:
            continue
        first = next((row for row in FIRST_DRIVER if capability >= row[0]), None)
        if first is None or branch >= first[2]:
            continue
        _, architecture, needed, toolkit = first
        first_listed = min(
            (int(b) for b in catalog.driver_branches if int(b) >= needed), default=needed
        )
        yield Finding(
            id="driver-gpu",
            severity="error",
            message=f"NVIDIA driver branch {branch} predates {model} (profiles "
            f"{', '.join(names)}): {architecture} (compute capability {capability // 10}."
            f"{capability % 10}) needs branch {needed} or newer ({toolkit}'s minimum driver)",
            suggestion=f"pick branch {first_listed} or newer (catalog driver_branches)",
            path=("software", "nvidia_driver"),
            numbers={"branch": branch, "needed": needed},
        )


def _slurm_fit(loaded: LoadedSpec) -> Iterator[Finding]:
    spec = loaded.spec
    if spec.software.orchestrator != "slurm":
        return
    slurm = spec.software.slurm
    controllers = sum(pool.count for pool in spec.pools_with_role("controller"))
    # Slurm's backups take over from the saved state (slurm.conf, StateSaveLocation): a local
    # directory per controller makes a failover that forgets every job.
    if controllers > 1 and slurm.state_save_location is None:
        yield Finding(
            id="slurm-state-not-shared",
            severity="error",
            message=f"{controllers} Slurm controllers but no shared StateSaveLocation: a backup "
            "would take over without the jobs and node state the primary saved",
            suggestion="set software.slurm.state_save_location to a directory on the shared "
            f"storage (for example {spec.storage.mount}/slurm/state), or keep one controller",
            path=("software", "slurm"),
            numbers={"controllers": controllers},
        )
    location = slurm.state_save_location
    if location is not None and controllers > 1:
        mount = spec.storage.mount.rstrip("/")
        if spec.storage.kind == "none" or not location.startswith(mount + "/"):
            yield Finding(
                id="slurm-state-not-shared",
                severity="error",
                message=f"state_save_location {location} is not on the cluster's shared storage "
                f"({'none' if spec.storage.kind == 'none' else spec.storage.mount}), which "
                "every controller mounts",
                suggestion=f"put it under storage.mount ({spec.storage.mount}/slurm/state)",
                path=("software", "slurm", "state_save_location"),
            )
    if (
        slurm.containers is None
        and not slurm.no_containers
        and any(
            spec.profiles[pool.profile].gpu is not None for pool in spec.pools_with_role("compute")
        )
    ):
        # GPU jobs are run from containers (NGC images, `srun --container-image`); a GPU
        # cluster without them is a mistake unless the spec says it is meant.
        yield Finding(
            id="slurm-no-containers",
            severity="error",
            message="Enroot and Pyxis stay off: GPU jobs cannot use `srun --container-image`, "
            "because Myriad installs them only with release checksums someone vouched for",
            suggestion="add software.slurm.containers with enroot_checksums and pyxis_checksum "
            "from NVIDIA's release pages (see roles/container_runtime/README.md), or set "
            "software.slurm.no_containers: true if jobs run without containers on purpose",
            path=("software", "slurm"),
        )
    yield from _slurm_cgroups(loaded)


def _kubernetes_fit(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    spec = loaded.spec
    if spec.software.orchestrator != "kubernetes":
        return
    controllers = sum(pool.count for pool in spec.pools_with_role("controller"))
    # kubeadm joins further control-plane nodes through controlPlaneEndpoint; with none, each
    # would be its own cluster, and the kubernetes role stops before it starts.
    if controllers > 1 and spec.software.k8s.control_plane_endpoint is None:
        yield Finding(
            id="kubernetes-endpoint",
            severity="error",
            message=f"{controllers} Kubernetes control-plane nodes but no control_plane_endpoint: "
            "the others cannot join the first one's API server",
            suggestion="set software.kubernetes.control_plane_endpoint to the VIP or load "
            "balancer in front of the API servers (host:6443), or keep one controller",
            path=("software", "kubernetes"),
            numbers={"controllers": controllers},
        )
    endpoint = spec.software.k8s.control_plane_endpoint
    try:
        address = ipaddress.ip_address((endpoint or "").rsplit(":", 1)[0])
    except ValueError:
        return  # none, or a name resolved at the site
    for network_name, _, _, node in _nodes_at(loaded, plan, address):
        yield Finding(
            id="kubernetes-endpoint",
            severity="error",
            message=f"control_plane_endpoint {address} is {node}'s {network_name} address: "
            "the API's VIP would answer on a node that is not the load balancer",
            suggestion="an address of the management network outside the nodes' range",
            path=("software", "kubernetes", "control_plane_endpoint"),
        )


def _slurm_cgroups(loaded: LoadedSpec) -> Iterator[Finding]:
    """slurmd loads a cgroup plugin the OS's Slurm must ship for the hierarchy it boots."""
    spec = loaded.spec
    row = os_table()[spec.software.os]
    legacy = spec.software.slurm.legacy_cgroup
    problem = row.cgroup_problem("autodetect")
    if problem is None:
        if legacy:
            yield Finding(
                id="slurm-legacy-cgroup",
                severity="warning",
                message=f"legacy_cgroup is set but Slurm {row.slurm.value} on "
                f"{spec.software.os} manages the {row.cgroup_hierarchy.value} hierarchy "
                "the OS boots: the nodes would boot the legacy hierarchy for nothing",
                suggestion="remove software.slurm.legacy_cgroup",
                path=("software", "slurm", "legacy_cgroup"),
            )
        return
    if legacy:
        yield Finding(
            id="slurm-legacy-cgroup",
            severity="warning",
            message=f"Slurm {row.slurm.value} on {spec.software.os} runs with cgroup/v1: the "
            "nodes boot the legacy hierarchy (systemd.unified_cgroup_hierarchy=0, one reboot), "
            "which systemd has deprecated and newer container tools drop",
            suggestion="move to ubuntu-24.04 (Slurm 23.11, cgroup/v2) when the site can",
            path=("software", "slurm", "legacy_cgroup"),
            numbers={"slurm": row.slurm.value},
        )
        return
    yield Finding(
        id="slurm-os-cgroup",
        severity="error",
        message=f"slurmd cannot start on {spec.software.os}, which boots the "
        f"{row.cgroup_hierarchy.value} cgroup hierarchy: {problem}",
        suggestion="set software.os: ubuntu-24.04 (Slurm 23.11 has cgroup/v2), or set "
        "software.slurm.legacy_cgroup: true to boot the nodes with the legacy hierarchy",
        path=("software", "os"),
        numbers={"slurm": row.slurm.value},
    )


def _slurm_topology(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    """NVLink domains larger than a node are scheduled with topology/block: the OS's Slurm
    must ship it (from 23.11; the OS capability table says which does)."""
    spec = loaded.spec
    if spec.software.orchestrator != "slurm":
        return
    racks = [d for d in plan.nvlink if d.system is not None]
    if not racks:
        return
    in_racks = {d.pool for d in racks}
    others = [p.name for p in spec.pools_with_role("compute") if p.name not in in_racks]
    if others:
        index = next(i for i, p in enumerate(spec.pools) if p.name == others[0])
        yield Finding(
            id="slurm-blocks-mixed",
            severity="warning",
            message=f"compute pool(s) {', '.join(others)} are not trays of a rack-scale system: "
            f"Slurm's {BLOCK_PLUGIN} needs every compute node in a block of one size, so the "
            f"cluster keeps topology/tree and a job may straddle {racks[0].system} racks",
            suggestion="put the other servers in a cluster of their own, or accept that jobs "
            "on the racks are not kept inside one NVLink domain",
            path=("pools", index, "profile"),
            numbers={"pools_outside_racks": len(others)},
        )
        return
    row = os_table()[spec.software.os]
    if BLOCK_PLUGIN in row.topology_plugins.value:
        return
    yield Finding(
        id="slurm-os-topology",
        severity="error",
        message=f"{racks[0].system} racks are NVLink domains of {racks[0].nodes_per_domain} "
        f"nodes, which Slurm places jobs in with {BLOCK_PLUGIN}; Slurm "
        f"{row.slurm.value} on {spec.software.os} has no such plugin (it has "
        f"{', '.join(row.topology_plugins.value)}; {row.topology_plugins.source})",
        suggestion=f"set software.os to one whose Slurm has {BLOCK_PLUGIN} (23.11 or later): "
        + ", ".join(
            name
            for name, other in os_table().items()
            if BLOCK_PLUGIN in other.topology_plugins.value
        ),
        path=("software", "os"),
        numbers={"slurm": row.slurm.value},
    )


def _subnet_manager_domains(loaded: LoadedSpec) -> Iterator[Finding]:
    """Master and standby OpenSM on one island (one leaf group, one power domain) fail together."""
    spec = loaded.spec
    ib = spec.network.ib
    if ib.subnet_manager != "opensm" or len(ib.sm_nodes) < 2:
        return
    islands = {node.name: node.island for node in iter_nodes(spec) if node.name in ib.sm_nodes}
    compute = {name for name, island in islands.items() if island is not None}
    if len(compute) == len(ib.sm_nodes) and len({islands[n] for n in compute}) == 1:
        yield Finding(
            id="subnet-manager-domain",
            severity="warning",
            message=f"every OpenSM node ({', '.join(ib.sm_nodes)}) is a compute node of one "
            "island: a job or an island outage takes master and standby down together",
            suggestion="run OpenSM on nodes of different islands or racks (controllers with an "
            "HCA), or let the switches or UFM run the subnet manager (subnet_manager: switch|ufm)",
            path=("network", "infiniband", "sm_nodes"),
        )


def figures_the_spec_cannot_have(loaded: LoadedSpec, plan: Plan) -> Iterator[Finding]:
    """Settings the plan cannot honour: a precision the GPUs lack, a ratio with no island
    boundary to apply to."""
    compute = plan.compute
    if compute.unsupported_precision:
        models = ", ".join(compute.unsupported_precision)
        yield Finding(
            id="workload-precision",
            severity="warning",
            message=f"{compute.precision} training on {models}, which has no "
            f"{compute.precision.upper()} tensor cores: the plan has no training time for it",
            suggestion="set workload.precision: bf16, or plan GPUs with "
            f"{compute.precision.upper()} ("
            + ("H100, H200" if compute.precision == "fp8" else "B300, GB200, GB300")
            + ")",
            path=("workload", "precision"),
            numbers={"precision": compute.precision},
        )
    topology = loaded.spec.network.topology
    fabric = plan.fabric
    ratio = topology.inter_island_oversubscription
    if fabric is not None and len(fabric.islands) == 1 and ratio > 1:
        yield Finding(
            id="oversubscription-unused",
            severity="warning",
            message=f"inter_island_oversubscription {ratio:g}:1 has no effect: all "
            f"{fabric.islands[0].nodes:,} compute nodes are one island, with nothing "
            "between islands to oversubscribe",
            suggestion="set island_nodes to split the fabric into islands, or "
            "island_oversubscription to oversubscribe the leaves inside the island",
            path=("network", "topology", "inter_island_oversubscription"),
            numbers={"ratio": ratio, "islands": 1},
        )


LINTS: tuple[Lint, ...] = (
    nic_faster_than_slot,
    nics_per_gpu,
    gpu_nic_placement,
    host_resources,
    rack_power,
    facility_power,
    fabric_shape,
    fabric_fit,
    addressing,
    storage_server_address,
    storage_not_mounted,
    rail_addressing,
    storage_for_checkpoints,
    software_fit,
    figures_the_spec_cannot_have,
)


def lint(loaded: LoadedSpec, plan: Plan) -> list[Finding]:
    findings = [finding for check in LINTS for finding in check(loaded, plan)]
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.id))
