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

The spec has no rack positions, so no row says a cable's reach or class (copper or
optics); the plan's transceiver count stays the conservative figure.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

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
)
from myriad.plan.model import Fabric
from myriad.plan.ports import Port, ports
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster

CableTier = Literal["node-leaf", "leaf-spine", "spine-core"]
CSV_COLUMNS = (
    "cable",
    "tier",
    "a_device",
    "a_port",
    "a_hca",
    "b_device",
    "b_port",
    "rail",
    "island",
    "speed_gbps",
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def _numbered(cable: Cable, number: int) -> Cable:
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
    )


def cable_totals(cables: Iterable[Cable]) -> dict[str, int]:
    """Cables by tier, in the plan's words: node_links, leaf_spine_links, spine_core_links."""
    counts = Counter(cable.tier for cable in cables)
    return {
        "node_links": counts["node-leaf"],
        "leaf_spine_links": counts["leaf-spine"],
        "spine_core_links": counts["spine-core"],
    }


def cabling_csv(cables: Iterable[Cable]) -> Iterator[str]:
    """The CSV, a header line then one line per cable (each ending in a newline)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    for cable in cables:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(
            [
                cable.cable,
                cable.tier,
                cable.a_device,
                cable.a_port,
                cable.a_hca,
                cable.b_device,
                cable.b_port,
                "" if cable.rail is None else cable.rail,
                "" if cable.island is None else cable.island,
                cable.speed_gbps,
            ]
        )
        yield buffer.getvalue()
