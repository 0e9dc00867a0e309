"""The contractor's sheet: each cable's two ends placed (rack, unit, cage and lane), its run
measured, its media chosen from the catalog's lengths and reach, and a label; figures
derived by hand from the layout's stated defaults (600 mm racks, 2,400 mm rows, 600 mm
tray drop, 300 mm slack a side, 44.45 mm a rack unit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.plan.cabling import Cable, placed_cables, sheet_totals
from myriad.plan.layout import plan_layout
from myriad.plan.pipeline import plan_spec

ROOT = Path(__file__).resolve().parents[2]
META = ROOT / "tests" / "plan" / "specs" / "meta-24k-roce.yaml"
SUPERPOD = ROOT / "tests" / "plan" / "specs" / "dgx-superpod-h100.yaml"
EXAMPLES = [
    ROOT / "inventories" / "starter-64" / "cluster.yaml",
    ROOT / "inventories" / "roce-10k" / "cluster.yaml",
    ROOT / "inventories" / "gb200-nvl72" / "cluster.yaml",
    SUPERPOD,
    META,
    ROOT / "tests" / "plan" / "specs" / "alibaba-hpn-pod.yaml",
    ROOT / "tests" / "fabric" / "fat-tree-512.yaml",
]


def _sheet(path: Path) -> list[Cable]:
    result = plan_spec(path)
    assert result.plan is not None and result.plan.fabric is not None
    spec, catalog, fabric = result.loaded.spec, result.loaded.catalog, result.plan.fabric
    return list(
        placed_cables(spec, catalog, fabric, plan_layout(spec, catalog, fabric, result.plan.power))
    )


def test_meta_rack_copper_runs_from_the_server_up_to_its_rtsw() -> None:
    # gpu0001 at U1, its RTSW at U42 of the same rack: 41 U * 44.45 = 1,822.45 mm + 600 mm
    # slack = 2,422.45 mm. Switch-to-host DAC (MCP7Y00) is sold at 1, 1.5, 2, 2.5, 3 m: 2.5 m.
    first = _sheet(META)[0]
    assert (first.a_rack, first.a_unit, first.b_rack, first.b_unit) == ("R01-01", 1, "R01-01", 42)
    assert (first.length_m, first.media, first.part, first.part_m) == (
        2.422,
        "dac",
        "MCP7Y00-Nxxx",
        2.5,
    )
    assert first.label == "#1 R01-01 U1 gpu0001 rail0 / R01-01 U42 is00-leaf001 P1"


def test_superpod_node_to_network_row_is_optics() -> None:
    # dgx001 in rack 2 of row 1 (the controllers take rack 1), U1; is00-leaf001 in the
    # network row, row 4 (44 server racks fill 3 rows of 16), rack 1, U1. Climb 41 + 41 U =
    # 3,644.9 mm; 3 rows * 2,400 = 7,200; 1 rack * 600; tray drops 2 * 600; slack 600:
    # 13,244.9 mm, past every copper reach: multimode optics (50 m) with the host's OSFP.
    first = _sheet(SUPERPOD)[0]
    assert (first.a_rack, first.b_rack, first.length_m) == ("R01-02", "R04-01", 13.245)
    assert (first.media, first.part, first.part_m) == ("optics", "MMA4Z00-NS + MMA4Z00-NS400", None)
    assert (first.a_cage, first.b_cage, first.b_lane) == (None, 1, 1)


def test_superpod_leaf_to_spine_in_one_rack_names_cages_and_lanes() -> None:
    # 36 QM9700 of 1.1 kW fill a 40 kW rack: 32 leaves at U1-U32, spines from U33. Leaf 1
    # port 33 (its first uplink) is twin-port cage 17, lane 1. 32 U * 44.45 + 600 slack =
    # 2,022.4 mm: over the 2 m switch DAC, within the 3 m active copper.
    [uplink] = [c for c in _sheet(SUPERPOD) if c.tier == "leaf-spine"][:1]
    assert (uplink.a_device, uplink.a_port, uplink.a_cage, uplink.a_lane) == (
        "is00-leaf001",
        33,
        17,
        1,
    )
    assert (uplink.b_device, uplink.b_unit, uplink.b_cage, uplink.b_lane) == (
        "is00-spine001",
        33,
        1,
        1,
    )
    assert (uplink.length_m, uplink.media, uplink.part, uplink.part_m) == (
        2.022,
        "acc",
        "MCA4J80-Nxxx",
        3.0,
    )


@pytest.mark.parametrize(
    "path", EXAMPLES, ids=lambda p: p.stem if p.stem != "cluster" else p.parent.name
)
def test_every_example_sheet_adds_up_to_the_plan(path: Path) -> None:
    result = plan_spec(path)
    assert result.plan is not None and result.plan.fabric is not None
    fabric = result.plan.fabric
    totals = sheet_totals(result.loaded.catalog, fabric)
    for cable in _sheet(path):
        assert cable.a_rack and cable.b_rack and cable.length_m is not None and cable.label
        totals.add(cable)
    counted = totals.to_dict()
    assert (counted["node_links"], counted["leaf_spine_links"], counted["spine_core_links"]) == (
        fabric.node_links,
        fabric.leaf_spine_links,
        fabric.spine_core_links,
    )
    assert sum(counted["by_media"].values()) == sum(counted["by_part"].values())
    # The plan counts optics on every cable: the sheet can need fewer transceivers, never more.
    assert counted["transceivers"] <= fabric.transceivers


def test_with_every_cable_optics_the_sheet_counts_the_plans_transceivers() -> None:
    # starter-64: eight nodes in one rack row, the leaf in the network row, every run over
    # 8 m: 64 optics, one OSFP a host port and one twin-port a leaf cage: 64 + 32 = 96.
    result = plan_spec(EXAMPLES[0])
    assert result.plan is not None and result.plan.fabric is not None
    totals = sheet_totals(result.loaded.catalog, result.plan.fabric)
    for cable in _sheet(EXAMPLES[0]):
        totals.add(cable)
    counted = totals.to_dict()
    assert counted["by_media"] == {"optics": 64}
    assert counted["transceivers"] == result.plan.fabric.transceivers == 96
