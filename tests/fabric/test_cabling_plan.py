"""The cabling plan: one row per cable, totals equal to the plan's link counts, every port
used once and within its switch; figures worked out by hand for the starter and the
512-endpoint fat tree."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import pytest

from myriad.plan.cabling import (
    CSV_COLUMNS,
    cable_totals,
    cabling_csv,
    iter_cables,
    placed_cables,
)
from myriad.plan.layout import plan_layout
from myriad.plan.pipeline import plan_spec
from myriad.render.inventory import build_inventory

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
FAT_TREE = ROOT / "tests" / "fabric" / "fat-tree-512.yaml"
ROCE_RAILS = ROOT / "tests" / "fabric" / "roce-rails-32.yaml"
ROCE_PLANES = ROOT / "tests" / "fabric" / "roce-planes-48.yaml"


def _cables(path: Path) -> tuple[list, object]:
    result = plan_spec(path)
    assert result.plan is not None and result.plan.fabric is not None
    return list(iter_cables(result.loaded.spec, result.loaded.catalog, result.plan.fabric)), result


def test_starter_64_is_64_node_cables_into_one_leaf_rail_by_rail() -> None:
    # 8 nodes x 8 ConnectX-7 = 64 endpoints: one 64-port QM9700, node i's NIC j in port
    # 8(i-1) + j + 1, at 400 Gb/s; nothing above the leaf.
    cables, _ = _cables(STARTER)
    assert len(cables) == 64
    assert {c.tier for c in cables} == {"node-leaf"}
    assert {c.b_device for c in cables} == {"is00-leaf001"}
    first, last = cables[0], cables[-1]
    assert (first.a_device, first.a_hca, first.b_port, first.rail) == ("gpu01", "mlx5_0", 1, 0)
    assert (last.a_device, last.a_hca, last.b_port, last.rail) == ("gpu08", "mlx5_7", 64, 7)
    gpu03_rail4 = next(c for c in cables if c.a_device == "gpu03" and c.rail == 4)
    assert gpu03_rail4.b_port == 2 * 8 + 4 + 1
    assert {c.speed_gbps for c in cables} == {400}
    assert [c.cable for c in cables] == list(range(1, 65))


def test_fat_tree_512_counts_and_ports_by_hand() -> None:
    # 512 endpoints on 40-port leaves, 20 down / 20 up: 26 leaves (25 full, the last
    # with 512 - 25 x 20 = 12). Uplinks: 25 x 20 + max(12, 13 spines) = 513 over
    # ceil(513 / 40) = 13 spines; 513 = 13 x 39 + 6, so spines 1-6 take 40 links, 7-13 39.
    cables, _ = _cables(FAT_TREE)
    totals = cable_totals(cables)
    assert totals == {"node_links": 512, "leaf_spine_links": 513, "spine_core_links": 0}
    uplinks = [c for c in cables if c.tier == "leaf-spine"]
    per_spine = Counter(c.b_device for c in uplinks)
    assert [per_spine[f"is00-spine{n:03d}"] for n in range(1, 14)] == [40] * 6 + [39] * 7
    last_leaf = [c for c in cables if "is00-leaf026" in (c.a_device, c.b_device)]
    assert sorted(c.b_port for c in last_leaf if c.tier == "node-leaf") == list(range(1, 13))
    assert sorted(c.a_port for c in last_leaf if c.tier == "leaf-spine") == list(range(21, 34))
    # Uplink g goes to spine g mod 13: leaf 1's first uplink (port 21) to spine 1 port 1,
    # leaf 2's first (uplink 20) to spine 20 mod 13 + 1 = 8.
    leaf2 = next(c for c in uplinks if c.a_device == "is00-leaf002" and c.a_port == 21)
    assert leaf2.b_device == "is00-spine008"


@pytest.mark.parametrize(
    "path",
    [
        STARTER,
        FAT_TREE,
        ROCE_PLANES,
        ROOT / "tests" / "fabric" / "roce-tor-racks-24.yaml",
        ROOT / "tests" / "plan" / "specs" / "meta-24k-roce.yaml",
        ROOT / "tests" / "plan" / "specs" / "alibaba-hpn-pod.yaml",
        ROOT / "inventories" / "roce-10k" / "cluster.yaml",
        ROOT / "inventories" / "h100-100k" / "cluster.yaml",
    ],
    ids=lambda p: p.parent.name if p.name == "cluster.yaml" else p.stem,
)
def test_totals_agree_with_the_plan_and_every_port_is_used_once(path: Path) -> None:
    cables, result = _cables(path)
    fabric = result.plan.fabric  # type: ignore[attr-defined]
    assert cable_totals(cables) == {
        "node_links": fabric.node_links,
        "leaf_spine_links": fabric.leaf_spine_links,
        "spine_core_links": fabric.spine_core_links,
    }
    assert len(cables) == fabric.cables
    catalog, topology = result.loaded.catalog, result.loaded.spec.network.topology
    leaf_ports = catalog.switches[topology.switch].ports
    spine_ports = catalog.switches[topology.spine_switch or topology.switch].ports
    ends: Counter[tuple[str, str, int]] = Counter()
    for c in cables:
        ends[(c.a_device, c.a_hca, c.a_port)] += 1
        ends[(c.b_device, "", c.b_port)] += 1
        limit = leaf_ports if c.tier == "node-leaf" else spine_ports
        assert 1 <= c.b_port <= limit, c
        if c.tier == "leaf-spine":
            # Uplinks take the ports above the leaf's downlinks (k/2 unless a ratio below 1).
            assert fabric.leaf_downlinks < c.a_port <= leaf_ports, c
        if c.tier == "spine-core":
            assert 1 <= c.a_port <= spine_ports, c
    assert max(ends.values()) == 1


def test_csv_has_a_header_and_one_line_per_cable() -> None:
    result = plan_spec(STARTER)
    assert result.plan is not None and result.plan.fabric is not None
    spec, catalog, fabric = result.loaded.spec, result.loaded.catalog, result.plan.fabric
    layout = plan_layout(spec, catalog, fabric, result.plan.power)
    text = "".join(cabling_csv(placed_cables(spec, catalog, fabric, layout)))
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_COLUMNS
    # gpu01 in rack 2 of row 1 (the head node's rack is first), the leaf in the network
    # row: 2,400 mm across rows, 600 along, 82 U of climb (3,644.9 mm), 1,200 mm of tray
    # drops and 600 of slack: 8,444.9 mm, optics by reach (no sold length catalogued).
    assert rows[1] == [
        "1",
        "node-leaf",
        "R01-02",
        "1",
        "gpu01",
        "1",
        "mlx5_0",
        "",
        "",
        "R02-01",
        "1",
        "is00-leaf001",
        "1",
        "1",
        "1",
        "0",
        "0",
        "400",
        "8.445",
        "optics",
        "MMA4Z00-NS + MMA4Z00-NS400",
        "",
        "#1 R01-02 U1 gpu01 mlx5_0 / R02-01 U1 is00-leaf001 P1",
    ]
    assert len(rows) == 65


ROCE_INTERFACES = ", interfaces: [ens108np0, ens110np0, ens841np0, ens842np0]"


@pytest.mark.parametrize("example", ["infiniband", "roce", "roce-rail-names"])
def test_a_node_port_has_the_name_the_inventory_gives_it(example: str, tmp_path: Path) -> None:
    # The sheet, the fabric check (which matches by the sheet's names) and the inventory
    # name a node's port alike: on InfiniBand its RDMA device (nccl_hcas, and the node
    # description ibnetdiscover shows), on RoCE its interface (roce_nics' netdev: the
    # spec's names, as roce-rails-32 gives them, else railN; what LLDP shows).
    path = {"infiniband": STARTER, "roce": ROCE_RAILS}.get(example, tmp_path / "cluster.yaml")
    if example == "roce-rail-names":
        text = ROCE_RAILS.read_text()
        assert ROCE_INTERFACES in text
        path.write_text(text.replace(ROCE_INTERFACES, ""))
    cables, result = _cables(path)
    spec = result.loaded.spec  # type: ignore[attr-defined]
    inventory = build_inventory(spec, result.loaded.catalog, result.plan)  # type: ignore[attr-defined]
    named = 0
    for cable in cables:
        if cable.tier != "node-leaf":
            continue
        host = inventory.host_vars[cable.a_device]
        if spec.network.fabric == "infiniband":
            hcas = inventory.group_vars[f"pool_{host['myriad_pool']}"]["nccl_hcas"]
            assert cable.a_hca == hcas[cable.rail]["name"], cable
        else:
            assert cable.a_hca == host["roce_nics"][cable.rail]["netdev"], cable
        named += 1
    assert named == result.plan.fabric.node_links  # type: ignore[attr-defined]
    host, names = {
        "infiniband": ("gpu08", [f"mlx5_{n}" for n in range(8)]),
        "roce": ("gpu24", ["ens108np0", "ens110np0", "ens841np0", "ens842np0"]),
        "roce-rail-names": ("gpu24", ["rail0", "rail1", "rail2", "rail3"]),
    }[example]
    assert [c.a_hca for c in cables if c.a_device == host] == names
