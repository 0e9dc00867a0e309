"""The compute fabric, with every expected figure worked out by hand in the comments."""

from __future__ import annotations

import inspect
from collections import Counter

import pytest

from myriad.errors import MyriadError
from myriad.plan import (
    FabricError,
    FabricLimit,
    fabric_limits,
    iter_placements,
    iter_switch_tree,
    leaf_placement,
    make_plan,
    plan_fabric,
)
from myriad.plan.model import Fabric, Island, LeafPlacement
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec

from spec_builder import (
    cluster,
    gpu_profile,
    load_example,
    load_fixture,
    made_up_nic,
    made_up_switch,
)


def _fabric(loaded: LoadedSpec) -> Fabric:
    fabric = plan_fabric(loaded.spec, loaded.catalog)
    assert fabric is not None
    return fabric


# --- the DESIGN.md example: 1,250 A800 nodes, 4 x 200G rails, islands of 128, r = 2 --------


def test_a800_rail_optimized_islands() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    fabric = _fabric(loaded)
    # SN5600-200G: k = 256 ports of 200 Gb/s, so k/2 = 128 down- and 128 uplinks per leaf.
    # ConnectX-6 is 1 x 200G; 4 per node -> 4 rails, endpoint speed min(200, 200) = 200.
    assert (fabric.radix, fabric.port_speed_gbps, fabric.endpoint_speed_gbps) == (256, 200, 200)
    assert fabric.rails == 4
    # Endpoints: 1,250 nodes x 4 = 5,000.
    assert fabric.endpoints == fabric.node_links == 5000
    # Islands: ceil(1,250 / 128) = 10; nine of 128 and the last 1,250 - 9 x 128 = 98 nodes.
    assert len(fabric.islands) == 10
    assert [i.nodes for i in fabric.islands] == [128] * 9 + [98]
    # An island has 128 x 4 = 512 endpoints <= k²/2 = 32,768: two tiers inside, and with
    # ten islands a core above them: three tiers.
    assert fabric.tiers == 3
    # Leaves per rail = ceil(128 / 128) = 1 (and ceil(98 / 128) = 1): 4 leaves per island.
    # Uplinks follow the endpoints (non-blocking inside an island): a full island's leaves
    # hold 128 endpoints and have 128 uplinks, 4 x 128 = 512; the last island's hold 98,
    # 4 x 98 = 392.
    # Core links of a full island: 512 endpoints x 200 Gb/s / r 2 / 200 Gb/s = 256;
    # of the last island: 98 x 4 x 200 / 2 / 200 = 196.
    # Spines: ceil((512 + 256) / 256) = 3, and ceil((392 + 196) / 256) = ceil(2.30) = 3.
    assert fabric.islands[0] == Island(index=0, nodes=128, leaves=4, spines=3)
    assert fabric.islands[9] == Island(index=9, nodes=98, leaves=4, spines=3)
    assert (fabric.leaves, fabric.spines) == (40, 30)
    assert fabric.leaf_spine_links == 9 * 512 + 392 == 5000
    # Core links 9 x 256 + 196 = 2,500; core switches ceil(2,500 / 256) = 10.
    assert fabric.spine_core_links == 2500
    assert fabric.core_switches == 10
    # Cables 5,000 + 5,000 + 2,500 = 12,500.
    assert fabric.cables == 12500
    # Transceivers: 5,000 at the NICs; an SN5600 split to 4 x 200G carries 4 ports in one
    # OSFP cage: leaf down 5,000 / 4 = 1,250, leaf up 1,250, spine down 1,250, spine up
    # 2,500 / 4 = 625 and core 625: 5,000 + 5,000 = 10,000 (two per cable would be 25,000).
    assert fabric.transceivers == 10_000
    # Injection 4 x 200 = 800 Gb/s per node.
    assert fabric.injection_gbps_per_node == 800
    # Island bisection 512 x 200 / 2 = 51,200 Gb/s; cluster 5,000 x 200 / 2 / 2 = 250,000.
    assert fabric.island_bisection_gbps == 51_200
    assert fabric.bisection_gbps == 250_000
    # Switch power (40 + 30 + 10) x 1,700 W = 136 kW.
    assert fabric.switch_kw == pytest.approx(136.0)


@pytest.mark.parametrize(
    ("node", "nic", "expected"),
    [
        # gpu0001 = node 0: rail 0 on leaf 1, rail 3 on leaf 4 (one leaf per rail), port 1.
        (0, 0, LeafPlacement(island=0, leaf="is00-leaf001", port=1, rail=0)),
        (0, 3, LeafPlacement(island=0, leaf="is00-leaf004", port=1, rail=3)),
        # gpu0128 = node 127, the last of island 0: rail 1 -> leaf 2, port 127 + 1.
        (127, 1, LeafPlacement(island=0, leaf="is00-leaf002", port=128, rail=1)),
        # gpu0129 = node 128 opens island 1.
        (128, 0, LeafPlacement(island=1, leaf="is01-leaf001", port=1, rail=0)),
        # gpu1250 = node 1,249: island 1,249 // 128 = 9, local 1,249 - 1,152 = 97;
        # rail 2 -> leaf 2 x 1 + 0 + 1 = 3, port 98.
        (1249, 2, LeafPlacement(island=9, leaf="is09-leaf003", port=98, rail=2)),
    ],
)
def test_a800_leaf_placement(node: int, nic: int, expected: LeafPlacement) -> None:
    fabric = _fabric(load_fixture("a800-rail-1250.yaml"))
    assert leaf_placement(fabric, node, nic) == expected


def test_placements_follow_pool_order_and_host_names() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    fabric = _fabric(loaded)
    # A generator: nothing per endpoint exists until a caller walks it.
    assert inspect.isgenerator(iter_placements(loaded.spec, fabric, loaded.catalog))
    placements = iter_placements(loaded.spec, fabric, loaded.catalog)
    first = [next(placements) for _ in range(5)]
    assert [(host, port) for host, port, _ in first] == [
        ("gpu0001", 0),
        ("gpu0001", 1),
        ("gpu0001", 2),
        ("gpu0001", 3),
        ("gpu0002", 0),
    ]
    assert first[4][2] == LeafPlacement(island=0, leaf="is00-leaf001", port=2, rail=0)
    everything = list(iter_placements(loaded.spec, fabric, loaded.catalog))
    assert len(everything) == 5000
    assert everything[-1][0] == "gpu1250"


def test_placement_outside_the_fabric_is_refused() -> None:
    fabric = _fabric(load_fixture("a800-rail-1250.yaml"))
    with pytest.raises(IndexError):
        leaf_placement(fabric, 1250, 0)
    with pytest.raises(IndexError):
        leaf_placement(fabric, 0, 4)
    with pytest.raises(IndexError):
        leaf_placement(fabric, -1, 0)


def test_a800_switch_tree() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    tiers = Counter(switch.tier for switch in tree)
    assert tiers == {"leaf": 40, "spine": 30, "core": 10}
    leaf = next(s for s in tree if s.name == "is09-leaf003")
    # The last island's rail-2 leaf holds its 98 nodes, gpu1153 .. gpu1250.
    assert leaf.nodes[0] == "gpu1153" and leaf.nodes[-1] == "gpu1250"
    assert (leaf.downlinks, leaf.uplinks, leaf.ports) == (98, 98, 256)
    spine = next(s for s in tree if s.name == "is00-spine001")
    # Island 0: 512 leaf links over 3 spines = 171, 171, 170; its 256 core links over the
    # same spines from the end = 85, 85, 86 (171 + 85 = 256 ports exactly).
    assert spine.switches == ("is00-leaf001", "is00-leaf002", "is00-leaf003", "is00-leaf004")
    assert (spine.downlinks, spine.uplinks) == (171, 85)
    core = next(s for s in tree if s.name == "core001")
    # 2,500 core links over 10 switches: 250 each; every spine has >= 85 uplinks, so it
    # reaches every one of the 10 core switches.
    assert core.downlinks == 250
    assert len(core.switches) == 30


# --- 8-GPU H100 nodes with 8 x 400G on QM9700 (64 ports of 400G) ------------------------


def test_eight_h100_nodes_fit_one_switch() -> None:
    # 8 nodes x 8 NICs = 64 endpoints = k: one switch, one tier, no spines.
    fabric = _fabric(cluster(nodes=8))
    assert fabric.tiers == 1
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (1, 0, 0)
    # 64 node cables. Transceivers: 64 at the NICs (one per port), and at the QM9700 one
    # twin-port OSFP per two ports (32 cages for 64 NDR ports): 64 / 2 = 32. 96 in all.
    assert (fabric.cables, fabric.transceivers) == (64, 64 + 32)
    assert fabric.ports_per_cage == 2
    assert fabric.switch_kw == pytest.approx(1.1)
    # Bisection 64 x 400 / 2 = 12,800 Gb/s.
    assert fabric.bisection_gbps == fabric.island_bisection_gbps == 12_800
    # On the single switch every endpoint has its own port, 1..64 in node order.
    assert leaf_placement(fabric, 7, 7) == LeafPlacement(0, "is00-leaf001", 64, 7)


def test_nine_h100_nodes_rail_optimized_need_two_tiers() -> None:
    # 9 x 8 = 72 endpoints > 64: two tiers (72 <= k²/2 = 2,048).
    # Rails 8, leaves per rail ceil(9 / 32) = 1: 8 leaves of 9 endpoints each. Uplinks are
    # sized by endpoints (non-blocking: 9 each), not k/2 = 32: 8 x 9 = 72 links, not 256.
    # Spines ceil(72 / 64) = 2; each leaf's 9 uplinks reach both.
    fabric = _fabric(cluster(nodes=9))
    assert fabric.tiers == 2
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (8, 2, 0)
    assert (fabric.node_links, fabric.leaf_spine_links, fabric.spine_core_links) == (72, 72, 0)
    assert fabric.cables == 144
    # Transceivers: 72 at the NICs; QM9700 cages: 72 / 2 = 36 leaf down, 36 leaf up, 36 at
    # the spines: 72 + 108 = 180.
    assert fabric.transceivers == 180
    # Switch power 10 x 1.1 kW.
    assert fabric.switch_kw == pytest.approx(11.0)
    # gpu09 (node 8), NIC 7 -> rail 7's leaf, port 9.
    assert leaf_placement(fabric, 8, 7) == LeafPlacement(0, "is00-leaf008", 9, 7)


def test_nine_h100_nodes_fat_tree() -> None:
    # Fat-tree: 72 endpoints fill leaves of 32: ceil(72 / 32) = 3 leaves holding 32, 32 and
    # 8 endpoints, so 32 + 32 + 8 = 72 uplinks; ceil(72 / 64) = 2 spines, and the third
    # leaf's 8 uplinks reach both.
    topology = {"kind": "fat-tree", "switch": "QM9700"}
    fabric = _fabric(cluster(nodes=9, topology=topology))
    assert (fabric.tiers, fabric.leaves, fabric.spines) == (2, 3, 2)
    assert fabric.cables == 72 + 72
    # Node 4's endpoint 0 is slot 32: the first port of leaf 2.
    assert leaf_placement(fabric, 4, 0) == LeafPlacement(0, "is00-leaf002", 1, 0)


def test_switch_tree_of_nine_rail_optimized_nodes() -> None:
    loaded = cluster(nodes=9)
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    leaves = [s for s in tree if s.tier == "leaf"]
    spines = [s for s in tree if s.tier == "spine"]
    hosts = tuple(f"gpu{i:02d}" for i in range(1, 10))
    # Every rail leaf holds all nine nodes (one per rail); every spine meets all leaves.
    assert [leaf.nodes for leaf in leaves] == [hosts] * 8
    assert all(len(spine.switches) == 8 for spine in spines)
    # 72 uplinks (9 per leaf) over 2 spines.
    assert [leaf.uplinks for leaf in leaves] == [9] * 8
    assert [s.downlinks for s in spines] == [36, 36]
    assert not [s for s in tree if s.tier == "core"]


# --- one island beyond k²/2: pods and a non-blocking core ----------------------------------


def test_one_island_beyond_two_tiers_uses_pods() -> None:
    # QM8700: k = 40 ports of 200G; k²/2 = 800, k³/4 = 16,000. ConnectX-6 is 200G.
    # 101 nodes x 8 = 808 endpoints > 800 -> three tiers in one island.
    # Fat-tree leaves ceil(808 / 20) = 41: 40 full of 20 endpoints, the last holding 8;
    # pods of 20 leaves: 20, 20, 1. Pod spines carry 20 down + 20 up:
    # ceil(20 x 20 / 20) = 20, 20, and 1 for the last pod's 8 links -> 41 spines.
    # Leaf-spine links 20 x 20 + 20 x 20 + 8 = 808; core links the same 808
    # (non-blocking); core switches ceil(808 / 40) = 21.
    profile = gpu_profile("A100-SXM4-80GB", nic="ConnectX-6", pcie={"gen": 4, "switches": 4})
    topology = {"kind": "fat-tree", "switch": "QM8700"}
    fabric = _fabric(cluster(nodes=101, profile=profile, topology=topology))
    assert fabric.tiers == 3
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (41, 41, 21)
    assert (fabric.leaf_spine_links, fabric.spine_core_links) == (808, 808)
    assert fabric.cables == 808 + 808 + 808
    # Inside one island nothing is oversubscribed: bisection 808 x 200 / 2.
    assert fabric.bisection_gbps == 80_800


def test_an_island_beyond_three_tiers_is_refused() -> None:
    # QM8700: k³/4 = 16,000 endpoints; 2,001 nodes x 8 = 16,008.
    profile = gpu_profile("A100-SXM4-80GB", nic="ConnectX-6", pcie={"gen": 4, "switches": 4})
    loaded = cluster(nodes=2001, profile=profile, topology={"kind": "fat-tree", "switch": "QM8700"})
    with pytest.raises(FabricError, match=r"16008 endpoints.*at most 16000") as caught:
        make_plan(loaded.spec, loaded.catalog)
    # A ValueError for callers, a MyriadError for the CLI's exit code.
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, MyriadError)


def test_several_three_tier_islands_are_refused() -> None:
    # Islands of 101 nodes (808 endpoints > 800) would each need three tiers, and a
    # fourth to join them; islands of at most 800 // 8 = 100 nodes stay two-tier.
    profile = gpu_profile("A100-SXM4-80GB", nic="ConnectX-6", pcie={"gen": 4, "switches": 4})
    topology = {"kind": "fat-tree", "switch": "QM8700", "island_nodes": 101}
    loaded = cluster(nodes=202, profile=profile, topology=topology)
    with pytest.raises(FabricError, match="island_nodes at most 100"):
        plan_fabric(loaded.spec, loaded.catalog)


def test_a_rail_optimized_island_that_outgrows_its_spines_is_reported() -> None:
    # 3 x 400G rails on QM9700 (k = 64, k/2 = 32): 673 nodes = 2,019 endpoints <= 2,048,
    # two tiers by the endpoint rule; but rails fill leaves one rail at a time:
    # 3 x ceil(673 / 32) = 3 x 22 = 66 leaves, 66 x 32 = 2,112 uplinks, ceil(2,112 / 64)
    # = 33 spines, one more than a leaf's 32 uplinks reach.
    loaded = cluster(nodes=673, profile=gpu_profile(nics=3))
    fabric = _fabric(loaded)
    assert (fabric.tiers, fabric.leaves, fabric.spines) == (2, 66, 33)
    (limit,) = fabric_limits(loaded.spec, loaded.catalog)
    assert (limit.what, limit.needed, limit.available) == ("spines-per-group", 33, 32)


def test_islands_too_big_to_share_spines_with_the_core_are_counted_and_reported() -> None:
    # QM9700, 8 rails, islands of 256 nodes (2,048 endpoints = k²/2), r = 2: leaves
    # 8 x ceil(256 / 32) = 64 with 2,048 uplinks, core links 2,048 x 400 / 2 / 400 = 1,024,
    # spines ceil(3,072 / 64) = 48 > 32 uplinks of a leaf. The largest island that fits:
    # 160 nodes -> 40 leaves, 1,280 + 640 = 1,920 <= 32 x 64 = 2,048 spine ports; at 161
    # nodes 48 leaves: 1,536 + 644 = 2,180 > 2,048.
    topology = {
        "kind": "rail-optimized",
        "switch": "QM9700",
        "island_nodes": 256,
        "inter_island_oversubscription": 2,
    }
    loaded = cluster(nodes=512, topology=topology)
    fabric = _fabric(loaded)
    # Counted by ports all the same: 2 islands x (64 leaves, 48 spines), 2,048 core links
    # over ceil(2,048 / 64) = 32 core switches.
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (128, 96, 32)
    (limit,) = fabric_limits(loaded.spec, loaded.catalog)
    assert limit == FabricLimit(
        what="spines-per-group",
        message=limit.message,
        suggestion=limit.suggestion,
        needed=48,
        available=32,
    )
    assert "an island of 256 nodes needs 48 spines" in limit.message
    assert "islands of at most 160 nodes" in limit.suggestion


def test_more_islands_than_core_ports_are_reported() -> None:
    # Islands of 8 nodes: 65 x 8 = 520 nodes make 65 islands, one more than a 64-port core
    # switch reaches; islands of ceil(520 / 64) = 9 nodes would make 58.
    topology = {"kind": "rail-optimized", "switch": "QM9700", "island_nodes": 8}
    loaded = cluster(nodes=520, topology=topology)
    (limit,) = fabric_limits(loaded.spec, loaded.catalog)
    assert (limit.what, limit.needed, limit.available) == ("groups-per-core", 65, 64)
    assert limit.suggestion == "islands of at least 9 nodes"


def test_the_examples_within_the_rules_report_no_limits() -> None:
    for loaded in (
        load_fixture("a800-rail-1250.yaml"),
        cluster(nodes=9),
        cluster(nodes=672, profile=gpu_profile(nics=3)),
    ):
        assert fabric_limits(loaded.spec, loaded.catalog) == ()


# --- other inputs ---------------------------------------------------------------------------


def test_nodes_without_compute_nics_are_one_endpoint_at_port_speed() -> None:
    loaded = load_example("local")
    fabric = _fabric(loaded)
    # Three CPU containers, one endpoint each at the SN3420's 25 Gb/s, one 48-port switch.
    assert (fabric.rails, fabric.endpoints, fabric.endpoint_speed_gbps) == (1, 3, 25)
    assert (fabric.tiers, fabric.leaves, fabric.cables) == (1, 1, 3)


def test_dual_port_nics_are_two_endpoints() -> None:
    # ConnectX-6-Dx is 2 x 100G: 2 NICs -> 4 endpoints per node on SN4600C (64 x 100G).
    profile = gpu_profile("L40S", gpus=4, nic="ConnectX-6-Dx", nics=2)
    topology = {"kind": "rail-optimized", "switch": "SN4600C"}
    fabric = _fabric(cluster(nodes=4, profile=profile, fabric="roce", topology=topology))
    assert (fabric.rails, fabric.endpoints) == (4, 16)
    assert fabric.injection_gbps_per_node == 400


def test_a_slower_nic_runs_at_its_own_speed() -> None:
    # ConnectX-6 (200G) on QM9700 ports of 400G: endpoints run at 200.
    profile = gpu_profile(nic="ConnectX-6")
    fabric = _fabric(cluster(nodes=4, profile=profile))
    assert fabric.endpoint_speed_gbps == 200
    assert fabric.port_speed_gbps == 400


def test_mixed_compute_pools_place_each_nodes_own_nics() -> None:
    profiles = {
        "big": gpu_profile(nics=8),
        "small": gpu_profile("L40S", gpus=4, nics=4),
    }
    pools = [
        {"name": "big", "profile": "big", "count": 2, "role": "compute"},
        {"name": "small", "profile": "small", "count": 2, "role": "compute"},
    ]
    loaded = cluster(profiles=profiles, pools=pools)
    fabric = _fabric(loaded)
    # Each node gets 8 slots; the 4-NIC nodes leave 4 empty: 2 x 8 + 2 x 4 = 24 endpoints.
    assert (fabric.rails, fabric.endpoints) == (8, 24)
    placements = list(iter_placements(loaded.spec, fabric, loaded.catalog))
    assert len(placements) == 24
    assert placements[-1][:2] == ("small02", 3)


def test_a_spec_without_compute_pools_has_no_fabric() -> None:
    loaded = cluster(nodes=2)
    storage_only = loaded.spec.model_copy(
        update={"pools": tuple(p.model_copy(update={"role": "storage"}) for p in loaded.spec.pools)}
    )
    assert plan_fabric(storage_only, loaded.catalog) is None
    assert list(iter_switch_tree(storage_only, loaded.catalog)) == []


# --- oversubscription inside an island -------------------------------------------------------


def test_island_oversubscription_sizes_leaf_uplinks() -> None:
    # 64 H100 nodes x 8 rails on QM9700 (k = 64, k/2 = 32), rail-optimized, 2:1 inside the
    # island: per rail 2 leaves of 32 endpoints, each with ceil(32 / 2) = 16 uplinks.
    # 16 leaves x 16 = 256 leaf-spine links (512 at 1:1); spines ceil(256 / 64) = 4.
    topology = {"kind": "rail-optimized", "switch": "QM9700", "island_oversubscription": 2}
    fabric = _fabric(cluster(nodes=64, topology=topology))
    assert (fabric.leaves, fabric.spines, fabric.leaf_spine_links) == (16, 4, 256)
    assert fabric.island_oversubscription == 2
    # Bisection 512 endpoints x 400 Gb/s / 2, halved by the 2:1 leaves: 51,200 Gb/s.
    assert fabric.island_bisection_gbps == fabric.bisection_gbps == 51_200
    loaded = cluster(nodes=64, topology=topology)
    leaves = [s for s in iter_switch_tree(loaded.spec, loaded.catalog) if s.tier == "leaf"]
    assert {(leaf.downlinks, leaf.uplinks) for leaf in leaves} == {(32, 16)}


def test_inter_island_oversubscription_with_one_island_is_a_finding() -> None:
    topology = {"kind": "rail-optimized", "switch": "QM9700", "inter_island_oversubscription": 2}
    findings = plan_loaded(cluster(nodes=9, topology=topology)).findings
    [finding] = [f for f in findings if f.id == "oversubscription-unused"]
    assert finding.path == ("network", "topology", "inter_island_oversubscription")
    assert "9 compute nodes are one island" in finding.message


# --- more uplinks than downlinks: an island oversubscription below 1 ------------------------


def _undersubscribed(ratio: float, radix: int = 24) -> LoadedSpec:
    return cluster(
        nodes=8,
        profile=gpu_profile(gpu=None, nic="TEST-NIC", nics=4),
        topology={"kind": "fat-tree", "switch": "TEST-LEAF", "island_oversubscription": ratio},
        catalog={
            "switches": {"TEST-LEAF": made_up_switch(radix)},
            "nics": {"TEST-NIC": made_up_nic()},
        },
    )


def test_an_island_ratio_below_one_gives_leaves_more_uplinks_than_downlinks() -> None:
    loaded = _undersubscribed(0.5)
    fabric = _fabric(loaded)
    # 24-port leaves at 0.5: d down and ceil(d / 0.5) = 2d up fit in 24, d = floor(24 x 0.5
    # / 1.5) = 8 down, 16 up. 8 nodes x 4 ports = 32 endpoints: 4 leaves of 8.
    assert fabric.leaf_downlinks == 8
    assert fabric.leaves == 4
    # Each leaf: ceil(8 / 0.5) = 16 uplinks, 64 in all; spines ceil(64 / 24) = 3.
    assert fabric.leaf_spine_links == 64
    assert fabric.spines == 3
    # Extra uplinks add no bisection past the endpoints': 32 x 400 / 2 = 6,400 Gb/s.
    assert fabric.island_bisection_gbps == 6_400
    assert fabric.bisection_gbps == 6_400
    # Node 2's first port is slot 8: the second leaf's first port.
    assert leaf_placement(fabric, 2, 0) == LeafPlacement(0, "is00-leaf002", 1, 0)
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    leaves = [s for s in tree if s.tier == "leaf"]
    assert [(s.downlinks, s.uplinks) for s in leaves] == [(8, 16)] * 4
    assert all(s.downlinks + s.uplinks <= s.ports for s in tree)


def test_a_ratio_that_leaves_no_port_for_endpoints_is_refused() -> None:
    # A 4-port leaf at 0.25: floor(4 x 0.25 / 1.25) = 0 ports down.
    loaded = _undersubscribed(0.25, radix=4)
    result = plan_loaded(loaded)
    assert result.plan is None
    [finding] = result.findings
    assert (finding.id, finding.path) == ("fabric-shape", ("network", "topology"))
    assert "island_oversubscription 0.25 leaves a 4-port leaf no port" in finding.message


def test_a_lone_switch_ignores_a_ratio_below_one() -> None:
    # 1 node x 4 ports on one 4-port switch: no uplinks, so 0.25 takes no port from it.
    loaded = cluster(
        nodes=1,
        profile=gpu_profile(gpu=None, nic="TEST-NIC", nics=4),
        topology={"kind": "fat-tree", "switch": "TEST-LEAF", "island_oversubscription": 0.25},
        catalog={
            "switches": {"TEST-LEAF": made_up_switch(4)},
            "nics": {"TEST-NIC": made_up_nic()},
        },
    )
    fabric = _fabric(loaded)
    assert (fabric.tiers, fabric.leaves, fabric.leaf_downlinks) == (1, 1, 4)
