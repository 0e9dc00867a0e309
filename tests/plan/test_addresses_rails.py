"""Rail subnets: the spec's compute network cut into one network per RoCE rail, and each
rail's network into one subnet per leaf, the leaf the hosts' gateway (a routed fabric)."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from typing import Any

import pytest
import yaml

from myriad.errors import AddressError
from myriad.plan.addresses import rail_addresses, rail_networks
from myriad.plan.fabric import iter_placements, rail_leaves
from myriad.plan.lints import lint
from myriad.plan.model import Fabric
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec, load_spec_text

from spec_builder import ROOT, cluster, gpu_profile, load_example


def roce_10k(**addressing: Any) -> LoadedSpec:
    """The roce-10k example with network.addressing changed."""
    document = yaml.safe_load((ROOT / "inventories/roce-10k/cluster.yaml").read_text())
    document["network"]["addressing"].update(addressing)
    return load_spec_text(yaml.safe_dump(document, sort_keys=False))


def fabric_of(loaded: LoadedSpec) -> Fabric:
    result = plan_loaded(loaded)
    assert result.plan is not None and result.plan.fabric is not None
    return result.plan.fabric


def test_rails_split_the_network_in_powers_of_two() -> None:
    # 4 rails: 2 more prefix bits, /18 -> four /20s, 16 x 256 addresses apart.
    assert rail_networks("10.64.0.0/18", 4) == [
        "10.64.0.0/20",
        "10.64.16.0/20",
        "10.64.32.0/20",
        "10.64.48.0/20",
    ]
    # 3 rails still need 2 bits; the fourth quarter stays unused.
    assert rail_networks("10.64.0.0/18", 3) == ["10.64.0.0/20", "10.64.16.0/20", "10.64.32.0/20"]
    # 8 rails: 3 bits, /14 -> /17s.
    assert rail_networks("10.128.0.0/14", 8)[7] == "10.131.128.0/17"
    assert rail_networks("10.0.0.0/24", 1) == ["10.0.0.0/24"]


def test_node_addresses_start_after_the_reserved_ones_on_every_rail() -> None:
    # Stretched: one subnet per rail over all its leaves, no gateway.
    rails = rail_addresses("10.64.0.0/18", 4, 1250)
    assert [r.with_prefix(0) for r in rails] == [
        "10.64.0.10/20",
        "10.64.16.10/20",
        "10.64.32.10/20",
        "10.64.48.10/20",
    ]
    # Node 1249: 10 + 1249 = 1259 = 4 * 256 + 235 -> 10.64.(48 + 4).235.
    assert rails[3].with_prefix(1249) == "10.64.52.235/20"
    assert rails[3].gateway(1249) is None
    assert rails[3].network == "10.64.48.0/20"


def test_roce_10k_gets_a_subnet_per_leaf_with_the_leaf_as_gateway() -> None:
    # SN5600-200G: 256 ports, 128 down; islands of 128 nodes: one leaf per rail per island,
    # ten islands (9 x 128 + 98), so each rail has 10 leaves of at most 128 nodes.
    leaves = rail_leaves(fabric_of(load_example("roce-10k")))
    assert leaves is not None
    assert (leaves.per_rail, leaves.hosts) == (10, 128)
    # 10 reserved + 128 nodes + broadcast = 139 -> a /24 per leaf; 10 leaves -> 16 /24s = a
    # /20 per rail; 4 rails -> /18: the example's 10.64.0.0/18 exactly.
    rails = rail_addresses("10.64.0.0/18", 4, 1250, leaves)
    assert [r.network for r in rails] == [
        "10.64.0.0/20",
        "10.64.16.0/20",
        "10.64.32.0/20",
        "10.64.48.0/20",
    ]
    # Node 0 (island 0): leaf 0 of each rail, .10 of the leaf's /24, the leaf is .1.
    assert [(r.with_prefix(0), r.gateway(0)) for r in rails] == [
        ("10.64.0.10/24", "10.64.0.1"),
        ("10.64.16.10/24", "10.64.16.1"),
        ("10.64.32.10/24", "10.64.32.1"),
        ("10.64.48.10/24", "10.64.48.1"),
    ]
    # Node 127, the island's last, is .137; node 128 starts island 1's leaf at .10.
    assert rails[0].with_prefix(127) == "10.64.0.137/24"
    assert (rails[0].with_prefix(128), rails[0].gateway(128)) == ("10.64.1.10/24", "10.64.1.1")
    # Node 1249: island 9 (1249 - 9 x 128 = 97th of it), rail 3: 10.64.(48 + 9).(10 + 97).
    assert (rails[3].with_prefix(1249), rails[3].gateway(1249)) == (
        "10.64.57.107/24",
        "10.64.57.1",
    )


def test_an_island_with_two_leaves_per_rail_gets_a_subnet_per_leaf() -> None:
    # SN5600-400G: 128 ports, 64 down; islands of 128 nodes: two leaves per rail per island.
    loaded = cluster(
        nodes=256,
        fabric="roce",
        topology={"kind": "rail-optimized", "switch": "SN5600-400G", "island_nodes": 128},
    )
    leaves = rail_leaves(fabric_of(loaded))
    assert leaves is not None
    assert (leaves.per_rail, leaves.hosts) == (4, 64)
    # 10 + 64 + 1 = 75 -> /25 per leaf; 4 leaves -> /23 per rail; 8 rails -> /20.
    rails = rail_addresses("10.64.0.0/20", 8, 256, leaves)
    assert rails[0].network == "10.64.0.0/23"
    assert (rails[0].with_prefix(0), rails[0].gateway(0)) == ("10.64.0.10/25", "10.64.0.1")
    # Node 64: the island's second leaf of rail 0 (is00-leaf002), the /23's second /25.
    assert (rails[0].with_prefix(64), rails[0].gateway(64)) == ("10.64.0.138/25", "10.64.0.129")
    assert (rails[0].with_prefix(128), rails[0].gateway(128)) == ("10.64.1.10/25", "10.64.1.1")
    # Node 255, rail 7: island 1's second leaf of rail 7, slot 63: 10.64.15.(128 + 10 + 63).
    assert (rails[7].with_prefix(255), rails[7].gateway(255)) == (
        "10.64.15.201/25",
        "10.64.15.129",
    )
    with pytest.raises(AddressError, match=r"a /25 per leaf for its 64 nodes.*network of /20"):
        rail_addresses("10.64.0.0/21", 8, 256, leaves)


@pytest.mark.parametrize(
    ("topology", "nodes"),
    [
        ({"kind": "rail-optimized", "switch": "SN5600-400G", "island_nodes": 96}, 300),
        ({"kind": "fat-tree", "switch": "SN5600", "island_nodes": 40}, 100),
        ({"kind": "fat-tree", "switch": "SN5600-400G", "island_nodes": 24}, 60),
    ],
)
def test_one_subnet_and_gateway_per_leaf_and_rail(topology: dict[str, Any], nodes: int) -> None:
    """Whatever the shape: the ports one leaf carries of one rail share a subnet and gateway,
    no two leaves share one, and every address is a host of its own leaf's subnet."""
    profile = gpu_profile(nic="ConnectX-7", nics=3 if topology["kind"] == "fat-tree" else 8)
    loaded = cluster(nodes=nodes, profile=profile, fabric="roce", topology=topology)
    fabric = fabric_of(loaded)
    leaves = rail_leaves(fabric)
    assert leaves is not None
    rails = rail_addresses("10.64.0.0/12", fabric.rails, nodes, leaves)
    gateways: dict[tuple[str, int], set[str | None]] = defaultdict(set)
    addresses = set()
    for index, (_, nic, placement) in enumerate(
        iter_placements(loaded.spec, fabric, loaded.catalog)
    ):
        node = index // fabric.rails
        interface = ipaddress.ip_interface(rails[nic].with_prefix(node))
        gateway = rails[nic].gateway(node)
        assert gateway == str(interface.network.network_address + 1)
        assert int(interface.ip) - int(interface.network.network_address) >= 10
        assert interface.ip != interface.network.broadcast_address
        assert interface.network.subnet_of(ipaddress.ip_network(rails[nic].network))
        gateways[(placement.leaf, nic)].add(gateway)
        addresses.add(interface.ip)
    assert all(len(found) == 1 for found in gateways.values())
    assert len({g for found in gateways.values() for g in found}) == len(gateways)
    assert len(addresses) == nodes * fabric.rails


def test_a_rail_on_one_leaf_keeps_its_whole_network() -> None:
    # 8 nodes on 64-port SN5600: each rail's 8 ports on one leaf, nothing to route.
    topology = {"kind": "rail-optimized", "switch": "SN5600"}
    loaded = cluster(nodes=8, fabric="roce", topology=topology)
    assert rail_leaves(fabric_of(loaded)) is None


def test_a_rail_subnet_too_small_for_the_nodes_is_refused_with_the_fix() -> None:
    # /24 cut in 4: a /26 has .10 to .62 for nodes (53), not 60.
    with pytest.raises(AddressError, match=r"rail 0 .*has room for 53 node addresses.*not 60"):
        rail_addresses("10.0.0.0/24", 4, 60)
    with pytest.raises(AddressError, match=r"cannot be cut into 8 rail subnets: use .* /27"):
        rail_networks("10.0.0.0/28", 8)


def test_a_compute_network_too_small_for_the_leaf_subnets_says_the_size_needed() -> None:
    loaded = roce_10k(compute="10.64.0.0/19")
    result = plan_loaded(loaded)
    assert result.plan is not None
    findings = [f for f in lint(loaded, result.plan) if f.id == "rail-addresses"]
    assert len(findings) == 1
    assert findings[0].severity == "error"
    assert findings[0].path == ("network", "addressing", "compute")
    assert "a /24 per leaf for its 128 nodes" in findings[0].message
    assert "use a network of /18 or larger" in findings[0].message


def test_a_stretched_rail_subnet_is_a_stated_choice_with_its_switch_duty() -> None:
    loaded = roce_10k(rail_subnets="stretched")
    result = plan_loaded(loaded)
    assert result.plan is not None
    findings = [f for f in lint(loaded, result.plan) if f.id == "rail-subnets-stretched"]
    assert len(findings) == 1
    assert findings[0].severity == "warning"
    assert findings[0].path == ("network", "addressing", "rail_subnets")
    assert "10 leaves" in findings[0].message
    assert "EVPN/VXLAN" in findings[0].suggestion and "proxy-ARP" in findings[0].suggestion
    # The default, per leaf, needs no switch to stretch anything.
    default = load_example("roce-10k")
    plan = plan_loaded(default).plan
    assert plan is not None
    assert [f for f in lint(default, plan) if f.id == "rail-subnets-stretched"] == []


def test_example_roce_clusters_have_room_on_every_rail() -> None:
    for example in ("roce-10k", "h100-100k"):
        result = plan_loaded(load_example(example))
        assert result.plan is not None
        assert [f for f in lint(result.loaded, result.plan) if f.id == "rail-addresses"] == []


def test_roce_without_a_compute_network_is_an_error_at_the_addressing_field() -> None:
    loaded = cluster(fabric="roce", topology={"kind": "rail-optimized", "switch": "SN5600"})
    result = plan_loaded(loaded)
    assert result.plan is not None
    findings = [f for f in lint(loaded, result.plan) if f.id == "rail-addresses"]
    assert len(findings) == 1
    assert findings[0].severity == "error"
    assert findings[0].path == ("network", "addressing")
    assert "8 RoCE rails" in findings[0].message
    assert "network.addressing.compute" in findings[0].suggestion
