"""Published cluster designs, planned from a spec: the figures their sources give, reproduced,
and the figures the sources leave out, said to be Myriad's own (worked out by hand here).

Sources are named in each spec's header (tests/plan/specs/); a figure is asserted as
published only where that source states it or it follows from stated figures by the
arithmetic written beside it.
"""

from __future__ import annotations

import re

import pytest

from myriad.errors import MyriadError
from myriad.plan import FabricError, fabric_limits, iter_placements, iter_switch_tree, plan_fabric
from myriad.plan.cabling import iter_cables
from myriad.plan.fabric import two_tier_capacity
from myriad.plan.model import Fabric
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec, load_spec_text

from spec_builder import SPECS, cluster, gpu_profile, load_fixture, made_up_nic, made_up_switch

META = "meta-24k-roce.yaml"


def _fabric(loaded: LoadedSpec) -> Fabric:
    fabric = plan_fabric(loaded.spec, loaded.catalog)
    assert fabric is not None
    return fabric


def _meta_with(old: str, new: str) -> LoadedSpec:
    text = (SPECS / META).read_text()
    assert old in text
    return load_spec_text(text.replace(old, new, 1), file=META)


# --- Meta's 24K-GPU RoCE cluster (Llama 3 paper, section 3.3.1) -----------------------------


def test_meta_24k_published_figures() -> None:
    fabric = _fabric(load_fixture(META))
    # Published: 24,576 GPUs (3,072 servers of 8), one 400G NIC per GPU.
    assert fabric.endpoints == fabric.node_links == 24_576
    assert fabric.endpoint_speed_gbps == 400
    # Published: eight AI zones (pods) of 3,072 GPUs (384 servers), each of 192 racks.
    assert [island.nodes for island in fabric.islands] == [384] * 8
    # Published: one RTSW per rack of 16 GPUs (two servers): leaf_nodes 2 keeps 2 x 8 = 16
    # ports down, so 3,072 / 2 = 1,536 RTSW, 192 a zone: as many as the 1,536 racks.
    assert fabric.leaves == 1_536
    assert fabric.leaf_downlinks == 16
    assert all(island.leaves == 192 for island in fabric.islands)
    # Published: full bisection inside a zone, 1:7 between zones. A zone's bisection is
    # 3,072 x 400 / 2 = 614,400 Gb/s (the RTSW's extra uplinks add none past its GPUs'); the
    # cluster's 24,576 x 400 / 2 / 7.
    assert fabric.island_bisection_gbps == 614_400
    assert fabric.bisection_gbps == pytest.approx(24_576 * 400 / 2 / 7)
    assert fabric.tiers == 3
    # Published (SIGCOMM '24, as summarised): RTSW-CTSW under-subscribed 1:1.125, so 16 x
    # 1.125 = 18 uplinks an RTSW, one to each of 18 CTSW; losing two CTSW leaves 16 uplinks
    # for 16 GPUs, still 1:1 ("tolerates two spine failures"). 1,536 x 18 = 27,648 links.
    assert fabric.leaf_spine_links == 27_648
    assert all(island.spines == 18 for island in fabric.islands)
    assert fabric.spines == 8 * 18
    # A true Clos inside every zone and across them: no fabric-shape finding.
    assert fabric_limits(load_fixture(META).spec, load_fixture(META).catalog) == ()


def test_meta_24k_figures_the_sources_do_not_publish() -> None:
    """The sources read here give neither the ATSW count nor cables or optics; these are
    Myriad's port arithmetic on the published shape, not Meta's numbers."""
    fabric = _fabric(load_fixture(META))
    # A zone's share of the aggregation layer: ceil(3,072 x 400 / 7 / 400) = ceil(438.9) = 439
    # links; 8 zones: 3,512.
    assert fabric.spine_core_links == 3_512
    # ATSW: ceil(3,512 / 576) = ceil(6.1) = 7.
    assert fabric.core_switches == 7
    # Cables: 24,576 + 27,648 + 3,512 = 55,736.
    assert fabric.cables == 55_736
    # Optics by layer, one per port (cages of one), both ends of every link:
    # RTSW-GPU 2 x 24,576 = 49,152; RTSW-CTSW 2 x 27,648 = 55,296; CTSW-ATSW 2 x 3,512 = 7,024.
    assert (
        fabric.node_transceivers,
        fabric.leaf_spine_transceivers,
        fabric.spine_core_transceivers,
    ) == (49_152, 55_296, 7_024)
    # 49,152 + 55,296 + 7,024 = 111,472. Meta cables a rack's GPUs to its RTSW with copper
    # DAC (SIGCOMM '24), which takes none: Myriad counts the in-rack layer as optics too (the
    # documented difference); the design's optics would be 111,472 - 49,152 = 62,320.
    assert fabric.transceivers == 111_472
    assert fabric.transceivers - fabric.node_transceivers == 62_320


def test_meta_24k_switch_tree_matches_the_counts() -> None:
    loaded = load_fixture(META)
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    leaves = [s for s in tree if s.tier == "leaf"]
    spines = [s for s in tree if s.tier == "spine"]
    core = [s for s in tree if s.tier == "core"]
    assert (len(leaves), len(spines), len(core)) == (1_536, 144, 7)
    # A rack's two servers under its RTSW: gpu0001 and gpu0002 under the first.
    assert leaves[0].nodes == ("gpu0001", "gpu0002")
    assert all(len(leaf.nodes) == 2 and leaf.downlinks == 16 for leaf in leaves)
    assert all(leaf.uplinks == 18 for leaf in leaves)
    # Every RTSW reaches all 18 CTSW of its zone once: 192 RTSW links a CTSW, and 439 ATSW
    # links over 18 CTSW = 24 or 25 each (439 = 18 x 24 + 7); 192 + 25 = 217 of 576 ports.
    assert all(len(spine.switches) == 192 and spine.downlinks == 192 for spine in spines)
    assert {spine.uplinks for spine in spines} == {24, 25}
    assert all(s.downlinks + s.uplinks <= s.ports for s in tree)


def test_spares_are_counted_by_layer_and_not_powered() -> None:
    base = _fabric(load_fixture(META))
    loaded = _meta_with(
        "    inter_island_oversubscription: 7",
        "    inter_island_oversubscription: 7\n    spares: {leaf: 0.02, spine: 0.06, core: 0.07}",
    )
    fabric = _fabric(loaded)
    # ceil(1,536 x 0.02) = ceil(30.72) = 31 RTSW; ceil(144 x 0.06) = ceil(8.64) = 9 CTSW;
    # 7 x 0.07 = 0.49 in exact arithmetic (0.49000000000000005 in floats): 1 ATSW.
    assert (fabric.spare_leaves, fabric.spare_spines, fabric.spare_core) == (31, 9, 1)
    # On the shelf: the counts, cables and switch power are the built fabric's.
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (1_536, 144, 7)
    assert (fabric.cables, fabric.switch_kw) == (base.cables, base.switch_kw)
    assert (base.spare_leaves, base.spare_spines, base.spare_core) == (0, 0, 0)


def test_spares_of_a_whole_number_are_not_rounded_past_it() -> None:
    # 1,500 x 0.02 = 30 exactly; 100 x 0.07 is 7.000000000000001 in floats, and still 7.
    from myriad.plan.fabric import _spares

    assert (_spares(1_500, 0.02), _spares(100, 0.07), _spares(0, 0.5)) == (30, 7, 0)


def test_meta_24k_needs_the_chassis_spine() -> None:
    # With the 64-port RTSW as spine too, a zone of 3,072 endpoints is past the 16 x 64 =
    # 1,024 two tiers reach, and eight such zones would need a fourth tier: refused.
    loaded = _meta_with("spine_switch: CTSW-576x400G", "spine_switch: RTSW-64x400G")
    with pytest.raises(FabricError, match="need three tiers"):
        plan_fabric(loaded.spec, loaded.catalog)
    result = plan_loaded(loaded)
    assert [(f.id, f.path) for f in result.findings] == [("fabric-shape", ("network", "topology"))]


def test_zones_past_the_chassis_capacity_are_refused_with_the_largest_that_fits() -> None:
    # Two-tier capacity of 16-GPU racks under the chassis: 16 x 576 = 9,216 endpoints, 1,152
    # servers of 8.
    assert two_tier_capacity(64, 576, 16) == 9_216
    loaded = _meta_with("island_nodes: 384", "island_nodes: 1153")
    with pytest.raises(FabricError, match="island_nodes at most 1152 "):
        plan_fabric(loaded.spec, loaded.catalog)
    # 1,152 servers: 576 RTSW of 18 uplinks, 10,368 links, and the zone's ATSW share
    # ceil(9,216 / 7) = 1,317 need ceil((10,368 + 1,317) / 576) = ceil(20.3) = 21 CTSW. An
    # RTSW links every CTSW, so 21 CTSW take 21 uplinks an RTSW, which need more CTSW, up to
    # the RTSW's 64 - 16 = 48 free ports: 576 x 48 + 1,317 = 28,965 links,
    # ceil(28,965 / 576) = ceil(50.3) = 51 CTSW. The spec states 18: refused, saying so.
    big = _meta_with("island_nodes: 384", "island_nodes: 1152")
    with pytest.raises(FabricError, match=r"island_spines 18: .* need 51 spines"):
        plan_fabric(big.spec, big.catalog)
    # Unstated, the plan counts the 51, and reports that an RTSW's 48 uplinks miss 3 of them.
    text = (SPECS / META).read_text().replace("island_nodes: 384", "island_nodes: 1152", 1)
    counted = load_spec_text(text.replace("    island_spines: 18\n", "", 1), file=META)
    assert _fabric(counted).islands[0].spines == 51
    limits = fabric_limits(counted.spec, counted.catalog)
    assert [(limit.what, limit.needed, limit.available) for limit in limits] == [
        ("spines-per-group", 51, 48)
    ]


def test_rack_leaves_must_hold_their_uplinks() -> None:
    # leaf_nodes 3: 24 GPU ports down and ceil(24 / 0.8889) = 27 up, 51 of 64 ports, fits;
    # leaf_nodes 4: 32 down and ceil(32 / 0.8889) = 36 up, 68 > 64: refused, with the most
    # that fit: floor(64 x 0.8889 / 1.8889) = floor(30.1) = 30 ports, 30 // 8 = 3 servers.
    fits = _meta_with("leaf_nodes: 2", "leaf_nodes: 3")
    assert _fabric(fits).leaf_downlinks == 24
    loaded = _meta_with("leaf_nodes: 2", "leaf_nodes: 4")
    with pytest.raises(
        FabricError, match=r"leaf_nodes 4: .* 68 ports, .* make leaf_nodes at most 3"
    ):
        plan_fabric(loaded.spec, loaded.catalog)
    result = plan_loaded(loaded)
    assert [(f.id, f.path) for f in result.findings] == [("fabric-shape", ("network", "topology"))]


def test_a_small_cluster_keeps_its_rack_leaves() -> None:
    # Four servers of 8 NIC ports fit one 64-port switch, but a ToR per rack of two is what
    # the design builds: 2 leaves of 16 ports down, each 18 uplinks over the 18 stated spines.
    text = (
        (SPECS / META)
        .read_text()
        .replace("count: 3072", "count: 4", 1)
        .replace("    island_nodes: 384\n", "", 1)
    )
    fabric = _fabric(load_spec_text(text, file=META))
    assert (fabric.tiers, fabric.leaves, fabric.spines) == (2, 2, 18)
    assert fabric.leaf_spine_links == 2 * 18


@pytest.mark.parametrize(
    ("count", "message"),
    [
        # 4 servers, no leaf_nodes: 32 ports on one 64-port switch, which has no spines.
        (4, "fits one switch (per rail), which has no spines"),
        # One zone without leaf_nodes: k/2 = 32 ports down a leaf under 576-port spines
        # reach 32 x 576 = 18,432 endpoints; 2,400 servers x 8 = 19,200 need pods.
        (2_400, "needs three tiers (pods)"),
    ],
)
def test_stated_spines_need_a_two_tier_island(count: int, message: str) -> None:
    text = (
        (SPECS / META)
        .read_text()
        .replace("count: 3072", f"count: {count}", 1)
        .replace("    island_nodes: 384\n", "", 1)
        .replace("    leaf_nodes: 2\n", "", 1)
        .replace("island_oversubscription: 0.8889", "island_oversubscription: 1", 1)
        .replace("    inter_island_oversubscription: 7\n", "", 1)
    )
    loaded = load_spec_text(text, file=META)
    with pytest.raises(FabricError, match=rf"island_spines 18: .*{re.escape(message)}"):
        plan_fabric(loaded.spec, loaded.catalog)


@pytest.mark.parametrize(
    ("nodes", "tiers", "radix_finding"),
    [
        # 32-port leaves, 256-port spines: two tiers reach 16 x 256 = 4,096 endpoints,
        # 512 nodes of 8 (k²/2 = 512 endpoints would have stopped at 64 nodes).
        (512, 2, False),
        # One node more: 4,104 endpoints, three tiers (pods), and the info finding says so.
        (513, 3, True),
    ],
)
def test_one_island_under_chassis_spines(nodes: int, tiers: int, radix_finding: bool) -> None:
    loaded = cluster(
        profiles={"gpu": gpu_profile(gpu=None, nic="TEST-NIC", nics=8)},
        pools=[{"name": "gpu", "profile": "gpu", "count": nodes, "role": "compute"}],
        topology={"kind": "fat-tree", "switch": "TEST-LEAF", "spine_switch": "TEST-CHASSIS"},
        catalog={
            "switches": {
                "TEST-LEAF": made_up_switch(32),
                "TEST-CHASSIS": made_up_switch(256),
            },
            "nics": {"TEST-NIC": made_up_nic()},
        },
    )
    fabric = _fabric(loaded)
    assert fabric.tiers == tiers
    findings = plan_loaded(loaded).findings
    radix = [f for f in findings if f.id == "island-radix"]
    assert bool(radix) is radix_finding
    if radix:
        assert radix[0].numbers["max_two_tier"] == 4_096
        assert "32-port leaves under 256-port spines" in radix[0].message


# --- Alibaba HPN, one Pod (SIGCOMM '24) ------------------------------------------------------

HPN = "alibaba-hpn-pod.yaml"


def test_hpn_pod_published_figures() -> None:
    fabric = _fabric(load_fixture(HPN))
    # Published: 15 segments of 1,024 GPUs, 8 GPUs a host: 15 x 1,024 / 8 = 1,920 hosts, one
    # Pod, two tiers.
    assert [island.nodes for island in fabric.islands] == [1_920]
    assert fabric.tiers == 2
    # Published: 8 NICs of 2 x 200G a host, the two ports in two planes: 16 endpoints a
    # host, 8 rails in each of 2 planes; 1,920 x 16 = 30,720 host links.
    assert (fabric.rails, fabric.planes, fabric.endpoint_speed_gbps) == (16, 2, 200)
    assert fabric.node_links == 30_720
    # Published: a segment is 1,024 GPUs on 8 rails x 2 planes = 16 ToRs, each with one port
    # of every host (128 hosts, 128 x 200G down); 15 segments: 15 x 16 = 240 ToRs.
    assert fabric.leaves == 240
    assert fabric.islands[0].leaves == 240


def test_hpn_pod_figures_the_sources_do_not_publish() -> None:
    """The sources read here give no ToR uplink or aggregation-switch count; these are
    Myriad's own, with the ToR non-blocking (1:1) and 256 x 200G aggregation switches."""
    fabric = _fabric(load_fixture(HPN))
    # Each ToR: 128 down, 128 up; 240 x 128 = 30,720 ToR-aggregation links, 15,360 a plane.
    assert fabric.leaf_spine_links == 30_720
    # Aggregation per plane: ceil(15,360 / 256) = 60; both planes: 120. No core (one Pod).
    assert fabric.spines == 120
    assert (fabric.core_switches, fabric.spine_core_links) == (0, 0)
    # Cables: 30,720 + 30,720 = 61,440. Optics: a host end per port (30,720), switch ends
    # per cage of four 200G ports (SN5600 split 4 ways): 3 x 30,720 / 4 = 23,040.
    assert fabric.cables == 61_440
    assert fabric.transceivers == 30_720 + 23_040


def test_hpn_planes_keep_each_plane_on_its_own_leaves_and_spines() -> None:
    loaded = load_fixture(HPN)
    fabric = _fabric(loaded)
    first = [p for host, _, p in iter_placements(loaded.spec, fabric, loaded.catalog)][:4]
    # Host gpu0001: NIC 0's ports (rails 0 and 1) go to two ToRs, one in each plane: leaves
    # are numbered plane by plane, 15 per rail, so rail 0 -> leaf 1, rail 1 (plane 1, its
    # first rail) -> leaf 8 x 15 + 1 = 121, rail 2 (plane 0, second rail) -> leaf 16.
    assert [(p.rail, p.leaf) for p in first] == [
        (0, "is00-leaf001"),
        (1, "is00-leaf121"),
        (2, "is00-leaf016"),
        (3, "is00-leaf136"),
    ]
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    spines = [s for s in tree if s.tier == "spine"]
    plane_0 = {f"is00-leaf{n:03d}" for n in range(1, 121)}
    # Spines 1-60 hold plane 0's 120 ToRs only, 61-120 plane 1's.
    assert all(set(s.switches) == plane_0 for s in spines[:60])
    assert all(not set(s.switches) & plane_0 and len(s.switches) == 120 for s in spines[60:])


def test_hpn_dual_tor_cables_each_host_port_once() -> None:
    # Dual-ToR: a NIC's two ports go to two ToRs (one per plane); each ToR takes one port of
    # each of its 128 hosts and sends 128 uplinks to its plane's aggregation switches. So the
    # ToR-aggregation cables equal the host ports, 1,920 x 16 = 30,720, not twice that (what
    # counting a NIC's two ports against both ToRs would give).
    loaded = load_fixture(HPN)
    fabric = _fabric(loaded)
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    tors = [s for s in tree if s.tier == "leaf"]
    assert all(tor.downlinks == 128 and tor.uplinks == 128 for tor in tors)
    assert fabric.leaf_spine_links == fabric.node_links == 30_720
    cables = list(iter_cables(loaded.spec, loaded.catalog, fabric))
    assert sum(c.tier == "leaf-spine" for c in cables) == 30_720
    # A host's NIC 0: its two ports on two ToRs, never one ToR twice.
    ports = [c for c in cables if c.tier == "node-leaf" and c.a_device == "gpu0001"]
    assert len({c.b_device for c in ports}) == 16
    # Bonding the two ports instead is refused where it is written, pointing at planes.
    text = (SPECS / HPN).read_text()
    old = "compute: {model: HPN-NIC-2x200G, count: 8}"
    assert old in text
    bonded = text.replace(old, "compute: {model: HPN-NIC-2x200G, count: 8, bond: 802.3ad}")
    with pytest.raises(MyriadError, match=re.escape("set network.topology.planes 2")):
        load_spec_text(bonded, file=HPN)


def test_planes_double_what_two_tiers_reach() -> None:
    # One plane of 16 rails: 2,049 hosts x 16 = 32,784 endpoints, past the 128 x 256 =
    # 32,768 two tiers reach, so pods (three tiers). Two planes of 8 rails: 16,392 a plane,
    # two tiers each.
    text = (SPECS / HPN).read_text().replace("count: 1920", "count: 2049", 1)
    two = load_spec_text(text, file=HPN)
    assert _fabric(two).tiers == 2
    one = load_spec_text(text.replace("planes: 2", "planes: 1", 1), file=HPN)
    assert _fabric(one).tiers == 3


def test_planes_need_nic_ports_to_split() -> None:
    # ConnectX-7 has one port: nothing to give a second plane.
    text = (
        (SPECS / HPN)
        .read_text()
        .replace("model: HPN-NIC-2x200G, count: 8", "model: ConnectX-7, count: 8")
    )
    result = plan_loaded(load_spec_text(text, file=HPN))
    assert result.plan is None
    [finding] = result.findings
    assert (finding.id, finding.path) == ("fabric-shape", ("network", "topology"))
    assert "ConnectX-7 has 1 port(s)" in finding.message


def test_planes_need_a_rail_optimized_fabric() -> None:
    text = (SPECS / HPN).read_text().replace("kind: rail-optimized", "kind: fat-tree", 1)
    with pytest.raises(MyriadError, match="planes above 1 need kind rail-optimized"):
        load_spec_text(text, file=HPN)


def test_planes_of_a_single_switch_are_refused() -> None:
    loaded = cluster(
        nodes=2,
        profile=gpu_profile(gpu=None, nic="TEST-NIC", nics=1),
        topology={"kind": "rail-optimized", "switch": "TEST-LEAF", "planes": 2},
        catalog={
            "switches": {"TEST-LEAF": made_up_switch(8)},
            "nics": {"TEST-NIC": made_up_nic(ports=2)},
        },
    )
    with pytest.raises(FabricError, match="one switch per plane"):
        plan_fabric(loaded.spec, loaded.catalog)


def test_two_hpn_pods_keep_each_plane_on_its_own_core() -> None:
    # Two Pods of 1,920 hosts under a core, 15:1 (a figure chosen here, not HPN's): a plane
    # of a Pod sends ceil(1,920 x 8 x 200 / 15 / 200) = 1,024 links up; a plane's core,
    # ceil(2 x 1,024 / 256) = 8 switches; both planes: 16, numbered core001-core016.
    text = (
        (SPECS / HPN)
        .read_text()
        .replace("count: 1920", "count: 3840", 1)
        .replace(
            "planes: 2",
            "planes: 2\n    island_nodes: 1920\n    inter_island_oversubscription: 15",
            1,
        )
    )
    loaded = load_spec_text(text, file=HPN)
    fabric = _fabric(loaded)
    assert fabric.spine_core_links == 4 * 1_024
    assert fabric.core_switches == 16
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    core = [s for s in tree if s.tier == "core"]
    assert len(core) == 16
    # Spines 1-N of each island's plane 0 come first; plane 1's spines are the rest.
    plane_of = {}
    for island in fabric.islands:
        for n in range(1, island.spines + 1):
            plane_of[f"is{island.index:02d}-spine{n:03d}"] = 0 if n <= island.spines // 2 else 1
    assert [{plane_of[name] for name in switch.switches} for switch in core] == [{0}] * 8 + [
        {1}
    ] * 8
    # The cabling sheet wires the same core: every spine-core cable ends on a core of its
    # spine's plane, and the totals are the plan's.
    cables = list(iter_cables(loaded.spec, loaded.catalog, fabric))
    up = [c for c in cables if c.tier == "spine-core"]
    assert len(up) == fabric.spine_core_links
    assert len(cables) == fabric.cables
    members = {switch.name: set(switch.switches) for switch in core}
    assert all(c.a_device in members[c.b_device] for c in up)
