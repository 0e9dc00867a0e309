"""The fabric picture: the detailed view at 64 GPUs and the grouped one at 100,000 hold
their switches, nodes, labels and legend, and no two boxes overlap; the pictures in docs/
are what `myriad plan --svg` draws now."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.views.fabric_svg import FONT, text_width

ROOT = Path(__file__).resolve().parents[2]
NS = {"svg": "http://www.w3.org/2000/svg"}
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
H100K = ROOT / "inventories" / "h100-100k" / "cluster.yaml"
FAT_TREE = ROOT / "tests" / "fabric" / "fat-tree-512.yaml"


def _draw(spec: Path, tmp_path: Path) -> ET.Element:
    out = tmp_path / "fabric.svg"
    assert main(["plan", str(spec), "--svg", str(out)]) == 0
    return ET.fromstring(out.read_text())


def _boxes(root: ET.Element) -> list[tuple[str, str, float, float, float, float]]:
    return [
        (
            r.get("data-name", ""),
            r.get("data-tier", ""),
            float(r.get("x", 0)),
            float(r.get("y", 0)),
            float(r.get("width", 0)),
            float(r.get("height", 0)),
        )
        for r in root.iterfind(".//svg:rect[@class='box']", NS)
    ]


def _texts(root: ET.Element, cls: str) -> list[ET.Element]:
    return list(root.iterfind(f".//svg:text[@class='{cls}']", NS))


def _assert_no_overlap_and_labels_inside(root: ET.Element) -> None:
    boxes = _boxes(root)
    for n, (name, _, x, y, w, h) in enumerate(boxes):
        for other, _, x2, y2, w2, h2 in boxes[n + 1 :]:
            apart = x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
            assert apart, f"boxes {name} and {other} overlap"
    for label in _texts(root, "label"):
        cx, ty, text = float(label.get("x", 0)), float(label.get("y", 0)), label.text or ""
        half = text_width(text, float(label.get("font-size", FONT))) / 2
        assert any(
            x <= cx - half and cx + half <= x + w and y <= ty <= y + h for _, _, x, y, w, h in boxes
        ), f"label {text!r} is not inside a box"


def test_starter_is_one_leaf_eight_nodes_and_64_rail_coloured_cables(tmp_path: Path) -> None:
    root = _draw(STARTER, tmp_path)
    tiers = sorted((tier, name) for name, tier, *_ in _boxes(root))
    assert tiers == [("leaf", "is00-leaf001")] + [("node", f"gpu0{n}") for n in range(1, 9)]
    cables = root.findall(".//svg:line[@class='cable']", NS)
    assert len(cables) == 64
    assert len({c.get("stroke") for c in cables}) == 8  # one colour per rail
    legend = [t.text for t in _texts(root, "legend-line")]
    assert "1 leaf (QM9700, 64 ports)" in legend
    assert "cables: 64 node, 0 leaf-spine, 0 spine-core" in legend
    _assert_no_overlap_and_labels_inside(root)


def test_fat_tree_draws_every_switch_and_each_leaf_spine_pair(tmp_path: Path) -> None:
    root = _draw(FAT_TREE, tmp_path)
    tiers = [tier for _, tier, *_ in _boxes(root)]
    assert (tiers.count("spine"), tiers.count("leaf"), tiers.count("node")) == (13, 26, 64)
    # 25 full leaves reach all 13 spines, the last leaf's 13 uplinks too: 26 x 13 pairs.
    assert len(root.findall(".//svg:line[@class='link']", NS)) == 26 * 13
    _assert_no_overlap_and_labels_inside(root)


def test_100k_gpus_are_grouped_by_island_shape(tmp_path: Path) -> None:
    root = _draw(H100K, tmp_path)
    names = [name for name, *_ in _boxes(root)]
    assert names == ["core", "islands 0-23 (x24)", "island 24"]
    labels = [t.text for t in _texts(root, "label")]
    assert "each 512 nodes, 4,096 GPUs" in labels
    assert "core: 391 x SN5600-400G" in labels
    assert [t.text for t in _texts(root, "link-label")] == [
        "~2,048 core links each (2:1)",
        "~848 core links each (2:1)",
    ]
    _assert_no_overlap_and_labels_inside(root)


@pytest.mark.parametrize(
    ("doc", "spec"), [("fabric-starter-64.svg", STARTER), ("fabric-h100-100k.svg", H100K)]
)
def test_the_pictures_in_docs_are_what_plan_draws(doc: str, spec: Path, tmp_path: Path) -> None:
    out = tmp_path / doc
    assert main(["plan", str(spec), "--svg", str(out)]) == 0
    assert (ROOT / "docs" / doc).read_text() == out.read_text(), (
        f"docs/{doc} is stale: myriad plan {spec.relative_to(ROOT)} --svg docs/{doc}"
    )
