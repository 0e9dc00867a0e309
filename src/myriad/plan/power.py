"""Power, energy, cost and racks of the whole cluster.

Server power is the maximum a server can draw: what the facility must be able to deliver,
not an average, so energy and cost (that maximum drawn every hour of the year) are upper
bounds; `Power.basis` says so in the plan. Counted: servers of every pool, the compute
fabric's switches, and what the spec declares besides: storage systems
(`storage.systems`) and front-end, storage and management switches (`network.switches`).
A site's figure without the last two is low by about a tenth (`Power.not_counted` names
what a spec leaves out).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator

from myriad.plan.model import Fabric, Power, RackFill
from myriad.plan.nvlink import rack_system_of
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster, Profile

# Estimate for a server with neither power_kw nor a catalog layout: GPU board power
# (REFERENCE.md "Power") plus these allowances, which are typical server figures, not
# datasheet values: a current server CPU socket at full load with its memory, and the base
# of fans, drives, BMC and power-supply losses.
CPU_SOCKET_W = 350.0
SERVER_BASE_W = 250.0
# Rack units when neither the profile nor a layout says: a 2U CPU server; GPU servers take
# 4U per four GPUs (an 8-GPU HGX chassis is 8U, as the DGX H100 / H200 in the catalog).
CPU_SERVER_RACK_UNITS = 2
RACK_UNITS_PER_GPU_GROUP = 4
GPUS_PER_RACK_UNIT_GROUP = 4
# REFERENCE.md "Power": energy per year = facility kW x 8760 h.
HOURS_PER_YEAR = 8760
KWH_PER_MWH = 1000
WATTS_PER_KW = 1000
# rack_kw / server_kw in floating point: 40 / 10 must give 4, not 3.9999999.
_FLOOR_TOLERANCE = 1e-9


def estimated_server_kw(profile: Profile, catalog: Catalog) -> float:
    """GPUs at board power + CPU sockets + every NIC + a base for the rest (an estimate)."""
    watts = SERVER_BASE_W + CPU_SOCKET_W * profile.cpu.sockets
    if profile.gpu is not None:
        watts += profile.gpu.count * catalog.gpus[profile.gpu.model].board_power_w
    for group in (profile.nics.compute, profile.nics.storage, profile.nics.management):
        if group is not None:
            watts += group.count * catalog.nics[group.model].power_w
    return watts / WATTS_PER_KW


def server_kw(profile: Profile, catalog: Catalog) -> float:
    """The profile's own figure, else its catalog layout's maximum, else the estimate.

    A compute tray of a rack-scale system counts its share of the rack's power (switch trays
    and power shelves included), so a whole rack of trays adds up to the rack's figure."""
    if profile.power_kw is not None:
        return profile.power_kw
    system = rack_system_of(profile, catalog)
    if system is not None:
        rack = system[1]
        return rack.max_power_kw / rack.compute_trays
    if profile.server is not None:
        return catalog.servers[profile.server].max_power_kw
    return estimated_server_kw(profile, catalog)


def server_rack_units(profile: Profile, catalog: Catalog) -> int:
    if profile.rack_units is not None:
        return profile.rack_units
    if profile.server is not None:
        return catalog.servers[profile.server].rack_units
    if profile.gpu is None:
        return CPU_SERVER_RACK_UNITS
    groups = math.ceil(profile.gpu.count / GPUS_PER_RACK_UNIT_GROUP)
    return RACK_UNITS_PER_GPU_GROUP * groups


def gpu_kw(profile: Profile, catalog: Catalog) -> float:
    if profile.gpu is None:
        return 0.0
    return profile.gpu.count * catalog.gpus[profile.gpu.model].board_power_w / WATTS_PER_KW


def _fits(capacity: float, each: float) -> int:
    return math.floor(capacity / each + _FLOOR_TOLERANCE)


def _racks_for(count: int, per_rack: int) -> int:
    """A server that does not fit a rack's budget still gets a rack of its own."""
    return count if per_rack == 0 else math.ceil(count / per_rack)


# Which figure a server counts with (profile power_kw, else the layout's max_power_kw, else
# the estimate above): its maximum, as if drawn every hour of the year.
BASIS = "server maximum, drawn all year: an upper bound"


def _racks_of(units: int, kw: float, rack_units: int, rack_kw: float) -> int:
    """Racks for equipment of `units` rack units drawing `kw`: whichever fills first."""
    if units == 0:
        return 0
    return max(math.ceil(units / rack_units), math.ceil(kw / rack_kw - _FLOOR_TOLERANCE))


def pack_racks(
    devices: Iterable[tuple[int, float]], rack_units: int, rack_kw: float
) -> Iterator[tuple[int, int]]:
    """(rack, lowest unit) of each device of (units, kW), in order: a device goes in the
    current rack while its units and kW fit, else it opens the next one. A device that
    alone exceeds a rack still gets one of its own (the rack lints say so)."""
    rack, used_units, used_kw = -1, rack_units, rack_kw
    for units, kw in devices:
        over = used_units + units > rack_units or used_kw + kw > rack_kw + _FLOOR_TOLERANCE
        if rack < 0 or (over and used_units > 0):
            rack, used_units, used_kw = rack + 1, 0, 0.0
        yield rack, used_units + 1
        used_units += units
        used_kw += kw


def tor_leaves(spec: Cluster, fabric: Fabric | None) -> bool:
    """A ToR design (`topology.leaf_nodes`): each leaf stands in the rack of its nodes."""
    return fabric is not None and spec.network.topology.leaf_nodes is not None


def switch_devices(
    spec: Cluster, catalog: Catalog, fabric: Fabric | None
) -> Iterator[tuple[int, float]]:
    """(units, kW) of every switch that stands in a switch rack, in the order they
    are racked: the fabric's leaves (unless each stands in its nodes' rack), spines and core
    switches, then the declared front-end, storage and management switches."""
    if fabric is not None:
        leaf, spine = catalog.switches[fabric.leaf_model], catalog.switches[fabric.spine_model]
        if not tor_leaves(spec, fabric):
            for _ in range(fabric.leaves):
                yield leaf.rack_units, leaf.power_w / WATTS_PER_KW
        for _ in range(fabric.spines + fabric.core_switches):
            yield spine.rack_units, spine.power_w / WATTS_PER_KW
    for group in spec.network.switches:
        model = catalog.switches[group.model]
        for _ in range(group.count):
            yield model.rack_units, model.power_w / WATTS_PER_KW


def _switch_racks(spec: Cluster, catalog: Catalog, fabric: Fabric | None) -> int:
    facility = spec.facility
    devices = switch_devices(spec, catalog, fabric)
    last = max(
        (rack for rack, _ in pack_racks(devices, facility.rack_units, facility.rack_kw)), default=-1
    )
    return last + 1


def _tor_racks(
    spec: Cluster, catalog: Catalog, fabric: Fabric | None, counts: Counter[str]
) -> tuple[dict[str, int], tuple[int, int, float]]:
    """In a ToR design: servers per rack of each compute profile (`leaf_nodes`), and the
    leaves, their units and kW that stand in each of those racks (the fabric's leaves over
    its racks of nodes, rounded up). `counts`: servers per profile."""
    if fabric is None or not tor_leaves(spec, fabric):
        return {}, (0, 0, 0.0)
    per_rack = spec.network.topology.leaf_nodes or 1
    profiles = {pool.profile for pool in spec.pools_with_role("compute")}
    racks = sum(math.ceil(counts[profile] / per_rack) for profile in profiles)
    leaves = math.ceil(fabric.leaves / racks) if racks else 0
    leaf = catalog.switches[fabric.leaf_model]
    return (
        dict.fromkeys(profiles, per_rack),
        (leaves, leaves * leaf.rack_units, leaves * leaf.power_w / WATTS_PER_KW),
    )


def plan_power(spec: Cluster, catalog: Catalog, fabric: Fabric | None) -> Power:
    """Racks are counted per profile (servers of one shape share racks) and summed; the
    switches fill racks of their own, as do storage systems."""
    facility = spec.facility
    counts = Counter[str]()
    roles: dict[str, list[str]] = {}
    for pool in spec.pools:
        counts[pool.profile] += pool.count
        if pool.role not in roles.setdefault(pool.profile, []):
            roles[pool.profile].append(pool.role)
    tor_racks, tor_switches = _tor_racks(spec, catalog, fabric, counts)
    gpus = servers = 0.0
    by_power = by_space = racks = 0
    per_rack: list[int] = []
    kw_each: list[float] = []
    fills: list[RackFill] = []
    for name, count in counts.items():
        profile = spec.profiles[name]
        kw = server_kw(profile, catalog)
        units = server_rack_units(profile, catalog)
        kw_each.append(kw)
        gpus += count * gpu_kw(profile, catalog)
        servers += count * kw
        system = rack_system_of(profile, catalog)
        if name in tor_racks:
            # The design states the rack: leaf_nodes servers under their ToR leaves.
            power_fit = space_fit = fit = tor_racks[name]
            over = False
        elif system is None:
            power_fit = _fits(facility.rack_kw, kw)
            space_fit = _fits(facility.rack_units, units)
            fit = min(power_fit, space_fit)
            over = fit == 0
        else:
            # A rack-scale system is its own rack: its trays fill it whatever the budget says;
            # a rack that draws more than the budget is the rack-power lint's error.
            power_fit = space_fit = fit = system[1].compute_trays
            over = False
        by_power += _racks_for(count, power_fit)
        by_space += _racks_for(count, space_fit)
        racks += _racks_for(count, fit)
        per_rack.append(fit)
        full, rest = divmod(count, fit) if fit else (count, 0)
        fills.append(
            RackFill(
                name,
                tuple(roles[name]),
                max(fit, 1),
                full,
                rest,
                units,
                kw,
                over,
                *(tor_switches if name in tor_racks else (0, 0, 0.0)),
            )
        )
    switches = fabric.switch_kw if fabric is not None else 0.0
    other_switches = sum(
        g.count * catalog.switches[g.model].power_w / WATTS_PER_KW for g in spec.network.switches
    )
    switch_racks = _switch_racks(spec, catalog, fabric)
    storage_kw = sum(s.count * s.power_kw for s in spec.storage.systems)
    storage_racks = sum(
        _racks_of(
            s.count * s.rack_units, s.count * s.power_kw, facility.rack_units, facility.rack_kw
        )
        for s in spec.storage.systems
    )
    it = servers + switches + other_switches + storage_kw
    facility_kw = it * facility.pue
    not_counted = []
    if not spec.storage.systems:
        not_counted.append("storage systems (storage.systems)")
    if not spec.network.switches:
        not_counted.append("front-end and storage switches (network.switches)")
    return Power(
        basis=BASIS,
        gpu_kw=gpus,
        server_kw=servers,
        switch_kw=switches,
        other_switch_kw=other_switches,
        storage_kw=storage_kw,
        it_kw=it,
        facility_kw=facility_kw,
        energy_mwh_per_year=facility_kw * HOURS_PER_YEAR / KWH_PER_MWH,
        cost_usd_per_year=facility_kw * HOURS_PER_YEAR * facility.usd_per_kwh,
        racks_by_power=by_power,
        racks_by_space=by_space,
        racks=racks + switch_racks + storage_racks,
        server_racks=racks,
        switch_racks=switch_racks,
        storage_racks=storage_racks,
        max_server_kw=max(kw_each, default=0.0),
        servers_per_rack=min(per_rack, default=0),
        not_counted=tuple(not_counted),
        rack_fills=tuple(fills),
        rack_units=facility.rack_units,
        rack_kw=facility.rack_kw,
        racks_per_row=facility.racks_per_row,
    )
