"""Properties every planned fabric keeps, over switch radix, NICs, islands and pool mixes.

Switches and NICs are made up in each spec's own catalog, so the search covers radices the
shipped catalog lacks. Sizes are drawn mostly within what the planner builds (an island at
most k³/4 endpoints; several islands at most k²/2 each); shapes it still refuses are
skipped here and the refusals have their own tests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from myriad.plan import (
    FabricError,
    TreeSwitch,
    fabric_limits,
    iter_placements,
    iter_switch_tree,
    plan_fabric,
)
from myriad.plan.fabric import rail_position, three_tier_endpoints, two_tier_capacity
from myriad.plan.model import Fabric
from myriad.spec import LoadedSpec

from spec_builder import cluster, gpu_profile, made_up_nic, made_up_switch

MAX_NODES = 150
SPEED = 400


@dataclass(frozen=True)
class Case:
    kind: str
    radix: int
    spine_radix: int
    nics: int
    ports: int
    small_nics: int | None
    small_nodes: int
    nodes: int
    island_nodes: int | None
    oversubscription: float
    island_oversubscription: float = 1.0
    planes: int = 1

    @property
    def rails(self) -> int:
        return self.nics * self.ports

    def with_nodes(self, nodes: int) -> Case:
        return Case(**{**self.__dict__, "nodes": nodes})

    def load(self) -> LoadedSpec:
        profiles: dict[str, dict[str, Any]] = {
            "big": gpu_profile(gpu=None, nic="TEST-NIC", nics=self.nics)
        }
        pools = [{"name": "big", "profile": "big", "count": self.nodes, "role": "compute"}]
        if self.small_nodes:
            nic = "TEST-NIC" if self.small_nics else None
            profiles["small"] = gpu_profile(gpu=None, nic=nic, nics=self.small_nics or 1)
            pools.append(
                {"name": "small", "profile": "small", "count": self.small_nodes, "role": "compute"}
            )
        topology: dict[str, Any] = {
            "kind": self.kind,
            "switch": "TEST-LEAF",
            "spine_switch": "TEST-SPINE",
            "inter_island_oversubscription": self.oversubscription,
            "island_oversubscription": self.island_oversubscription,
            "planes": self.planes,
        }
        if self.island_nodes is not None:
            topology["island_nodes"] = self.island_nodes
        catalog = {
            "switches": {
                "TEST-LEAF": made_up_switch(self.radix, SPEED),
                "TEST-SPINE": made_up_switch(self.spine_radix, SPEED),
            },
            "nics": {"TEST-NIC": made_up_nic(self.ports, SPEED)},
        }
        return cluster(profiles=profiles, pools=pools, topology=topology, catalog=catalog)


@st.composite
def cases(draw: st.DrawFn, *, mixed: bool = True) -> Case:
    radix = draw(st.sampled_from([4, 6, 8, 12, 16, 24, 32, 40, 64]))
    spine_radix = draw(st.sampled_from([radix, 2 * radix, max(radix // 2, 2)]))
    nics = draw(st.integers(1, 8))
    ports = draw(st.integers(1, 2))
    rails = nics * ports
    # A spine of more ports than the leaf (a chassis) holds a larger two-tier island.
    two_tier = two_tier_capacity(radix, spine_radix)
    most_nodes = min(MAX_NODES, max(three_tier_endpoints(radix), two_tier) // rails)
    total = draw(st.integers(1, most_nodes))
    small_nodes = draw(st.integers(0, total - 1)) if mixed and total > 1 else 0
    most_per_island = two_tier // rails
    island_nodes = draw(st.none() | st.integers(1, most_per_island)) if most_per_island else None
    kind = draw(st.sampled_from(["fat-tree", "rail-optimized"]))
    return Case(
        kind=kind,
        radix=radix,
        spine_radix=spine_radix,
        nics=nics,
        ports=ports,
        small_nics=draw(st.integers(0, nics)) if small_nodes else None,
        small_nodes=small_nodes,
        nodes=total - small_nodes,
        island_nodes=island_nodes,
        oversubscription=draw(st.sampled_from([1.0, 1.5, 2.0, 4.0])),
        island_oversubscription=draw(st.sampled_from([1.0, 1.0, 2.0, 3.0, 0.5])),
        # Planes take a NIC's ports, so they need rails of their own and dual-port NICs.
        planes=draw(st.sampled_from([1, 2])) if kind == "rail-optimized" and ports == 2 else 1,
    )


def _fabric(loaded: LoadedSpec) -> Fabric:
    """The planned fabric; a shape the planner refuses (it says why) is not a case here."""
    try:
        fabric = plan_fabric(loaded.spec, loaded.catalog)
    except FabricError:
        reject()
    assert fabric is not None
    return fabric


@settings(max_examples=80, deadline=None)
@given(cases())
def test_every_endpoint_has_its_own_leaf_port(case: Case) -> None:
    loaded = case.load()
    fabric = _fabric(loaded)
    placements = list(iter_placements(loaded.spec, fabric, loaded.catalog))
    assert len(placements) == fabric.endpoints
    ports = [(p.leaf, p.port) for _, _, p in placements]
    assert len(set(ports)) == len(ports)
    # Under spines a leaf keeps k/2 ports for uplinks (more below a ratio of 1); a lone
    # switch uses all k.
    downlink_ports = fabric.leaf_downlinks
    if fabric.tiers == 1:
        assert downlink_ports == fabric.radix
    assert max(Counter(leaf for leaf, _ in ports).values()) <= downlink_ports
    assert all(1 <= port <= downlink_ports for _, port in ports)
    hosts = list(dict.fromkeys(host for host, _, _ in placements))
    node_of = {host: index for index, host in enumerate(hosts)}
    for host, nic, placement in placements:
        assert placement.island == node_of[host] // fabric.island_nodes
        assert placement.leaf.startswith(f"is{placement.island:02d}-leaf")
        assert placement.rail == nic
        if fabric.kind == "rail-optimized" and fabric.tiers > 1:
            # A rail's leaves hold that rail only.
            rail_of_leaf = (int(placement.leaf[-3:]) - 1) // (
                -(-fabric.islands[placement.island].nodes // fabric.leaf_downlinks)
            )
            assert rail_of_leaf == rail_position(nic, fabric.rails, fabric.planes)


@settings(max_examples=80, deadline=None)
@given(cases())
def test_islands_partition_the_compute_nodes(case: Case) -> None:
    fabric = _fabric(case.load())
    sizes = [island.nodes for island in fabric.islands]
    assert sum(sizes) == case.nodes + case.small_nodes
    assert [island.index for island in fabric.islands] == list(range(len(sizes)))
    assert all(size == fabric.island_nodes for size in sizes[:-1])
    assert 1 <= sizes[-1] <= fabric.island_nodes
    assert sum(island.leaves for island in fabric.islands) == fabric.leaves
    assert sum(island.spines for island in fabric.islands) == fabric.spines


@settings(max_examples=80, deadline=None)
@given(cases())
def test_each_island_is_non_blocking_and_the_tree_matches_the_counts(case: Case) -> None:
    loaded = case.load()
    fabric = _fabric(loaded)
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    by_tier = {tier: [s for s in tree if s.tier == tier] for tier in ("leaf", "spine", "core")}
    leaves, spines, core = by_tier["leaf"], by_tier["spine"], by_tier["core"]
    assert (len(leaves), len(spines), len(core)) == (
        fabric.leaves,
        fabric.spines,
        fabric.core_switches,
    )
    assert len({s.name for s in tree}) == len(tree)
    for switch in tree:
        assert switch.downlinks + switch.uplinks <= switch.ports
    # Leaves: every endpoint is under one, and under spines a leaf's uplinks match its ports.
    assert sum(leaf.downlinks for leaf in leaves) == fabric.node_links == fabric.endpoints
    if fabric.tiers > 1:
        # Uplinks carry the leaf's endpoints over the island's oversubscription, never more
        # than the ports above the downlinks (k/2 at a ratio of 1 or more).
        down = fabric.leaf_downlinks
        up = fabric.radix // 2 if fabric.island_oversubscription >= 1 else fabric.radix - down
        assert all(leaf.downlinks <= down and leaf.uplinks <= up for leaf in leaves)
        ratio = fabric.island_oversubscription
        assert all(leaf.uplinks >= -(-leaf.downlinks // ratio) for leaf in leaves)
    assert sum(leaf.uplinks for leaf in leaves) == fabric.leaf_spine_links
    assert sum(spine.downlinks for spine in spines) == fabric.leaf_spine_links
    assert sum(spine.uplinks for spine in spines) == fabric.spine_core_links
    assert sum(switch.downlinks for switch in core) == fabric.spine_core_links
    every_host = {h for pool in loaded.spec.pools for h in pool.hostnames()}
    assert {h for leaf in leaves for h in leaf.nodes} == every_host
    island_of_leaf = {leaf.name: leaf.island for leaf in leaves}
    for spine in spines:
        assert spine.switches
        assert all(island_of_leaf[name] == spine.island for name in spine.switches)
    spine_names = {spine.name for spine in spines}
    assert all(set(switch.switches) <= spine_names for switch in core)
    if not fabric_limits(loaded.spec, loaded.catalog):
        _assert_meshed(fabric, leaves, spines, core)
    for island in fabric.islands:
        mine = [spine for spine in spines if spine.island == island.index]
        up = sum(spine.uplinks for spine in mine)
        if len(fabric.islands) > 1:
            # The island's share of the core: its endpoint bandwidth over r.
            need = island.nodes * fabric.rails * fabric.endpoint_speed_gbps
            assert up * SPEED >= need / fabric.inter_island_oversubscription
        elif fabric.tiers == 3:
            # One island in pods: the core carries all of the pods' traffic.
            assert up >= sum(spine.downlinks for spine in mine)


def _assert_meshed(
    fabric: Fabric, leaves: list[TreeSwitch], spines: list[TreeSwitch], core: list[TreeSwitch]
) -> None:
    """Any two leaves of a group share a spine; any two islands (or pods) share a core."""
    if fabric.tiers == 1:
        return
    for island in fabric.islands:
        mine = {leaf.name for leaf in leaves if leaf.island == island.index}
        groups = {frozenset(s.switches) for s in spines if s.island == island.index}
        # Each spine meets all leaves of its group; groups split the island's leaves.
        assert sum(len(group) for group in groups) == len(mine) == len(set().union(*groups))
    group_of_spine = {spine.name: (spine.island, min(spine.switches)) for spine in spines}
    reached = [{group_of_spine[name] for name in switch.switches} for switch in core]
    tops = set(group_of_spine.values()) if core else set()
    for first in tops:
        for second in tops:
            # Planes are independent: only groups of one plane need a core in common.
            if _plane(fabric, *first) == _plane(fabric, *second):
                assert any(first in r and second in r for r in reached), (first, second)


def _plane(fabric: Fabric, island: int, leaf: str) -> int:
    """The plane of leaf `leaf` of `island`: leaves are numbered rail by rail, plane by plane."""
    if fabric.planes == 1:
        return 0
    per_rail = -(-fabric.islands[island].nodes // fabric.leaf_downlinks)
    position = (int(leaf[-3:]) - 1) // per_rail
    return position // (fabric.rails // fabric.planes)


SIZES = (
    "leaves",
    "spines",
    "core_switches",
    "node_links",
    "leaf_spine_links",
    "spine_core_links",
    "cables",
    "transceivers",
    "switch_kw",
)


@settings(max_examples=80, deadline=None)
@given(cases(mixed=False), st.integers(1, 60))
def test_switches_and_cables_never_decrease_as_nodes_grow(case: Case, more: int) -> None:
    limit = (
        MAX_NODES
        if case.island_nodes is not None
        else (
            max(three_tier_endpoints(case.radix), two_tier_capacity(case.radix, case.spine_radix))
            // case.rails
        )
    )
    bigger = case.with_nodes(min(case.nodes + more, max(limit, case.nodes)))
    loaded = case.load()
    small = _fabric(loaded)
    if fabric_limits(loaded.spec, loaded.catalog):
        # A shape past its mesh limit (more spines than a leaf has uplinks) is counted for a
        # budget only; its part-filled leaves take an uplink per spine, so regrouping into
        # pods can use fewer links. Growth is monotonic for the shapes the plan accepts.
        reject()
    large = _fabric(bigger.load())
    for field in SIZES:
        assert getattr(small, field) <= getattr(large, field), field
    small_switches = small.leaves + small.spines + small.core_switches
    assert small_switches <= large.leaves + large.spines + large.core_switches
