"""The compute fabric: islands of non-blocking fat-trees, their switches, links and placement.

Only compute nodes are on this fabric. Compute nodes are numbered from 0 across the compute
pools in pool order; node `i` belongs to island `i // island_nodes`, the same rule the
inventory uses (`myriad.plan.nodes`).

Every compute node is given `rails` endpoint slots: the most endpoints (compute NIC ports)
any compute profile has, or 1 for a profile without compute NICs. Slot `j` of a node is its
NIC port `j`; in a rail-optimized fabric it is rail `j`. Switches are sized for these slots
at `endpoint_speed_gbps` (the fastest compute profile's), so a pool with fewer endpoints
leaves its spare slots empty and never crowds another node's ports.

Shape of the fabric (REFERENCE.md "Fabric arithmetic", k = leaf ports):

- one island that fits one switch: that switch alone (one tier);
- one island of at most k²/2 endpoints: leaves with k/2 down- and k/2 up-links under
  spines (two tiers, non-blocking); under spines of s > k ports (a modular chassis such
  as a 576-port spine over 32-port top-of-rack leaves) at most k/2 x s endpoints, since
  each of the k/2 spines a leaf reaches links s leaves (`two_tier_capacity`);
- more islands: each island two-tier as above, its spines also linked to a shared core
  whose links carry the island's endpoint bandwidth divided by the inter-island
  oversubscription (three tiers);
- one island beyond that (at most k³/4) endpoints: pods of k/2 leaves, each pod's spines
  linked non-blocking to a core (three tiers).

A leaf under spines has one uplink per `island_oversubscription` endpoints plugged into
it (k/2 for a full, non-blocking leaf; a part-filled leaf fewer), and at least one to every
spine of its island (or pod), so any two leaves share a spine: a pool of 72 endpoints on
64-port leaves needs 72 leaf-spine links, not 8 x 32. Growing the island means adding
uplinks. Switches are counted by ports: a spine
has enough ports for its leaf and core links (core links at the spine's port speed), and
uplinks are striped over the switches above (uplink g goes to switch g mod count). Two
rules keep every island non-blocking and every island reachable:

- a leaf's k/2 uplinks must reach every spine of its island (or pod), so an island has
  at most k/2 spines. Under a core the spines share their ports with core links, which
  caps an island near k²/2 x r/(r+1) endpoints; rail-optimized leaves, filled one rail
  at a time, can outgrow k/2 spines a little under k²/2 endpoints too;
- a core switch links each island (or pod) at least once, so there are at most as many
  islands as the core switch has ports.

Where islands break these rules the plan still counts the fabric by ports (the figures
stay useful for a budget) and `fabric_limits` says what falls short, for the lints to
report. Shapes the arithmetic has no answer for (an island beyond both k³/4 and the
two-tier capacity, several islands beyond the two-tier capacity) raise FabricError.

Planes (`topology.planes`, rail-optimized only; Alibaba HPN's dual-plane design) split
the rails: NIC port j goes to plane j mod planes, so a dual-port NIC's two ports reach two
leaves in two planes. Each plane is shaped as its own fabric of rails/planes rails: its
leaves (numbered plane by plane) link only to its own spines, and its spines to a core of
its own, so a plane reaches two tiers with planes times the nodes one plane would. A plane
that fits one switch, or needs pods, is refused.

A ToR per rack (`topology.leaf_nodes`, Meta's AI zone: an RTSW per rack of two servers)
sizes a leaf by its rack, not its ports: the rack's ports down, ceil(down / island
oversubscription) up, the rest unused; an island (zone) is still one Clos, and its spines
(CTSW) can be stated (`topology.island_spines`, one per RTSW uplink) rather than counted
from the links; stated spines too few for the links are refused with the number needed.

Rails-only (`topology.rails_only`, Wang et al. 2023) drops the spine that joins rails: every
rail is a plane of its own, one switch where the rail's nodes fit one (mode "rails", one
tier), else leaves under that rail's spines (and a core per rail across islands).

NVIDIA's DGX SuperPOD builds each scalable unit whole: `topology.leaf_uplinks: full` cables
every leaf's uplinks whether or not its ports are populated, and rounds the spines up to a
divisor of a leaf's uplinks, so each leaf sends every spine the same number of links (16
spines for 3 SU, not the 12 the links fill). `topology.management_ports` (UFM) take leaf
ports the nodes leave free, counted apart from the compute cables. `topology.spares` are
switches on the shelf by layer, in no count above and drawing no power.

Each link is one cable with optics at both ends, the conservative figure: short in-rack
links often use copper, which needs none. A node's end takes one transceiver per NIC
port; a switch's end takes one per cage, and twin-port switches (QM9700: 32 OSFP cages
for 64 NDR ports; SN5600 split to 400G) carry two ports in one cage, as the catalog's
`ports_per_cage` says. Cages are counted per tier and direction, rounded up, and the
plan keeps each layer's count (node-leaf, leaf-spine, spine-core).

Placements and the switch tree are computed on demand, never stored in the plan, so
100,000 GPUs cost nothing until a renderer asks for them.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from myriad.errors import FabricError
from myriad.plan.model import Fabric, Island, LeafPlacement
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster, Pool, Profile

WATTS_PER_KW = 1000
# Dense, stable switch names: sorting by name keeps islands, then leaves, together.
LEAF_NAME = "is{island:02d}-leaf{number:03d}"
SPINE_NAME = "is{island:02d}-spine{number:03d}"
CORE_NAME = "core{number:03d}"

# "rails": rails-only with every rail on one switch of its own, no spines (one tier).
Mode = Literal["single", "rails", "two-tier", "islands", "pods"]
Tier = Literal["leaf", "spine", "core"]


def leaf_name(island: int, number: int) -> str:
    return LEAF_NAME.format(island=island, number=number)


def spine_name(island: int, number: int) -> str:
    return SPINE_NAME.format(island=island, number=number)


def core_name(number: int) -> str:
    return CORE_NAME.format(number=number)


def two_tier_capacity(radix: int, spine_ports: int, downlinks: int | None = None) -> int:
    """Endpoints of a non-blocking two-tier island of `radix`-port leaves under spines of
    `spine_ports` ports: k/2 spines (a leaf's k/2 uplinks reach each once), each spine
    linking one leaf per port, k/2 endpoints per leaf: k/2 x spine ports (REFERENCE.md's
    k²/2 where spines and leaves are one model).

    A modular chassis spine (576 ports under 32-port top-of-rack leaves) holds far more
    than k²/2; a spine smaller than the leaf is counted as k²/2 and its shortfall left to
    the mesh limit (`fabric_limits`), as before chassis spines were planned. A leaf that
    keeps `downlinks` ports for endpoints (fewer than k/2 under more uplinks) holds that many.
    """
    return (radix // 2 if downlinks is None else downlinks) * max(radix, spine_ports)


def three_tier_endpoints(radix: int) -> int:
    """REFERENCE.md: a non-blocking three-tier fat-tree of k-port switches: k³/4 endpoints."""
    return radix**3 // 4


# --- the compute nodes and their endpoints ------------------------------------------------


def endpoints_per_node(profile: Profile, catalog: Catalog) -> int:
    """Compute NIC ports of one node; a node without compute NICs has its one port."""
    group = profile.nics.compute
    if group is None:
        return 1
    return group.count * catalog.nics[group.model].ports


def endpoint_speed_gbps(profile: Profile, catalog: Catalog, port_speed_gbps: int) -> int:
    group = profile.nics.compute
    if group is None:
        return port_speed_gbps
    return min(catalog.nics[group.model].speed_gbps, port_speed_gbps)


@dataclass(frozen=True, slots=True)
class _Run:
    """A compute pool's stretch of the compute node numbering."""

    pool: Pool
    start: int
    endpoints: int
    speed_gbps: int


def _runs(spec: Cluster, catalog: Catalog, port_speed_gbps: int) -> tuple[_Run, ...]:
    runs: list[_Run] = []
    start = 0
    for pool in spec.pools_with_role("compute"):
        profile = spec.profiles[pool.profile]
        runs.append(
            _Run(
                pool,
                start,
                endpoints_per_node(profile, catalog),
                endpoint_speed_gbps(profile, catalog, port_speed_gbps),
            )
        )
        start += pool.count
    return tuple(runs)


def _iter_nodes(runs: Sequence[_Run], first: int, stop: int) -> Iterator[tuple[str, int]]:
    """(host name, endpoints) of compute nodes first..stop-1, without touching the rest."""
    starts = [run.start for run in runs]
    index = first
    position = bisect.bisect_right(starts, first) - 1
    while index < stop:
        run = runs[position]
        end = min(stop, run.start + run.pool.count)
        for node in range(index, end):
            yield run.pool.hostname(node - run.start + 1), run.endpoints
        index = end
        position += 1


# --- the shape: everything the counts and the tree derive from ------------------------------


@dataclass(frozen=True, slots=True)
class _Shape:
    kind: Literal["fat-tree", "rail-optimized"]
    mode: Mode
    radix: int
    spine_ports: int
    spine_speed_gbps: int
    rails: int
    speed_gbps: int
    nodes: int
    island_nodes: int
    oversubscription: float
    island_oversubscription: float
    planes: int = 1
    # Ports of a leaf under spines: `down` to endpoints, at most `up` to spines. k/2 each
    # at an island oversubscription of 1 or more; below 1, more up than down.
    down: int = 0
    up: int = 0
    # Spines of each island (each plane of it) as the design states them, or None: as few
    # as the links fill.
    island_spines: int | None = None
    # Every leaf cables all its uplinks, populated or not, split evenly over the spines.
    full_uplinks: bool = False

    @property
    def half(self) -> int:
        return self.radix // 2

    @property
    def plane_rails(self) -> int:
        return self.rails // self.planes

    @property
    def islands(self) -> int:
        return math.ceil(self.nodes / self.island_nodes)

    def island_size(self, island: int) -> int:
        return min(self.island_nodes, self.nodes - island * self.island_nodes)


def _mode(
    radix: int,
    spine_ports: int,
    down: int,
    rails: int,
    island_nodes: int,
    islands: int,
    *,
    lone: bool,
) -> Mode:
    """The shape by endpoint count (REFERENCE.md); `_shape` refines it by switch ports."""
    endpoints = island_nodes * rails
    two_tier = two_tier_capacity(radix, spine_ports, down)
    most = max(three_tier_endpoints(radix), two_tier)
    if endpoints > most:
        remedy = (
            f"make network.topology.island_nodes at most {most // rails} or use a "
            "higher-radix switch"
            if most // rails
            else "use a higher-radix switch"
        )
        reach = (
            f"{radix}-port switches connect at most {three_tier_endpoints(radix)} "
            "non-blocking (three tiers)"
            if three_tier_endpoints(radix) >= two_tier
            else f"{radix}-port leaves under {spine_ports}-port spines connect at most "
            f"{two_tier} non-blocking (two tiers)"
        )
        raise FabricError(
            f"an island of {island_nodes} nodes has {endpoints} endpoints; {reach}: {remedy}"
        )
    if islands == 1:
        if lone:
            return "single"
        return "two-tier" if endpoints <= two_tier else "pods"
    if endpoints > two_tier:
        most = two_tier // rails
        remedy = (
            f"make island_nodes at most {most} (two tiers per island)"
            if most
            else "use a higher-radix switch"
        )
        raise FabricError(
            f"islands of {island_nodes} nodes ({endpoints} endpoints) need three tiers of "
            f"{radix}-port switches each, and linking several such islands needs a fourth "
            f"tier, which Myriad does not plan: {remedy}, or put all compute nodes in one "
            "island"
        )
    return "islands"


def _shape(spec: Cluster, catalog: Catalog, runs: Sequence[_Run]) -> _Shape:
    topology = spec.network.topology
    leaf = catalog.switches[topology.switch]
    spine = catalog.switches[topology.spine_switch or topology.switch]
    nodes = sum(run.pool.count for run in runs)
    rails = max(run.endpoints for run in runs)
    island_nodes = min(topology.island_nodes or nodes, nodes)
    islands = math.ceil(nodes / island_nodes)
    # Rails-only: every rail is a plane of its own (Wang et al. 2023), whatever the NICs.
    planes = rails if topology.rails_only else topology.planes
    if not topology.rails_only:
        _check_planes(spec, catalog, planes)
    leaf_nodes = topology.leaf_nodes
    # A lone switch has no uplinks to split its ports with; a leaf per rack of leaf_nodes
    # is lone only where the one island fits one rack.
    lone = (
        islands == 1
        and island_nodes * (rails // planes) <= leaf.ports
        and (leaf_nodes is None or island_nodes <= leaf_nodes)
    )
    half = leaf.ports // 2
    if lone:
        down, up = half, half
    elif leaf_nodes is not None:
        per_node = rails if topology.kind == "fat-tree" else 1
        down, up = _rack_leaf_split(
            topology.switch, leaf.ports, leaf_nodes, per_node, topology.island_oversubscription
        )
    else:
        down, up = _leaf_split(leaf.ports, topology.island_oversubscription)
    # Planes are independent fabrics: each is shaped by its own share of the rails.
    mode = _mode(leaf.ports, spine.ports, down, rails // planes, island_nodes, islands, lone=lone)
    if mode == "single" and planes > 1 and topology.rails_only:
        # Each rail's nodes fit one switch: a switch per rail, every port down.
        mode, down, up = "rails", leaf.ports, 0
    if mode not in ("single", "rails") and (leaf.ports < 2 or spine.ports < 2):
        raise FabricError("switches of fewer than 2 ports cannot be linked into tiers")
    if topology.rails_only and mode == "pods":
        raise FabricError(
            f"network.topology.rails_only: a rail of {island_nodes} nodes is past the "
            f"{two_tier_capacity(leaf.ports, spine.ports, down)} endpoints two tiers of "
            f"{leaf.ports}-port leaves under {spine.ports}-port spines reach, and Myriad plans "
            "a rail as leaves under spines at most: make island_nodes smaller (rails of each "
            "island under a core of their own) or use switches with more ports"
        )
    if planes > 1 and mode in ("single", "pods"):
        raise FabricError(
            f"network.topology.planes {planes}: each plane is planned as leaves under spines "
            "(two tiers, or islands under a core); "
            + (
                f"an island of {island_nodes} nodes fits one switch per plane, which Myriad "
                "does not plan: use planes 1"
                if mode == "single"
                else f"an island of {island_nodes} nodes needs three tiers per plane: make "
                "island_nodes smaller or use switches with more ports"
            )
        )
    shape = _Shape(
        kind=topology.kind,
        mode=mode,
        radix=leaf.ports,
        spine_ports=spine.ports,
        spine_speed_gbps=spine.port_speed_gbps,
        rails=rails,
        speed_gbps=max(run.speed_gbps for run in runs),
        nodes=nodes,
        island_nodes=island_nodes,
        oversubscription=topology.inter_island_oversubscription,
        island_oversubscription=topology.island_oversubscription,
        planes=planes,
        down=down,
        up=up,
        island_spines=topology.island_spines,
        full_uplinks=topology.leaf_uplinks == "full",
    )
    _check_island_spines(shape)
    return shape


def _leaf_split(radix: int, ratio: float) -> tuple[int, int]:
    """(ports down to endpoints, most ports up to spines) of a leaf under spines.

    At a ratio of 1 or more, k/2 each (the uplinks a leaf uses follow its endpoints). Below
    1 a leaf has more uplinks than downlinks: d down and ceil(d / ratio) up must fit in k,
    so d = floor(k x ratio / (1 + ratio)), the rest up (Meta's RTSW, under-subscribed).
    """
    if ratio >= 1:
        return radix // 2, radix // 2
    down = math.floor(radix * ratio / (1 + ratio))
    if down < 1:
        raise FabricError(
            f"network.topology.island_oversubscription {ratio:g} leaves a {radix}-port leaf "
            "no port for endpoints once its uplinks are taken: use a ratio nearer 1 or a "
            "switch with more ports"
        )
    return down, radix - down


def _rack_leaf_split(
    model: str, radix: int, leaf_nodes: int, per_node: int, ratio: float
) -> tuple[int, int]:
    """(ports down, most ports up) of a top-of-rack leaf under `leaf_nodes` nodes of
    `per_node` ports on it: the rack's ports down, the rest free for uplinks, which must hold
    ceil(down / ratio) (Meta's RTSW: 16 GPUs down, 18 up at 1:1.125)."""
    down = leaf_nodes * per_node
    wanted = math.ceil(down / ratio)
    if down + wanted > radix:
        most = math.floor(radix * ratio / (1 + ratio)) // per_node
        remedy = f"make leaf_nodes at most {most}" if most else "use a leaf with more ports"
        raise FabricError(
            f"network.topology.leaf_nodes {leaf_nodes}: a leaf takes {down} endpoint port(s) "
            f"and, at island_oversubscription {ratio:g}, {wanted} uplink(s): {down + wanted} "
            f"ports, but {model} has {radix}: {remedy}, a higher island_oversubscription, or "
            "a leaf with more ports"
        )
    return down, radix - down


def _check_island_spines(shape: _Shape) -> None:
    """Stated spines must be a two-tier island's and hold its leaf and core links."""
    stated = shape.island_spines
    if stated is None:
        return
    if shape.mode in ("single", "rails", "pods"):
        raise FabricError(
            f"network.topology.island_spines {stated}: an island of {shape.island_nodes} "
            + (
                "nodes fits one switch (per rail), which has no spines: remove island_spines"
                if shape.mode in ("single", "rails")
                else "nodes needs three tiers (pods), whose spines Myriad counts itself: "
                "remove island_spines or make island_nodes smaller"
            )
        )
    needed = max(group.spines for group in _island_groups(shape, shape.island_nodes))
    if needed > stated:
        raise FabricError(
            f"network.topology.island_spines {stated}: an island's leaf and core links need "
            f"{needed} spines of {shape.spine_ports} ports: make island_spines at least "
            f"{needed} or use spines with more ports"
        )


def _spares(switches: int, fraction: float) -> int:
    """Spares of a layer: the fraction of its switches, rounded up (none for no switches).
    Rounded to 9 places first, so 0.02 x 1,500 is 30, not 31 from float error."""
    return math.ceil(round(switches * fraction, 9))


def transceivers_by_tier(
    node_links: int, leaf_spine_links: int, core_links: int, leaf_cage: int, spine_cage: int
) -> tuple[int, int, int]:
    """Transceivers for optical links of each tier (node-leaf, leaf-spine, spine-core).
    Node ends: one per NIC port. Switch ends: one per cage, by tier and direction, rounded
    up."""
    return (
        node_links + math.ceil(node_links / leaf_cage),
        math.ceil(leaf_spine_links / leaf_cage) + math.ceil(leaf_spine_links / spine_cage),
        2 * math.ceil(core_links / spine_cage),
    )


def _check_management_ports(wanted: int, leaves: int, shape: _Shape, endpoints: int) -> None:
    """Management appliances (UFM) plug into leaf ports the nodes leave free."""
    down = shape.radix if shape.mode == "single" else shape.down
    free = leaves * down - endpoints
    if wanted > free:
        raise FabricError(
            f"network.topology.management_ports {wanted}: the leaves' {leaves * down} "
            f"endpoint ports hold {endpoints} node ports, leaving {free} free: leave nodes out "
            f"for the management ports (NVIDIA's DGX SuperPOD builds an SU of 32 DGX with 31, "
            "its UFM in the last one's ports), or use fewer management ports"
        )


def _check_planes(spec: Cluster, catalog: Catalog, planes: int) -> None:
    """Every compute NIC's ports split evenly over the planes (port p to plane p mod planes),
    so each node has the same number of rails in every plane."""
    if planes == 1:
        return
    for pool in spec.pools_with_role("compute"):
        group = spec.profiles[pool.profile].nics.compute
        ports = catalog.nics[group.model].ports if group is not None else 1
        if ports % planes:
            what = f"{group.model} has {ports} port(s)" if group else "it has no compute NICs"
            raise FabricError(
                f"network.topology.planes {planes}: compute pool {pool.name}'s NIC ports "
                f"cannot split over {planes} planes ({what}); planes take ports from the "
                "NIC, so use NICs with a multiple of planes ports, or planes 1"
            )


def rail_position(rail: int, rails: int, planes: int) -> int:
    """Where rail `rail` (a node's NIC port) comes in the leaf numbering: plane by plane,
    rail j in plane j mod planes (the identity with one plane)."""
    return (rail % planes) * (rails // planes) + rail // planes


def _rail_at(position: int, rails: int, planes: int) -> int:
    plane, index = divmod(position, rails // planes)
    return index * planes + plane


def _meshed(shape: _Shape, nodes: int) -> bool:
    """A leaf's uplinks (k/2) reach every spine of its group only if there are at most as
    many spines."""
    return all(group.spines <= shape.up for group in _island_groups(shape, nodes))


def _largest_meshed_island(shape: _Shape) -> int:
    low, high = 0, shape.nodes + 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _meshed(shape, middle) else (low, middle)
    return low


@dataclass(frozen=True, slots=True)
class FabricLimit:
    """A way the counted fabric falls short of a true Clos; the lints decide the severity.

    `needed` and `available` are switches or ports, as `what` says.
    """

    what: Literal["spines-per-group", "groups-per-core"]
    message: str
    suggestion: str
    needed: int
    available: int


def _mesh_limit(shape: _Shape) -> FabricLimit | None:
    """Spines beyond a leaf's k/2 uplinks: some leaf pairs share no spine (not non-blocking).

    With a core above, an island's spines share their ports with core links, so k/2
    spines carry about k²/2 x r/(r+1) endpoints, fewer than two tiers alone.
    """
    groups = _island_groups(shape, shape.island_nodes)
    needed = max((group.spines for group in groups), default=0)
    if needed <= shape.up:
        return None
    most = _largest_meshed_island(shape)
    group = (
        f"a pod of {shape.half} leaves"
        if shape.mode == "pods"
        else f"an island of {shape.island_nodes} nodes"
        if shape.planes == 1
        else f"each of the {shape.planes} planes of an island of {shape.island_nodes} nodes"
    )
    return FabricLimit(
        what="spines-per-group",
        message=(
            f"{group} needs {needed} spines for its leaf and core links, but a leaf's "
            f"{shape.up} uplinks reach only {shape.up}: some leaves share no spine, so "
            "traffic between them is not non-blocking"
        ),
        suggestion=_mesh_suggestion(shape, most),
        needed=needed,
        available=shape.up,
    )


def _mesh_suggestion(shape: _Shape, most: int) -> str:
    if shape.mode != "islands" or not most:
        return "switches with more ports"
    islands = math.ceil(shape.nodes / most)
    if islands > shape.spine_ports:
        return (
            f"switches with more ports, or a higher inter_island_oversubscription: islands "
            f"of at most {most} nodes would number {islands}, more than a core switch's "
            f"{shape.spine_ports} ports reach"
        )
    return (
        f"islands of at most {most} nodes, a higher inter_island_oversubscription, or "
        "spine switches with more ports"
    )


def _reach_limit(shape: _Shape) -> FabricLimit | None:
    """A core switch links every island (or pod) once, so it has at most one per port."""
    if shape.mode == "islands":
        groups, what = shape.islands, "islands"
    elif shape.mode == "pods":
        groups, what = len(_island_groups(shape, shape.island_nodes)), "pods"
    else:
        return None
    if groups <= shape.spine_ports:
        return None
    fewest = math.ceil(shape.nodes / shape.spine_ports)
    return FabricLimit(
        what="groups-per-core",
        message=(
            f"the fabric has {groups} {what}, but a core switch of {shape.spine_ports} ports "
            f"links at most {shape.spine_ports}: joining the rest needs a fourth tier"
        ),
        suggestion=(
            f"islands of at least {fewest} nodes"
            if shape.mode == "islands" and fewest <= _largest_meshed_island(shape)
            else "switches with more ports"
        ),
        needed=groups,
        available=shape.spine_ports,
    )


def fabric_limits(spec: Cluster, catalog: Catalog) -> tuple[FabricLimit, ...]:
    """Where the planned fabric is counted by ports but is not a strict Clos network.

    The plan still counts such a fabric (switches, cables and power stay useful for a
    budget); these say what a builder would have to change.
    """
    port_speed = catalog.switches[spec.network.topology.switch].port_speed_gbps
    runs = _runs(spec, catalog, port_speed)
    if not runs:
        return ()
    shape = _shape(spec, catalog, runs)
    return tuple(limit for limit in (_mesh_limit(shape), _reach_limit(shape)) if limit is not None)


def _island_leaves(shape: _Shape, nodes: int) -> int:
    if shape.mode == "single":
        return 1
    if shape.kind == "fat-tree":
        return math.ceil(nodes * shape.rails / shape.down)
    return shape.rails * math.ceil(nodes / shape.down)


@dataclass(frozen=True, slots=True)
class _Group:
    """Leaves meshed with spines: a two-tier island, or one pod of a three-tier island."""

    first_leaf: int
    leaves: int
    first_spine: int
    spines: int
    leaf_spine_links: int
    core_links: int


def _island_core_links(shape: _Shape, nodes: int) -> int:
    """A plane of the island's share of the core: its endpoint bandwidth over the
    oversubscription (the whole island's with one plane)."""
    gbps = nodes * shape.plane_rails * shape.speed_gbps / shape.oversubscription
    return math.ceil(gbps / shape.spine_speed_gbps)


def leaf_downlinks(shape: _Shape, nodes: int, leaf: int) -> int:
    """Endpoint slots on leaf `leaf` (from 0) of an island of `nodes` nodes."""
    if shape.kind == "fat-tree":
        return min(shape.down, nodes * shape.rails - leaf * shape.down)
    block = leaf % math.ceil(nodes / shape.down)
    return min(shape.down, nodes - block * shape.down)


def _downlink_counts(shape: _Shape, nodes: int, first: int, leaves: int) -> Counter[int]:
    """How many of leaves first..first+leaves-1 carry each number of endpoint slots."""
    if shape.kind == "fat-tree" or leaves <= 2 * shape.down:
        return Counter(leaf_downlinks(shape, nodes, leaf) for leaf in range(first, first + leaves))
    # Whole rails (an island's, or a plane's): per rail, full leaves and perhaps one
    # part-filled.
    rails = leaves // math.ceil(nodes / shape.down)
    full, rest = divmod(nodes, shape.down)
    counts = Counter({shape.down: full * rails})
    if rest:
        counts[rest] += rails
    return counts


def leaf_uplinks(shape: _Shape, downlinks: int, spines: int) -> int:
    """Uplinks of a leaf: its endpoints over the island oversubscription, at least one
    to each spine of its group, at most the ports above the downlinks (k/2 at a ratio of
    1 or more)."""
    plugged = shape.down if shape.full_uplinks else downlinks
    wanted = math.ceil(plugged / shape.island_oversubscription)
    return min(shape.up, max(wanted, spines))


def _even_spines(shape: _Shape, needed: int) -> int:
    """With full uplinks, the fewest spines at or above `needed` that a leaf's uplinks split
    over evenly (a divisor of them): NVIDIA's 3-SU SuperPOD has 16 spines for its 768
    leaf-spine links, not 12, so each leaf's 32 uplinks go 2 to every spine."""
    if not shape.full_uplinks:
        return needed
    uplinks = min(shape.up, math.ceil(shape.down / shape.island_oversubscription))
    return next((d for d in range(needed, uplinks + 1) if uplinks % d == 0), needed)


def _meshed_group(
    shape: _Shape, downlinks: Counter[int], core: int, spine_ports: int
) -> tuple[int, int]:
    """(spines, leaf-spine links) of leaves meshed with spines that also carry `core` links.

    More spines need more uplinks (one to each), which may need more spines: the fixed
    point, reached in a few steps since uplinks stop at k/2.
    """
    spines = shape.island_spines or 0
    while True:
        links = sum(n * leaf_uplinks(shape, down, spines) for down, n in downlinks.items())
        needed = _even_spines(shape, math.ceil((links + core) / spine_ports))
        if needed <= spines:
            return spines, links
        spines = needed


def _island_groups(shape: _Shape, nodes: int) -> tuple[_Group, ...]:
    leaves = _island_leaves(shape, nodes)
    if shape.mode in ("single", "rails"):
        return ()
    if shape.mode == "pods":
        return tuple(_pods(shape, nodes, leaves))
    core = _island_core_links(shape, nodes) if shape.mode == "islands" else 0
    # One group per plane: a plane's leaves (numbered plane by plane) under its own spines.
    per_plane = leaves // shape.planes
    groups: list[_Group] = []
    first_spine = 0
    for plane in range(shape.planes):
        downlinks = _downlink_counts(shape, nodes, plane * per_plane, per_plane)
        spines, links = _meshed_group(shape, downlinks, core, shape.spine_ports)
        groups.append(_Group(plane * per_plane, per_plane, first_spine, spines, links, core))
        first_spine += spines
    return tuple(groups)


def _group_planes(shape: _Shape, groups: Sequence[_Group]) -> Iterator[tuple[int, _Group]]:
    """(plane, group) of an island's groups: with planes, one group each, in plane order;
    otherwise every group (pods included) in plane 0."""
    for index, group in enumerate(groups):
        yield (index if shape.planes > 1 else 0), group


def _pods(shape: _Shape, nodes: int, leaves: int) -> Iterator[_Group]:
    """k/2 leaves per pod; each pod spine has half its ports down, half up, non-blocking."""
    spine_down = shape.spine_ports // 2
    first_spine = 0
    for first in range(0, leaves, shape.half):
        count = min(shape.half, leaves - first)
        downlinks = _downlink_counts(shape, nodes, first, count)
        spines, links = _meshed_group(shape, downlinks, 0, spine_down)
        yield _Group(first, count, first_spine, spines, links, links)
        first_spine += spines


# --- the plan's fabric --------------------------------------------------------------------


def plan_fabric(spec: Cluster, catalog: Catalog) -> Fabric | None:
    """The compute fabric, or None when no pool has role compute."""
    topology = spec.network.topology
    leaf = catalog.switches[topology.switch]
    spine_model = topology.spine_switch or topology.switch
    spine = catalog.switches[spine_model]
    runs = _runs(spec, catalog, leaf.port_speed_gbps)
    if not runs:
        return None
    shape = _shape(spec, catalog, runs)
    islands: list[Island] = []
    leaf_spine_links = 0
    # Core links by plane: each plane has a core of its own (one plane: the whole core).
    plane_core_links = [0] * shape.planes
    for index in range(shape.islands):
        nodes = shape.island_size(index)
        groups = _island_groups(shape, nodes)
        islands.append(
            Island(index, nodes, _island_leaves(shape, nodes), sum(g.spines for g in groups))
        )
        leaf_spine_links += sum(g.leaf_spine_links for g in groups)
        for plane, group in _group_planes(shape, groups):
            plane_core_links[plane] += group.core_links
    leaves = sum(island.leaves for island in islands)
    spines = sum(island.spines for island in islands)
    core_links = sum(plane_core_links)
    core = sum(math.ceil(links / shape.spine_ports) for links in plane_core_links)
    endpoints = sum(run.pool.count * run.endpoints for run in runs)
    _check_management_ports(topology.management_ports, leaves, shape, endpoints)
    cables = endpoints + leaf_spine_links + core_links
    slot_gbps = shape.rails * shape.speed_gbps
    inside = shape.island_oversubscription if shape.mode not in ("single", "rails") else 1.0
    # More uplinks than downlinks (a ratio below 1) adds no bisection past the endpoints'.
    island_bisection = shape.island_nodes * slot_gbps / 2 / max(inside, 1.0)
    cluster_oversubscription = max(inside, 1.0) * (
        shape.oversubscription if shape.islands > 1 else 1.0
    )
    node_optics, leaf_spine_optics, core_optics = transceivers_by_tier(
        endpoints, leaf_spine_links, core_links, leaf.ports_per_cage, spine.ports_per_cage
    )
    return Fabric(
        kind=topology.kind,
        fabric=spec.network.fabric,
        leaf_model=topology.switch,
        spine_model=spine_model,
        radix=shape.radix,
        port_speed_gbps=leaf.port_speed_gbps,
        endpoint_speed_gbps=shape.speed_gbps,
        endpoints=endpoints,
        rails=shape.rails,
        island_nodes=shape.island_nodes,
        islands=tuple(islands),
        tiers={"single": 1, "rails": 1, "two-tier": 2, "islands": 3, "pods": 3}[shape.mode],
        leaves=leaves,
        spines=spines,
        core_switches=core,
        node_links=endpoints,
        leaf_spine_links=leaf_spine_links,
        spine_core_links=core_links,
        cables=cables,
        transceivers=node_optics + leaf_spine_optics + core_optics,
        node_transceivers=node_optics,
        leaf_spine_transceivers=leaf_spine_optics,
        spine_core_transceivers=core_optics,
        ports_per_cage=leaf.ports_per_cage,
        leaf_downlinks=shape.down if shape.mode != "single" else shape.radix,
        planes=shape.planes,
        rails_only=topology.rails_only,
        management_links=topology.management_ports,
        spare_leaves=_spares(leaves, topology.spares.leaf),
        spare_spines=_spares(spines, topology.spares.spine),
        spare_core=_spares(core, topology.spares.core),
        injection_gbps_per_node=float(max(run.endpoints * run.speed_gbps for run in runs)),
        island_bisection_gbps=island_bisection,
        bisection_gbps=shape.nodes * slot_gbps / 2 / cluster_oversubscription,
        inter_island_oversubscription=topology.inter_island_oversubscription,
        island_oversubscription=inside,
        switch_kw=(leaves * leaf.power_w + (spines + core) * spine.power_w) / WATTS_PER_KW,
    )


# --- placement ----------------------------------------------------------------------------


def leaf_placement(fabric: Fabric, node_index: int, nic_index: int) -> LeafPlacement:
    """Where endpoint `nic_index` of compute node `node_index` (both from 0) plugs in.

    Leaves are numbered from 1 inside their island, rail by rail in a rail-optimized
    fabric; ports from 1, down-links first (uplinks take the ports above k/2). `rail` is
    the node-local NIC port; in a fat-tree it names the HCA but does not pin a leaf.
    """
    if not 0 <= nic_index < fabric.rails:
        raise IndexError(f"NIC {nic_index} is not one of the {fabric.rails} per node")
    island = node_index // fabric.island_nodes
    local = node_index - island * fabric.island_nodes
    if node_index < 0 or island >= len(fabric.islands) or local >= fabric.islands[island].nodes:
        raise IndexError(f"compute node {node_index} is not in the fabric")
    half = fabric.leaf_downlinks
    if fabric.tiers == 1 and fabric.planes == 1:
        leaf, port = 0, local * fabric.rails + nic_index
    elif fabric.kind == "fat-tree":
        slot = local * fabric.rails + nic_index
        leaf, port = divmod(slot, half)
    else:
        per_rail = math.ceil(fabric.islands[island].nodes / half)
        block, port = divmod(local, half)
        leaf = rail_position(nic_index, fabric.rails, fabric.planes) * per_rail + block
    return LeafPlacement(
        island=island, leaf=leaf_name(island, leaf + 1), port=port + 1, rail=nic_index
    )


@dataclass(frozen=True, slots=True)
class RailLeaves:
    """How the leaves carry each rail (endpoint slot `j` of every node): `per_rail` leaves
    hold rail j's ports, numbered from 0 across the islands, each at most `hosts` of them.

    A routed (L3) RoCE fabric gives each of these leaves a subnet of the rail's own and makes
    the leaf the hosts' gateway (plan/addresses.py). In a fat-tree a leaf carries several
    rails' ports, and a subnet for each.
    """

    per_rail: int
    hosts: int
    fabric: Fabric

    def place(self, node_index: int, rail: int) -> tuple[int, int]:
        """(the rail's leaf, the node's slot on it) of compute node `node_index`'s port `rail`;
        the same leaf as leaf_placement names."""
        fabric = self.fabric
        half = fabric.leaf_downlinks
        island, local = divmod(node_index, fabric.island_nodes)
        if fabric.kind == "rail-optimized":
            block, slot = divmod(local, half)
            return island * math.ceil(fabric.island_nodes / half) + block, slot
        leaf = (local * fabric.rails + rail) // half
        # The island's first node with port `rail` on this leaf: ceil((leaf*half - rail)/rails).
        first = -((rail - leaf * half) // fabric.rails)
        return island * fabric.islands[0].leaves + leaf, local - first


def rail_leaves(fabric: Fabric) -> RailLeaves | None:
    """The leaves of each rail, or None where every rail is on one leaf (nothing to route)."""
    if fabric.tiers == 1:
        return None
    half = fabric.leaf_downlinks
    if fabric.kind == "rail-optimized":
        per_rail = sum(math.ceil(island.nodes / half) for island in fabric.islands)
        hosts = min(half, fabric.island_nodes)
    else:
        per_rail = sum(island.leaves for island in fabric.islands)
        hosts = min(math.ceil(half / fabric.rails), fabric.island_nodes)
    return RailLeaves(per_rail, hosts, fabric) if per_rail > 1 else None


def _endpoints_by_profile(spec: Cluster, catalog: Catalog) -> dict[str, int]:
    profiles = dict.fromkeys(pool.profile for pool in spec.pools_with_role("compute"))
    return {name: endpoints_per_node(spec.profiles[name], catalog) for name in profiles}


def iter_placements(
    spec: Cluster, fabric: Fabric, catalog: Catalog
) -> Iterator[tuple[str, int, LeafPlacement]]:
    """(host name, NIC port, placement) of every compute endpoint, in pool order: each node
    with its own profile's endpoints (the catalog's), so pools may differ in their NICs."""
    endpoints = _endpoints_by_profile(spec, catalog)
    index = 0
    for pool in spec.pools_with_role("compute"):
        count = endpoints[pool.profile]
        for number in range(1, pool.count + 1):
            host = pool.hostname(number)
            for nic in range(count):
                yield host, nic, leaf_placement(fabric, index, nic)
            index += 1


# --- the switch tree (for Slurm topology.conf and diagrams) ---------------------------------


@dataclass(frozen=True, slots=True)
class TreeSwitch:
    """One switch of the tree: leaves list host names, spines leaves, core switches spines.

    In a rail-optimized fabric a node is under one leaf per rail. A spine lists every leaf
    that has a link to it, a core switch every spine; counts are links, `ports` the radix.
    """

    name: str
    tier: Tier
    island: int | None
    nodes: tuple[str, ...]
    switches: tuple[str, ...]
    downlinks: int
    uplinks: int
    ports: int


def _stripe(lowers: Iterable[tuple[str, int]], uppers: int) -> list[list[str]]:
    """Uplink g (counted over all lowers in order) goes to upper g mod uppers."""
    members: list[list[str]] = [[] for _ in range(uppers)]
    offset = 0
    for name, uplinks in lowers:
        reached = (
            range(uppers) if uplinks >= uppers else ((offset + t) % uppers for t in range(uplinks))
        )
        for upper in reached:
            members[upper].append(name)
        offset += uplinks
    return members


def _spread(total: int, parts: int, index: int, *, from_end: bool = False) -> int:
    """Share `index` of `total` split as evenly as possible over `parts`."""
    base, extra = divmod(total, parts)
    gets_extra = index >= parts - extra if from_end else index < extra
    return base + int(gets_extra)


def _leaf_members(
    shape: _Shape, runs: Sequence[_Run], island: int, leaf: int
) -> tuple[tuple[str, ...], int]:
    """Host names under leaf `leaf` (from 0) of `island`, and the endpoints they plug in."""
    first = island * shape.island_nodes
    nodes = shape.island_size(island)
    if shape.mode == "single":
        members = list(_iter_nodes(runs, first, first + nodes))
        return tuple(h for h, _ in members), sum(e for _, e in members)
    if shape.kind == "rail-optimized":
        per_rail = math.ceil(nodes / shape.down)
        position, block = divmod(leaf, per_rail)
        rail = _rail_at(position, shape.rails, shape.planes)
        start = first + block * shape.down
        stop = min(start + shape.down, first + nodes)
        on_rail = tuple(h for h, e in _iter_nodes(runs, start, stop) if e > rail)
        return on_rail, len(on_rail)
    slots = range(leaf * shape.down, min((leaf + 1) * shape.down, nodes * shape.rails))
    start, stop = first + slots.start // shape.rails, first + (slots.stop - 1) // shape.rails + 1
    hosts: list[str] = []
    plugged = 0
    for offset, (host, endpoints) in enumerate(_iter_nodes(runs, start, stop)):
        node_slot = (start - first + offset) * shape.rails
        here = len(range(max(node_slot, slots.start), min(node_slot + endpoints, slots.stop)))
        if here:
            hosts.append(host)
            plugged += here
    return tuple(hosts), plugged


def _group_spines(shape: _Shape, nodes: int) -> list[int]:
    """Spines of the group each leaf of an island belongs to, by leaf."""
    spines: list[int] = []
    for group in _island_groups(shape, nodes):
        spines.extend([group.spines] * group.leaves)
    return spines


def _leaf_uplink_list(shape: _Shape, island: int) -> list[tuple[str, int]]:
    nodes = shape.island_size(island)
    return [
        (
            leaf_name(island, leaf + 1),
            leaf_uplinks(shape, leaf_downlinks(shape, nodes, leaf), spines),
        )
        for leaf, spines in enumerate(_group_spines(shape, nodes))
    ]


def _iter_leaves(shape: _Shape, runs: Sequence[_Run]) -> Iterator[TreeSwitch]:
    for island in range(shape.islands):
        nodes = shape.island_size(island)
        spines = _group_spines(shape, nodes)
        for leaf in range(_island_leaves(shape, nodes)):
            hosts, plugged = _leaf_members(shape, runs, island, leaf)
            uplinks = (
                0
                if shape.mode in ("single", "rails")
                else leaf_uplinks(shape, leaf_downlinks(shape, nodes, leaf), spines[leaf])
            )
            yield TreeSwitch(
                name=leaf_name(island, leaf + 1),
                tier="leaf",
                island=island,
                nodes=hosts,
                switches=(),
                downlinks=plugged,
                uplinks=uplinks,
                ports=shape.radix,
            )


def _iter_spines(shape: _Shape) -> Iterator[TreeSwitch]:
    for island in range(shape.islands):
        uplinks = _leaf_uplink_list(shape, island)
        for group in _island_groups(shape, shape.island_size(island)):
            leaves = uplinks[group.first_leaf : group.first_leaf + group.leaves]
            for n, members in enumerate(_stripe(leaves, group.spines)):
                # Core links fill spines from the end, leaf links from the start, so no
                # spine gets both remainders and every spine stays within its ports.
                yield TreeSwitch(
                    name=spine_name(island, group.first_spine + n + 1),
                    tier="spine",
                    island=island,
                    nodes=(),
                    switches=tuple(members),
                    downlinks=_spread(group.leaf_spine_links, group.spines, n),
                    uplinks=_spread(group.core_links, group.spines, n, from_end=True),
                    ports=shape.spine_ports,
                )


def _spine_planes(shape: _Shape) -> Iterator[int]:
    """The plane of each spine, in `_iter_spines` order."""
    for island in range(shape.islands):
        groups = _island_groups(shape, shape.island_size(island))
        for plane, group in _group_planes(shape, groups):
            for _ in range(group.spines):
                yield plane


def _iter_core(shape: _Shape, spines: Iterable[TreeSwitch]) -> Iterator[TreeSwitch]:
    """Core switches plane by plane (one plane: the whole core), numbered on across planes;
    a plane's spines link only to its own core switches."""
    by_plane: list[list[tuple[str, int]]] = [[] for _ in range(shape.planes)]
    for spine, plane in zip(spines, _spine_planes(shape), strict=True):
        if spine.uplinks:
            by_plane[plane].append((spine.name, spine.uplinks))
    number = 0
    for uplinks in by_plane:
        total = sum(links for _, links in uplinks)
        if not total:
            continue
        cores = math.ceil(total / shape.spine_ports)
        for n, members in enumerate(_stripe(uplinks, cores)):
            number += 1
            yield TreeSwitch(
                name=core_name(number),
                tier="core",
                island=None,
                nodes=(),
                switches=tuple(members),
                downlinks=_spread(total, cores, n),
                uplinks=0,
                ports=shape.spine_ports,
            )


def iter_switch_tree(spec: Cluster, catalog: Catalog) -> Iterator[TreeSwitch]:
    """Leaves (with host names), then spines (with leaves), then core (with spines).

    Linear in links: every name appears once per link at most, and leaves are produced
    one at a time.
    """
    port_speed = catalog.switches[spec.network.topology.switch].port_speed_gbps
    runs = _runs(spec, catalog, port_speed)
    if not runs:
        return
    shape = _shape(spec, catalog, runs)
    yield from _iter_leaves(shape, runs)
    yield from _iter_spines(shape)
    yield from _iter_core(shape, _iter_spines(shape))
