"""The fabric picture: the detailed view at 64 GPUs and the grouped one at 100,000 hold
their switches, nodes, labels and legend, and no two boxes overlap; the pictures in docs/
are what `myriad plan --svg` draws now."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchmark_module import load_benchmark
from headless_chromium import headless_chromium
from myriad.cli import main
from myriad.plan.cabling import iter_cables
from myriad.plan.fabric import FabricLimit
from myriad.plan.pipeline import plan_spec
from myriad.views.fabric_files import fabric_picture
from myriad.views.fabric_svg import FONT, fabric_svg, text_width

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


def _h100(gpus: int, island_nodes: int, tmp_path: Path) -> Path:
    """h100-100k resized as benchmarks/plan_scale.py does, with islands of `island_nodes`."""
    text = load_benchmark("plan_scale").spec_for(gpus)
    assert "island_nodes: 512" in text
    path = tmp_path / "cluster.yaml"
    path.write_text(text.replace("island_nodes: 512", f"island_nodes: {island_nodes}"))
    return path


@pytest.mark.parametrize(
    ("island_nodes", "limits"),
    [
        # 245 islands of 512 nodes; a 128-port core switch links 128 of them.
        (512, ["fabric-groups-per-core"]),
        # 128 islands of 977 nodes (fewest that one core reaches) need 95 spines each; a
        # leaf's 64 uplinks reach 64 of them: the islands are not non-blocking.
        (977, ["fabric-spines-per-group"]),
    ],
)
def test_at_1m_gpus_the_picture_says_what_the_lints_say(
    island_nodes: int, limits: list[str], tmp_path: Path
) -> None:
    # Issue #31: the grouped picture drew "leaves are 1:1 to spines" and a three-tier core
    # where the plan's lints say the islands are not non-blocking or need a fourth tier.
    spec = _h100(1_000_000, island_nodes, tmp_path)
    result = plan_spec(spec)
    findings = [f for f in result.findings if f.id.startswith("fabric-")]
    assert [f.id for f in findings] == limits
    out = tmp_path / "fabric.svg"
    assert main(["plan", str(spec), "--svg", str(out)]) == 1  # the lint errors
    root = ET.fromstring(out.read_text())
    shown = " ".join(" ".join(t.itertext()) for t in root.iterfind(".//svg:text", NS))
    for finding in findings:
        assert finding.message in _unwrapped(root)
    if "fabric-spines-per-group" in limits:
        assert "1:1 to spines" not in shown and "1:1 in an island," not in shown
        # Each island by its own spines: 127 of 977 nodes (95), the last of 921 (89).
        labels = [t.text for t in _texts(root, "label")]
        assert "not non-blocking: a leaf reaches 64 of 95 spines" in labels
        assert "not non-blocking: a leaf reaches 64 of 89 spines" in labels
    if "fabric-groups-per-core" in limits:
        assert "a fourth tier is needed: the core reaches 128 of 245" in shown
    _assert_no_overlap_and_labels_inside(root)
    width = float(root.get("width", 0))
    for text in _texts(root, "limit"):
        assert float(text.get("x", 0)) + text_width(text.text or "") <= width


def test_a_small_fabric_states_its_limits_too(tmp_path: Path) -> None:
    result = plan_spec(STARTER)
    assert result.plan is not None and result.plan.fabric is not None
    cables = list(iter_cables(result.loaded.spec, result.loaded.catalog, result.plan.fabric))
    limit = FabricLimit("spines-per-group", "a made-up shortfall", "a made-up remedy", 9, 8)
    root = ET.fromstring(fabric_svg("starter-64", result.plan.fabric, cables, 8, (limit,)))
    assert _unwrapped(root) == "a made-up shortfall. Remedy: a made-up remedy."
    legend = [t.text or "" for t in _texts(root, "legend-line")]
    assert any("(not non-blocking)" in line for line in legend)
    _assert_no_overlap_and_labels_inside(root)


def _unwrapped(root: ET.Element) -> str:
    """The limits block's lines joined back into its sentences."""
    return " ".join(t.text or "" for t in _texts(root, "limit"))


@pytest.mark.parametrize(
    ("doc", "spec"), [("fabric-starter-64.svg", STARTER), ("fabric-h100-100k.svg", H100K)]
)
def test_the_pictures_in_docs_are_what_plan_draws(doc: str, spec: Path, tmp_path: Path) -> None:
    out = tmp_path / doc
    assert main(["plan", str(spec), "--svg", str(out)]) == 0
    assert (ROOT / "docs" / doc).read_text() == out.read_text(), (
        f"docs/{doc} is stale: myriad plan {spec.relative_to(ROOT)} --svg docs/{doc}"
    )


SPECS = ROOT / "tests" / "plan" / "specs"


def _rails_only(tmp_path: Path) -> Path:
    """The HPN Pod's hosts, 512 of them, with eight single-port NICs on rails-only leaves."""
    text = (SPECS / "alibaba-hpn-pod.yaml").read_text()
    for old, new in [
        ("count: 1920", "count: 512"),
        ("model: HPN-NIC-2x200G, count: 8", "model: ConnectX-7, count: 8"),
        ("switch: SN5600-200G", "switch: SN5600-400G"),
        ("planes: 2", "rails_only: true"),
    ]:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "rails-only.yaml"
    path.write_text(text)
    return path


def _svg_of(spec: Path, tmp_path: Path) -> tuple[ET.Element, Path]:
    out = tmp_path / f"{spec.stem}.svg"
    # These test specs carry lints of their own (no addresses, no DOCA): exit 1, picture drawn.
    assert main(["plan", str(spec), "--svg", str(out)]) in (0, 1)
    return ET.fromstring(out.read_text()), out


@pytest.mark.parametrize(
    ("spec", "labels", "notes"),
    [
        (
            SPECS / "meta-24k-roce.yaml",
            ["islands 0-7 (x8)", "192 leaves, 18 spines", "core: 7 x CTSW-576x400G"],
            ["8 islands; in each, leaves are 1:1.125 to spines (more uplinks than endpoints)"],
        ),
        (
            SPECS / "alibaba-hpn-pod.yaml",
            ["240 leaves, 120 spines", "2 planes: 120 leaves, 60 spines each"],
            ["1 island; in each, leaves are 1:1 to spines"],
        ),
        (
            None,
            ["64 leaves, 32 spines", "rails only: 8 rail networks, 8 leaves, 4 spines each"],
            ["1 island; in each, leaves are 1:1 to spines"],
        ),
    ],
    ids=["meta-zones", "hpn-planes", "rails-only"],
)
def test_zones_planes_and_rails_only_are_drawn_at_scale(
    spec: Path | None, labels: list[str], notes: list[str], tmp_path: Path
) -> None:
    root, _ = _svg_of(spec or _rails_only(tmp_path), tmp_path)
    shown = [t.text for t in _texts(root, "label")]
    assert all(label in shown for label in labels), shown
    assert [t.text for t in _texts(root, "note")] == notes
    # Aggregated: a few boxes, not one per switch.
    assert len(_boxes(root)) <= 3
    # None of these has a fabric-shape limit: nothing may say it is not non-blocking.
    text = " ".join(" ".join(t.itertext()) for t in root.iterfind(".//svg:text", NS))
    assert "not non-blocking" not in text
    _assert_no_overlap_and_labels_inside(root)


def test_each_plane_has_a_core_of_its_own_in_the_picture(tmp_path: Path) -> None:
    text = (SPECS / "alibaba-hpn-pod.yaml").read_text()
    text = text.replace("count: 1920", "count: 3840", 1).replace(
        "planes: 2", "planes: 2\n    island_nodes: 1920\n    inter_island_oversubscription: 15", 1
    )
    spec = tmp_path / "two-pods.yaml"
    spec.write_text(text)
    root, _ = _svg_of(spec, tmp_path)
    labels = [t.text for t in _texts(root, "label")]
    assert "a core of its own for each of 2 planes" in labels
    # A Pod's 1,920 x 16 ports x 200G over 15:1 at 200G: 2,048 core links, 1,024 a plane.
    assert [t.text for t in _texts(root, "link-label")] == ["~2,048 core links each (15:1)"]
    _assert_no_overlap_and_labels_inside(root)


def test_chromium_draws_the_zone_picture_with_its_legend(tmp_path: Path) -> None:
    chromium = headless_chromium(tmp_path / "profile")
    root, svg = _svg_of(SPECS / "meta-24k-roce.yaml", tmp_path)
    width, height = int(root.get("width", 0)), int(root.get("height", 0))
    # Every text starts inside the view, and the legend is there.
    for text in root.iterfind(".//svg:text", NS):
        assert 0 <= float(text.get("x", 0)) < width and 0 < float(text.get("y", 0)) < height
    assert _texts(root, "legend-line")
    shot = tmp_path / "zones.png"
    subprocess.run(
        [
            *chromium,
            f"--screenshot={shot}",
            f"--window-size={width},{height}",
            svg.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    # A blank 900 x 492 PNG compresses to a few kB; this picture's boxes and text make it
    # ~40 kB (looked at by hand when written).
    assert shot.stat().st_size > 20_000


EXAMPLES = sorted(
    [*ROOT.glob("inventories/*/cluster.yaml"), *(ROOT / "tests" / "plan" / "specs").glob("*.yaml")]
)


@pytest.mark.parametrize(
    "spec", EXAMPLES, ids=lambda p: p.parent.name if p.name == "cluster.yaml" else p.stem
)
def test_every_example_draws_its_fabric_legibly(spec: Path) -> None:
    # aws-dev's 32 EFA rails ran the rail legend past the picture's right edge. Drawn
    # from the plan, not `plan --svg`: some published designs plan with lint errors.
    root = ET.fromstring(fabric_picture(plan_spec(spec)))
    _assert_no_overlap_and_labels_inside(root)
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    for text in root.iterfind(".//svg:text", NS):
        x, y = float(text.get("x", 0)), float(text.get("y", 0))
        assert 0 <= x < width and 0 < y <= height, (text.text, x, y, width, height)
