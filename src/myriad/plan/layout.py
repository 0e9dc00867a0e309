"""Where every compute node and fabric switch stands: row, rack and rack unit.

The racks are the plan's (`myriad.plan.power`), placed in that order so the two never
disagree on a count:
- each profile's servers fill racks of `per_rack` (`RackFill`), from the bottom up, in pool
  order; the profiles' racks follow each other;
- in a ToR design (`topology.leaf_nodes`) each leaf stands at the top of the rack of the
  first node cabled to it;
- the switch racks start a row of their own (the network row): leaves, spines and core
  switches, then the declared switches, packed as `pack_racks` packs them.

Racks fill rows of `facility.racks_per_row`. A rack is named `R<row>-<rack>`, both counted
from 1, so the name says where to walk.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from myriad.plan.cable_runs import RackPosition, Routing
from myriad.plan.fabric import core_name, iter_placements, leaf_name, spine_name
from myriad.plan.model import Fabric, Power
from myriad.plan.power import pack_racks, server_rack_units, switch_devices, tor_leaves
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster


@dataclass(frozen=True, slots=True)
class Slot:
    """A device's rack (an index that also says its row: `rack // racks_per_row`) and the
    lowest rack unit it takes, from 1 at the bottom."""

    rack: int
    unit: int


@dataclass(frozen=True, slots=True)
class RackLayout:
    """Every compute node and fabric switch by name, and the hall's figures for lengths."""

    racks_per_row: int
    slots: Mapping[str, Slot]
    routing: Routing

    def position(self, device: str) -> RackPosition:
        slot = self.slots[device]
        row, rack = divmod(slot.rack, self.racks_per_row)
        return RackPosition(rack=rack, unit=slot.unit, row=row)

    def rack_name(self, device: str) -> str:
        return rack_name(self.slots[device].rack, self.racks_per_row)


def rack_name(rack: int, racks_per_row: int) -> str:
    row, place = divmod(rack, racks_per_row)
    return f"R{row + 1:02d}-{place + 1:02d}"


def routing(spec: Cluster) -> Routing:
    facility = spec.facility
    return Routing(
        rack_width_mm=facility.rack_width_mm,
        rack_units=facility.rack_units,
        tray_allowance_mm=facility.tray_drop_mm,
        slack_mm=facility.cable_slack_mm,
        row_pitch_mm=facility.row_pitch_mm,
    )


def _server_slots(spec: Cluster, catalog: Catalog, power: Power) -> Iterator[tuple[str, Slot]]:
    """Each server's slot: its profile's racks in the order `plan_power` counted them."""
    per_rack = {fill.profile: fill.per_rack for fill in power.rack_fills}
    first_rack: dict[str, int] = {}
    racks = 0
    for fill in power.rack_fills:
        first_rack[fill.profile] = racks
        racks += fill.racks
    placed: dict[str, int] = dict.fromkeys(per_rack, 0)
    for pool in spec.pools:
        profile = spec.profiles[pool.profile]
        units = server_rack_units(profile, catalog)
        fit = per_rack[pool.profile]
        for number in range(1, pool.count + 1):
            rack, place = divmod(placed[pool.profile], fit)
            placed[pool.profile] += 1
            yield pool.hostname(number), Slot(first_rack[pool.profile] + rack, 1 + place * units)


def _tor_slots(
    spec: Cluster, catalog: Catalog, fabric: Fabric, servers: Mapping[str, Slot]
) -> Iterator[tuple[str, Slot]]:
    """Each leaf at the top of its first node's rack, the next one below it."""
    leaf_units = catalog.switches[fabric.leaf_model].rack_units
    top = spec.facility.rack_units
    taken: dict[int, int] = {}
    seen: set[str] = set()
    for host, _, place in iter_placements(spec, fabric, catalog):
        if place.leaf in seen:
            continue
        seen.add(place.leaf)
        rack = servers[host].rack
        taken[rack] = taken.get(rack, 0) + leaf_units
        yield place.leaf, Slot(rack, max(1, top - taken[rack] + 1))


def _fabric_switches(spec: Cluster, fabric: Fabric) -> Iterator[str]:
    """The switch-rack switches' names in `switch_devices` order (leaves, spines, cores)."""
    if not tor_leaves(spec, fabric):
        for island in fabric.islands:
            for number in range(1, island.leaves + 1):
                yield leaf_name(island.index, number)
    for island in fabric.islands:
        for number in range(1, island.spines + 1):
            yield spine_name(island.index, number)
    for number in range(1, fabric.core_switches + 1):
        yield core_name(number)


def plan_layout(spec: Cluster, catalog: Catalog, fabric: Fabric, power: Power) -> RackLayout:
    """Every server and fabric switch placed; the declared switches take their racks'
    space but have no cables, so no name here."""
    facility = spec.facility
    per_row = facility.racks_per_row
    slots = dict(_server_slots(spec, catalog, power))
    if tor_leaves(spec, fabric):
        slots.update(_tor_slots(spec, catalog, fabric, slots))
    network_row = math.ceil(power.server_racks / per_row) * per_row
    names = _fabric_switches(spec, fabric)
    sizes = switch_devices(spec, catalog, fabric)
    for name, (rack, unit) in zip(
        names, pack_racks(sizes, facility.rack_units, facility.rack_kw), strict=False
    ):
        slots[name] = Slot(network_row + rack, unit)
    return RackLayout(racks_per_row=per_row, slots=slots, routing=routing(spec))
