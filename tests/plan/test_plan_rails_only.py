"""Rails-only fabrics: every rail a network of its own, no spine across rails.

Source: W. Wang, M. Ghobadi, K. Shakeri, Y. Zhang, N. Hasani, "How to Build Low-cost Networks
for Large Language Models (without Sacrificing Performance)", arXiv 2307.12169 (2023; later
versions titled "Rail-only: A Low-Cost High-Performance Network for Training LLMs with
Trillion Parameters"): the design removes the spine layer that joins the rails of a
rail-optimized cluster; each rail keeps full connectivity among its GPUs through a Clos of
its own, and GPUs of different rails meet through the NVLink (HB) domain. Only the design is
taken from the paper (read here through its abstract); its cost and power figures (38-77 %
and 37-75 % savings) rest on price models not reproduced here, so no test asserts them.
Every count below is Myriad's port arithmetic, worked by hand beside it.
"""

from __future__ import annotations

from typing import Any

import pytest

from myriad.errors import MyriadError
from myriad.plan import FabricError, iter_placements, iter_switch_tree, plan_fabric
from myriad.plan.cabling import iter_cables
from myriad.plan.model import Fabric
from myriad.spec import LoadedSpec

from spec_builder import cluster, gpu_profile, made_up_nic, made_up_switch


def _loaded(nodes: int, **topology: Any) -> LoadedSpec:
    return cluster(
        nodes=nodes,
        profile=gpu_profile(gpu=None, nic="TEST-NIC", nics=8),
        topology={"kind": "rail-optimized", "switch": "TEST-LEAF", **topology},
        catalog={
            "switches": {"TEST-LEAF": made_up_switch(64)},
            "nics": {"TEST-NIC": made_up_nic()},
        },
    )


def _fabric(loaded: LoadedSpec) -> Fabric:
    fabric = plan_fabric(loaded.spec, loaded.catalog)
    assert fabric is not None
    return fabric


def test_rails_that_fit_a_switch_are_one_switch_each() -> None:
    loaded = _loaded(64, rails_only=True)
    fabric = _fabric(loaded)
    # 64 nodes x 8 NICs: each rail's 64 ports fill one 64-port switch, no spine: 8 switches,
    # 512 cables, all node-leaf.
    assert (fabric.tiers, fabric.leaves, fabric.spines, fabric.core_switches) == (1, 8, 0, 0)
    assert (fabric.node_links, fabric.leaf_spine_links, fabric.cables) == (512, 0, 512)
    assert (fabric.planes, fabric.layout) == (8, "rail-optimized (rails only)")
    # Rail-optimized with a spine, the same nodes: 8 rails x ceil(64 / 32) = 16 leaves of 32
    # down and 32 up, 512 uplinks over ceil(512 / 64) = 8 spines: 24 switches, 1,024 cables.
    spined = _fabric(_loaded(64))
    assert (spined.leaves, spined.spines, spined.cables) == (16, 8, 1_024)
    # NIC j of every node on rail j's switch, node n in port n.
    placed = {
        (host, nic): (p.leaf, p.port)
        for host, nic, p in iter_placements(loaded.spec, fabric, loaded.catalog)
    }
    assert placed["gpu01", 0] == ("is00-leaf001", 1)
    assert placed["gpu01", 7] == ("is00-leaf008", 1)
    assert placed["gpu64", 7] == ("is00-leaf008", 64)
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    assert [s.tier for s in tree] == ["leaf"] * 8
    assert all(len(s.nodes) == 64 and s.downlinks == 64 and s.uplinks == 0 for s in tree)
    cables = list(iter_cables(loaded.spec, loaded.catalog, fabric))
    assert len(cables) == fabric.cables
    assert {c.b_device for c in cables if c.rail == 3} == {"is00-leaf004"}


def test_a_rail_past_one_switch_is_a_clos_of_its_own() -> None:
    loaded = _loaded(512, rails_only=True)
    fabric = _fabric(loaded)
    # 512 nodes: a rail's 512 ports on ceil(512 / 32) = 16 leaves, 16 x 32 = 512 uplinks over
    # ceil(512 / 64) = 8 spines of that rail; 8 rails: 128 leaves, 64 spines, two tiers.
    assert (fabric.tiers, fabric.leaves, fabric.spines) == (2, 128, 64)
    assert fabric.leaf_spine_links == 8 * 512
    # With a spine layer across rails the same 4,096 endpoints are past the 32 x 64 = 2,048
    # two tiers reach: three tiers (pods). Removing the cross-rail spine keeps two.
    assert _fabric(_loaded(512)).tiers == 3
    # Rail r's leaves (16 of them, numbered rail by rail) link only to rail r's 8 spines.
    tree = list(iter_switch_tree(loaded.spec, loaded.catalog))
    spines = [s for s in tree if s.tier == "spine"]
    for rail in range(8):
        own = {f"is00-leaf{n:03d}" for n in range(rail * 16 + 1, rail * 16 + 17)}
        assert all(set(s.switches) == own for s in spines[rail * 8 : rail * 8 + 8])
    cables = list(iter_cables(loaded.spec, loaded.catalog, fabric))
    assert len(cables) == fabric.cables == 4_096 + 4_096


def test_a_rail_past_two_tiers_is_refused() -> None:
    # 2,049 nodes: a rail's 2,049 ports are past the 32 x 64 = 2,048 two tiers reach.
    loaded = _loaded(2_049, rails_only=True)
    with pytest.raises(FabricError, match="rails_only: a rail of 2049 nodes is past the 2048"):
        plan_fabric(loaded.spec, loaded.catalog)
    # Islands of 1,024 put each island's rails under a core of that rail's own.
    split = _fabric(_loaded(2_049, rails_only=True, island_nodes=1_024))
    assert split.tiers == 3


def test_stated_spines_on_rails_of_one_switch_are_refused() -> None:
    loaded = _loaded(64, rails_only=True, island_spines=2)
    with pytest.raises(FabricError, match="fits one switch \\(per rail\\), which has no spines"):
        plan_fabric(loaded.spec, loaded.catalog)


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ({"kind": "fat-tree"}, "rails_only needs kind rail-optimized"),
        ({"planes": 2}, "rails_only already makes every rail a plane"),
    ],
)
def test_rails_only_shapes_that_cannot_be_built(topology: dict[str, Any], message: str) -> None:
    with pytest.raises(MyriadError, match=message):
        _loaded(64, rails_only=True, **topology)
