"""What a plan holds: plain frozen dataclasses, computed by pure functions from spec + catalog.

Units are in the field names (`_gbs` = gigabytes per second, `_gbps` = gigabits per
second, `_kw`, `_usd`), so a figure cannot be read in the wrong unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class PoolSummary:
    name: str
    role: str
    profile: str
    nodes: int
    gpus: int
    gpu_model: str | None
    compute_nics_per_node: int
    server_kw: float


@dataclass(frozen=True, slots=True)
class Island:
    index: int
    nodes: int
    leaves: int
    spines: int


@dataclass(frozen=True, slots=True)
class LeafPlacement:
    """Where one compute NIC of one node plugs in."""

    island: int
    leaf: str
    port: int
    rail: int


@dataclass(frozen=True, slots=True)
class Fabric:
    kind: Literal["fat-tree", "rail-optimized"]
    fabric: Literal["infiniband", "roce", "ethernet", "efa"]
    leaf_model: str
    spine_model: str
    radix: int
    port_speed_gbps: int
    endpoint_speed_gbps: int
    endpoints: int
    rails: int
    island_nodes: int
    islands: tuple[Island, ...]
    tiers: int
    leaves: int
    spines: int
    core_switches: int
    node_links: int
    leaf_spine_links: int
    spine_core_links: int
    cables: int
    transceivers: int
    # The transceivers by layer, summing to `transceivers`: node-leaf (both ends),
    # leaf-spine (both ends), spine-core (both ends).
    node_transceivers: int
    leaf_spine_transceivers: int
    spine_core_transceivers: int
    injection_gbps_per_node: float
    island_bisection_gbps: float
    bisection_gbps: float
    inter_island_oversubscription: float
    island_oversubscription: float
    ports_per_cage: int
    switch_kw: float
    # Ports of a leaf that take endpoints: k/2 under spines (fewer where an island
    # oversubscription below 1 gives leaves more uplinks), all k for a lone switch.
    leaf_downlinks: int
    # Independent planes: rail j is in plane j mod planes; its leaves are numbered plane by
    # plane (plane 0's rails first), and a plane's leaves link only to its own spines.
    planes: int = 1
    # Leaf ports of fabric-management appliances (UFM), counted apart from `cables` (the
    # compute cables, which the cabling sheet lists one by one).
    management_links: int = 0
    # Spare switches on the shelf by layer (topology.spares), not in the counts above and
    # not powered.
    spare_leaves: int = 0
    spare_spines: int = 0
    spare_core: int = 0
    # Rails-only (no spine across rails): every rail is a plane of its own (planes = rails).
    rails_only: bool = False

    @property
    def layout(self) -> str:
        """The topology in words: the kind, and rails-only where no spine joins the rails."""
        return f"{self.kind} (rails only)" if self.rails_only else self.kind


@dataclass(frozen=True, slots=True)
class RackFill:
    """One profile's servers in racks, in order: `full` racks of `per_rack`, then one of
    `rest` (0: none). `over_budget`: one server alone exceeds the rack's kW (a rack each).
    `tor_leaves`: in a ToR design, the leaf switches standing in each rack, with their
    rack units and kW."""

    profile: str
    roles: tuple[str, ...]
    per_rack: int
    full: int
    rest: int
    units_each: int
    kw_each: float
    over_budget: bool
    tor_leaves: int = 0
    tor_units: int = 0
    tor_kw: float = 0.0

    @property
    def racks(self) -> int:
        return self.full + (1 if self.rest else 0)


@dataclass(frozen=True, slots=True)
class Power:
    """`basis` says which server figure is used; `not_counted` what the totals leave out."""

    basis: str
    gpu_kw: float
    server_kw: float
    switch_kw: float
    other_switch_kw: float
    storage_kw: float
    it_kw: float
    facility_kw: float
    energy_mwh_per_year: float
    cost_usd_per_year: float
    racks_by_power: int
    racks_by_space: int
    racks: int
    server_racks: int
    switch_racks: int
    storage_racks: int
    max_server_kw: float
    servers_per_rack: int
    not_counted: tuple[str, ...]
    # Per profile, how its servers fill their racks (`server_racks` is their sum).
    rack_fills: tuple[RackFill, ...] = ()
    # The budgets every rack was counted against (facility.rack_units, facility.rack_kw).
    rack_units: int = 42
    rack_kw: float = 0.0
    # Racks in a row (facility.racks_per_row): the layout's rows.
    racks_per_row: int = 16


@dataclass(frozen=True, slots=True)
class NodeBandwidth:
    """Expected figures for one compute profile; the validation step gates on these."""

    profile: str
    nic_model: str | None
    nic_line_gbs: float
    pcie_slot_gbs: float
    per_nic_rdma_gbs: float
    intra_node_busbw_gbs: float | None
    inter_node_busbw_gbs: float | None
    limited_by: str


@dataclass(frozen=True, slots=True)
class NvlinkDomains:
    """The NVLink domains of one compute pool. `system`: the rack-scale system whose racks are
    the domains (GB200-NVL72), or None where each server is a domain of its own GPUs.
    `partial_nodes`: trays in a last rack short of `nodes_per_domain` (0: none); that rack is
    counted in `domains`. `domain_tbs`: NVLink bandwidth of one domain, as the vendor states it
    for a rack, else the GPUs' per-GPU figure summed. `rack_kw`, `cooling`: the rack's own."""

    pool: str
    system: str | None
    nodes_per_domain: int
    gpus_per_domain: int
    domains: int
    partial_nodes: int
    domain_tbs: float
    cpus_per_domain: int
    switch_trays_per_domain: int
    rack_kw: float | None
    cooling: str | None


@dataclass(frozen=True, slots=True)
class Compute:
    gpus: int
    peak_bf16_pflops: float
    peak_fp8_pflops: float | None
    params_billion: float
    tokens_billion: float
    mfu: float
    precision: str
    training_flops: float
    training_days: float | None
    workload_from_spec: bool
    unsupported_precision: tuple[str, ...]
    peak_fp4_pflops: float | None = None


@dataclass(frozen=True, slots=True)
class CheckpointStall:
    strategy: str
    seconds: float
    limited_by: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    params_billion: float
    size_gb: float
    chosen: str
    stalls: tuple[CheckpointStall, ...]
    interval_minutes: float
    overhead_fraction: float
    burst_gbs: float
    storage_write_gbs: float | None


@dataclass(frozen=True, slots=True)
class Plan:
    cluster: str
    nodes: int
    gpus: int
    pools: tuple[PoolSummary, ...]
    fabric: Fabric | None
    power: Power
    bandwidth: tuple[NodeBandwidth, ...]
    compute: Compute
    checkpoint: Checkpoint | None
    nvlink: tuple[NvlinkDomains, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
