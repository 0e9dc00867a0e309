"""The cabling plan: one row per cable of the compute fabric, both ends named.

Every cable the fabric plan counts (`Fabric.node_links`, `leaf_spine_links`,
`spine_core_links`) becomes a row, so the totals agree by construction and a test holds
them to it. Ends are a node's port (host, the port's name, HCA port 1) or a switch port.
A node's port has the name the inventory gives it and the fabric shows: on InfiniBand its
RDMA device (`nccl_hcas`; ibnetdiscover's node description is "<host> <device>"), on an
Ethernet fabric its interface (`roce_nics`' netdev: the spec's `interfaces`, else railN;
LLDP names a port by its interface), so one name serves the sheet, the fabric check and
the playbooks.

Ports follow `myriad.plan.fabric`'s placement: a leaf's down-links take ports 1..k/2 in
placement order (`leaf_placement`), its uplinks the ports above k/2. Uplink g of a group,
counted over its leaves in order, goes to spine g mod spines (the striping the switch tree
uses), and a spine takes its leaf links on ports 1, 2, ... in that order; its core links
follow on the ports above. Core links are striped over the core switches the same way.

`placed_cables` adds where each end stands (`myriad.plan.layout`: rack, rack unit, and a
switch port's cage and lane), the run's length from those positions and the facility's
figures, the media that length and speed allow (`myriad.plan.media`) and a label to print:
the contractor's sheet. The plan's own transceiver count stays the conservative figure
(optics everywhere); the sheet's totals count what its media need.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from myriad.plan.cable_runs import run_length_mm
from myriad.plan.fabric import (
    _group_planes,
    _group_spines,
    _island_groups,
    _runs,
    _Shape,
    _shape,
    _spread,
    core_name,
    iter_placements,
    leaf_downlinks,
    leaf_name,
    leaf_uplinks,
    spine_name,
    transceivers_by_tier,
)
from myriad.plan.layout import RackLayout
from myriad.plan.media import Media, choose_media
from myriad.plan.model import Fabric
from myriad.plan.ports import Port, ports
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster

CableTier = Literal["node-leaf", "leaf-spine", "spine-core"]
CSV_COLUMNS = (
    "cable",
    "tier",
    "a_rack",
    "a_unit",
    "a_device",
    "a_port",
    "a_hca",
    "a_cage",
    "a_lane",
    "b_rack",
    "b_unit",
    "b_device",
    "b_port",
    "b_cage",
    "b_lane",
    "rail",
    "island",
    "speed_gbps",
    "length_m",
    "media",
    "part",
    "part_m",
    "label",
)


@dataclass(frozen=True, slots=True)
class Cable:
    """One cable. `a` is the lower end (node HCA, leaf, spine), `b` the upper (leaf, spine,
    core). `a_hca` names the node's port on a node-leaf cable (`node_port_name`), else is
    empty; `a_port` is then the HCA's port (1). `rail` is the node-local NIC port of a
    node-leaf cable."""

    cable: int
    tier: CableTier
    a_device: str
    a_port: int
    a_hca: str
    b_device: str
    b_port: int
    rail: int | None
    island: int | None
    speed_gbps: int
    # Filled by `placed_cables`; a logical cable (the fabric check's) leaves them empty.
    a_rack: str = ""
    a_unit: int | None = None
    a_cage: int | None = None
    a_lane: int | None = None
    b_rack: str = ""
    b_unit: int | None = None
    b_cage: int | None = None
    b_lane: int | None = None
    # The run measured along its route; `part_m` the sold length that covers it (empty
    # where the catalog has none, as for optics listed by reach).
    length_m: float | None = None
    media: str = ""
    part: str = ""
    part_m: float | None = None
    label: str = ""

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copy is most of the time of a 1M-GPU sheet.
        return {name: getattr(self, name) for name in _CABLE_FIELDS}


_CABLE_FIELDS = tuple(field.name for field in fields(Cable))


def node_port_name(port: Port, fabric: str) -> str:
    """A node's compute port as the inventory and the fabric name it: the RDMA device on
    InfiniBand, the interface on an Ethernet fabric."""
    return port.device if fabric == "infiniband" else port.interface


def _node_cables(spec: Cluster, catalog: Catalog, fabric: Fabric) -> Iterator[Cable]:
    devices: dict[str, list[str]] = {}
    speeds: dict[str, int] = {}
    kind = spec.network.fabric
    for pool in spec.pools_with_role("compute"):
        profile = spec.profiles[pool.profile]
        compute = ports(profile, catalog, "compute", kind)
        devices[pool.name] = [node_port_name(port, kind) for port in compute] or [
            "mlx5_0" if kind == "infiniband" else "rail0"
        ]
        speeds[pool.name] = min(
            (port.speed_gbps for port in compute), default=fabric.endpoint_speed_gbps
        )
    pool_of = {
        pool.hostname(n): pool.name
        for pool in spec.pools_with_role("compute")
        for n in range(1, pool.count + 1)
    }
    for host, nic, place in iter_placements(spec, fabric, catalog):
        pool_name = pool_of[host]
        yield Cable(
            cable=0,
            tier="node-leaf",
            a_device=host,
            a_port=1,
            a_hca=devices[pool_name][nic],
            b_device=place.leaf,
            b_port=place.port,
            rail=place.rail,
            island=place.island,
            speed_gbps=min(speeds[pool_name], fabric.port_speed_gbps),
        )


def _leaf_spine_cables(shape: _Shape, speed: int) -> Iterator[tuple[Cable, str, int]]:
    """Leaf-spine cables, and per spine how many of its ports they took (for core links)."""
    for island in range(shape.islands):
        nodes = shape.island_size(island)
        spines_of_leaf = _group_spines(shape, nodes)
        for group in _island_groups(shape, nodes):
            next_port = [1] * group.spines
            uplink = 0
            for leaf in range(group.first_leaf, group.first_leaf + group.leaves):
                down = leaf_downlinks(shape, nodes, leaf)
                for t in range(leaf_uplinks(shape, down, spines_of_leaf[leaf])):
                    spine = uplink % group.spines
                    port = next_port[spine]
                    next_port[spine] += 1
                    uplink += 1
                    yield (
                        Cable(
                            cable=0,
                            tier="leaf-spine",
                            a_device=leaf_name(island, leaf + 1),
                            a_port=shape.down + t + 1,
                            a_hca="",
                            b_device=spine_name(island, group.first_spine + spine + 1),
                            b_port=port,
                            rail=None,
                            island=island,
                            speed_gbps=speed,
                        ),
                        spine_name(island, group.first_spine + spine + 1),
                        port,
                    )


def _spine_core_cables(shape: _Shape, taken: dict[str, int], speed: int) -> Iterator[Cable]:
    """Each spine's core links on the ports after its leaf links, striped over the cores of
    its plane (one plane: the whole core), core switches numbered on across planes."""
    by_plane: list[list[tuple[str, int, int]]] = [[] for _ in range(shape.planes)]
    for island in range(shape.islands):
        groups = _island_groups(shape, shape.island_size(island))
        for plane, group in _group_planes(shape, groups):
            for n in range(group.spines):
                links = _spread(group.core_links, group.spines, n, from_end=True)
                if links:
                    name = spine_name(island, group.first_spine + n + 1)
                    by_plane[plane].append((name, island, links))
    numbered = 0
    for spines in by_plane:
        total = sum(links for _, _, links in spines)
        if not total:
            continue
        cores = -(-total // shape.spine_ports)
        next_port = [1] * cores
        g = 0
        for name, island, links in spines:
            first = taken.get(name, 0) + 1
            for t in range(links):
                core = g % cores
                yield Cable(
                    cable=0,
                    tier="spine-core",
                    a_device=name,
                    a_port=first + t,
                    a_hca="",
                    b_device=core_name(numbered + core + 1),
                    b_port=next_port[core],
                    rail=None,
                    island=island,
                    speed_gbps=speed,
                )
                next_port[core] += 1
                g += 1
        numbered += cores


def iter_cables(spec: Cluster, catalog: Catalog, fabric: Fabric) -> Iterator[Cable]:
    """Every cable of the compute fabric, numbered from 1: node links, then leaf-spine
    links, then spine-core links. Linear in cables; nothing is kept but per-spine counters."""
    leaf = catalog.switches[spec.network.topology.switch]
    spine = catalog.switches[spec.network.topology.spine_switch or spec.network.topology.switch]
    runs = _runs(spec, catalog, leaf.port_speed_gbps)
    shape = _shape(spec, catalog, runs)
    number = 0
    for cable in _node_cables(spec, catalog, fabric):
        number += 1
        yield _numbered(cable, number)
    taken: dict[str, int] = {}
    for cable, spine_switch, port in _leaf_spine_cables(
        shape, min(leaf.port_speed_gbps, spine.port_speed_gbps)
    ):
        number += 1
        taken[spine_switch] = max(taken.get(spine_switch, 0), port)
        yield _numbered(cable, number)
    for cable in _spine_core_cables(shape, taken, spine.port_speed_gbps):
        number += 1
        yield _numbered(cable, number)


def _numbered(cable: Cable, number: int, **placed: Any) -> Cable:
    # Positional, not dataclasses.replace: this runs once or twice per cable of a 1M-GPU
    # fabric, and replace was 40 % of placing one.
    return Cable(
        number,
        cable.tier,
        cable.a_device,
        cable.a_port,
        cable.a_hca,
        cable.b_device,
        cable.b_port,
        cable.rail,
        cable.island,
        cable.speed_gbps,
        **placed,
    )


def _cage(port: int, per_cage: int) -> tuple[int | None, int | None]:
    """A switch port's cage and lane, both from 1: twin-port OSFP ports 1, 2 are cage 1."""
    cage, lane = divmod(port - 1, per_cage)
    return cage + 1, lane + 1


def placed_cables(
    spec: Cluster, catalog: Catalog, fabric: Fabric, layout: RackLayout
) -> Iterator[Cable]:
    """`iter_cables` with both ends placed, each run measured, its media chosen and a label
    written; lengths in metres to the millimetre."""
    per_cage = {
        name: catalog.switches[model].ports_per_cage
        for name, model in (("leaf", fabric.leaf_model), ("spine", fabric.spine_model))
    }
    racks: dict[int, str] = {}
    routing = layout.routing
    # Runs repeat (same racks and units): a media choice is made once per kind of run.
    chosen: dict[tuple[float, int, bool], Media] = {}
    for cable in iter_cables(spec, catalog, fabric):
        a, b = layout.slots[cable.a_device], layout.slots[cable.b_device]
        a_rack = racks.get(a.rack) or racks.setdefault(a.rack, layout.rack_name(cable.a_device))
        b_rack = racks.get(b.rack) or racks.setdefault(b.rack, layout.rack_name(cable.b_device))
        run_mm = run_length_mm(
            layout.position(cable.a_device), layout.position(cable.b_device), routing
        )
        host_end = cable.tier == "node-leaf"
        key = (run_mm, cable.speed_gbps, host_end)
        media = chosen.get(key)
        if media is None:
            media = chosen.setdefault(
                key,
                choose_media(
                    run_mm, cable.speed_gbps, catalog.cables, switch_to_switch=not host_end
                ),
            )
        a_cage = (
            (None, None)
            if host_end
            else _cage(cable.a_port, per_cage["leaf" if cable.tier == "leaf-spine" else "spine"])
        )
        b_cage = _cage(cable.b_port, per_cage["leaf" if host_end else "spine"])
        a_port = cable.a_hca if host_end else f"P{cable.a_port}"
        yield _numbered(
            cable,
            cable.cable,
            a_rack=a_rack,
            a_unit=a.unit,
            a_cage=a_cage[0],
            a_lane=a_cage[1],
            b_rack=b_rack,
            b_unit=b.unit,
            b_cage=b_cage[0],
            b_lane=b_cage[1],
            length_m=round(run_mm / 1000, 3),
            media=media.kind,
            part=media.part,
            part_m=None if media.length_mm is None else media.length_mm / 1000,
            label=f"#{cable.cable} {a_rack} U{a.unit} {cable.a_device} {a_port} / "
            f"{b_rack} U{b.unit} {cable.b_device} P{cable.b_port}",
        )


def cable_totals(cables: Iterable[Cable]) -> dict[str, int]:
    """Cables by tier, in the plan's words: node_links, leaf_spine_links, spine_core_links."""
    counts = Counter(cable.tier for cable in cables)
    return {
        "node_links": counts["node-leaf"],
        "leaf_spine_links": counts["leaf-spine"],
        "spine_core_links": counts["spine-core"],
    }


@dataclass(slots=True)
class SheetTotals:
    """What a placed sheet adds up to, counted one cable at a time (`add`) so a sheet of
    millions streams: links by tier (the plan's figures), cables by media and by part with
    their metres, and the transceivers the optics need, cages rounded up per tier and
    direction as the plan counts them (the plan's figure is this with every cable optics)."""

    leaf_cage: int
    spine_cage: int
    links: Counter[str] = field(default_factory=Counter)
    media: Counter[str] = field(default_factory=Counter)
    parts: Counter[str] = field(default_factory=Counter)
    metres: dict[str, float] = field(default_factory=dict)
    optics: Counter[str] = field(default_factory=Counter)

    def add(self, cable: Cable) -> None:
        self.links[cable.tier] += 1
        self.media[cable.media] += 1
        self.parts[cable.part or f"{cable.media} (no catalogued part)"] += 1
        self.metres[cable.media] = self.metres.get(cable.media, 0.0) + (cable.length_m or 0.0)
        # Unknown media (no catalogued cable of the speed) counts as optics: never fewer
        # transceivers than the sheet may need.
        if cable.media in ("optics", "unknown"):
            self.optics[cable.tier] += 1

    def to_dict(self) -> dict[str, Any]:
        node, up, core = (self.optics[t] for t in ("node-leaf", "leaf-spine", "spine-core"))
        transceivers = sum(transceivers_by_tier(node, up, core, self.leaf_cage, self.spine_cage))
        return {
            "node_links": self.links["node-leaf"],
            "leaf_spine_links": self.links["leaf-spine"],
            "spine_core_links": self.links["spine-core"],
            "by_media": dict(sorted(self.media.items())),
            "by_part": dict(sorted(self.parts.items())),
            "metres_by_media": {k: round(v, 1) for k, v in sorted(self.metres.items())},
            "transceivers": transceivers,
        }


def sheet_totals(catalog: Catalog, fabric: Fabric) -> SheetTotals:
    return SheetTotals(
        leaf_cage=catalog.switches[fabric.leaf_model].ports_per_cage,
        spine_cage=catalog.switches[fabric.spine_model].ports_per_cage,
    )


def cabling_csv(cables: Iterable[Cable]) -> Iterator[str]:
    """The CSV, a header line then one line per cable (each ending in a newline)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    for cable in cables:
        buffer.seek(0)
        buffer.truncate()
        values = (getattr(cable, column) for column in CSV_COLUMNS)
        writer.writerow(["" if value is None else value for value in values])
        yield buffer.getvalue()
