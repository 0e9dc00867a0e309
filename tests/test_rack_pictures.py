"""The rack elevations and the floor of every example: each label inside the picture and a
legend present, for every spec a user can start from; one picture rendered by Chromium."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from headless_chromium import headless_chromium, screenshot
from myriad.plan.pipeline import plan_spec
from myriad.views.floor_svg import floor_picture
from myriad.views.rack_svg import rack_picture

ROOT = Path(__file__).resolve().parents[1]
NS = {"svg": "http://www.w3.org/2000/svg"}
SPECS = sorted([*ROOT.glob("inventories/*/cluster.yaml"), *ROOT.glob("tests/plan/specs/*.yaml")])
# 11 px sans-serif: about 6.5 px a character, the measure for a label's half width.
CHAR_PX = 6.5


def _name(path: Path) -> str:
    return path.parent.name if path.name == "cluster.yaml" else path.stem


def _pictures(path: Path) -> list[str]:
    plan = plan_spec(path).to_dict()["plan"]
    return [rack_picture(plan["power"], plan.get("fabric")), floor_picture(plan["power"])]


def _assert_labels_inside(svg: str) -> None:
    root = ET.fromstring(svg)
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    for text in root.iterfind(".//svg:text", NS):
        label = text.text or ""
        x, y = float(text.get("x", 0)), float(text.get("y", 0))
        half = len(label) * CHAR_PX / 2
        left, right = (
            (x - half, x + half) if text.get("text-anchor") == "middle" else (x, x + 2 * half)
        )
        assert left >= 0 and right <= width and 0 < y <= height, (label, left, right, width)


@pytest.mark.parametrize("path", SPECS, ids=_name)
def test_every_example_draws_its_racks_and_floor_legibly(path: Path) -> None:
    racks, floor = _pictures(path)
    for svg in (racks, floor):
        assert svg.startswith("<svg"), _name(path)
        _assert_labels_inside(svg)
    # A legend: a square and a name per colour drawn.
    assert "width='12' height='12'" in racks and "width='12' height='12'" in floor


def test_chromium_draws_the_meta_racks_and_floor(tmp_path: Path) -> None:
    chromium = headless_chromium(tmp_path / "profile")
    racks, floor = _pictures(ROOT / "tests" / "plan" / "specs" / "meta-24k-roce.yaml")
    page = tmp_path / "racks.html"
    page.write_text(f"<html><body style='margin:0'>{racks}{floor}</body></html>")
    # A blank 800 x 560 PNG is a few kB; the racks, the rows and their labels make it
    # ~30 kB (looked at by hand when written).
    assert screenshot(chromium, page, tmp_path / "racks.png", 800, 560) > 15_000
