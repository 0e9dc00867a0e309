"""Media chosen for a fabric cable from its run length, from the catalog's LinkX figures."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from myriad.plan.media import KINDS, UNCATALOGUED, UNKNOWN, Media, choose_media
from myriad.spec.catalog_models import CableModel
from myriad.spec.loader import shipped_catalog

CABLES = shipped_catalog().cables
SWITCH_HOST_MM = "MMA4Z00-NS + MMA4Z00-NS400"


def _switches(run_mm: float, speed_gbps: int = 400) -> Media:
    return choose_media(run_mm, speed_gbps, CABLES, switch_to_switch=True)


def _to_host(run_mm: float, speed_gbps: int = 400) -> Media:
    return choose_media(run_mm, speed_gbps, CABLES, switch_to_switch=False)


@pytest.mark.parametrize(
    ("run_mm", "expected"),
    [
        (0, Media("dac", "MCP4Y10-Nxxx", 500, 0)),  # the shortest switch DAC is 0.5 m
        (900, Media("dac", "MCP4Y10-Nxxx", 1000, 0)),
        (1000, Media("dac", "MCP4Y10-Nxxx", 1000, 0)),  # a sold length takes itself
        (2000, Media("dac", "MCP4Y10-Nxxx", 2000, 0)),  # the DAC's longest
        (2001, Media("acc", "MCA4J80-Nxxx", 3000, 0)),  # past it: active copper
        (2100, Media("acc", "MCA4J80-Nxxx", 3000, 0)),
        (4000.5, Media("acc", "MCA4J80-Nxxx", 5000, 0)),
        (5000, Media("acc", "MCA4J80-Nxxx", 5000, 0)),
        (5001, Media("optics", "MMA4Z00-NS", None, 2)),  # multimode, by reach alone
        (30_000, Media("optics", "MMA4Z00-NS", None, 2)),
        (50_000, Media("optics", "MMA4Z00-NS", None, 2)),  # multimode's 50 m
        (50_001, Media("optics", "MMS4X00-NS", None, 2)),  # then single-mode DR8, 100 m
        (100_001, Media("optics", "MMS4X00-NM", None, 2)),  # then 500 m
        (500_000, Media("optics", "MMS4X00-NM", None, 2)),
        (500_001, UNCATALOGUED),
        (600_000, UNCATALOGUED),
    ],
)
def test_a_switch_to_switch_ndr_run_takes_the_cheapest_media_that_covers_it(
    run_mm: float, expected: Media
) -> None:
    assert _switches(run_mm) == expected


@pytest.mark.parametrize(
    ("run_mm", "expected"),
    [
        (400, Media("dac", "MCP7Y00-Nxxx", 1000, 0)),  # the splitter starts at 1 m
        (1477.9, Media("dac", "MCP7Y00-Nxxx", 1500, 0)),
        (3000, Media("dac", "MCP7Y00-Nxxx", 3000, 0)),
        # active copper splitters are discontinued: straight to optics
        (3001, Media("optics", SWITCH_HOST_MM, None, 2)),
        (50_001, Media("optics", "MMS4X00-NS + MMS4X00-NS400", None, 2)),
        (100_000, Media("optics", "MMS4X00-NS + MMS4X00-NS400", None, 2)),
        (100_001, UNCATALOGUED),  # 500 m optics link switches only
    ],
)
def test_a_node_to_leaf_run_takes_switch_to_host_parts(run_mm: float, expected: Media) -> None:
    assert _to_host(run_mm) == expected


@pytest.mark.parametrize("speed_gbps", [200, 800])
def test_a_speed_without_catalogued_cables_is_not_guessed(speed_gbps: int) -> None:
    # A 1 m run at 200G is copper in any hall; with no 200G family read, the sheet says
    # it does not know rather than buying optics (transceivers still counted, as optics').
    assert _switches(1000, speed_gbps) == UNKNOWN == Media("unknown", "", None, 2)
    assert _to_host(1000, speed_gbps) == UNKNOWN


def test_a_negative_run_is_refused() -> None:
    with pytest.raises(ValueError, match="a run cannot be -1 mm long"):
        _switches(-1)


def _cable(**fields: Any) -> CableModel:
    return CableModel.model_validate({"speed_gbps": 200, "source": "test", **fields})


def test_an_entry_without_ends_serves_both_and_sold_fibre_lengths_are_chosen() -> None:
    cables = {
        "dac": _cable(kind="dac", part="D", lengths_mm=(1000, 2000)),
        "aoc": _cable(kind="optics", part="F", lengths_mm=(5000, 10_000, 30_000)),
        "sm": _cable(kind="optics", part="S", max_reach_mm=100_000),
    }
    for switch_to_switch in (True, False):

        def pick(run_mm: float, both: bool = switch_to_switch) -> Media:
            return choose_media(run_mm, 200, cables, switch_to_switch=both)

        assert pick(1500) == Media("dac", "D", 2000, 0)
        assert pick(2001) == Media("optics", "F", 5000, 2)
        assert pick(10_000) == Media("optics", "F", 10_000, 2)
        assert pick(30_001) == Media("optics", "S", None, 2)


def test_a_tie_goes_to_the_part_name_not_the_catalog_order() -> None:
    first = {"b": _cable(kind="dac", part="B", lengths_mm=(1000,))}
    second = {"a": _cable(kind="dac", part="A", lengths_mm=(1000,))}
    for cables in ({**first, **second}, {**second, **first}):
        assert choose_media(10, 200, cables, switch_to_switch=True).part == "A"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "dac", "lengths_mm": (2000, 1000)}, "ascending"),
        ({"kind": "dac", "lengths_mm": (1000, 1000)}, "ascending"),
        ({"kind": "dac"}, "give lengths_mm"),
        ({"kind": "optics"}, "give lengths_mm"),
        ({"kind": "acc", "lengths_mm": (3000,), "max_reach_mm": 5000}, "copper reaches"),
        ({"kind": "optics", "lengths_mm": (60_000,), "max_reach_mm": 50_000}, "exceed"),
        ({"kind": "aoc", "lengths_mm": (1000,)}, "kind"),
    ],
)
def test_a_cable_entry_that_cannot_be_chosen_from_is_refused(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        _cable(part="X", **fields)


@pytest.mark.parametrize("name", sorted(CABLES))
def test_every_shipped_cable_cites_its_source_and_sells_ascending_lengths(name: str) -> None:
    cable = CABLES[name]
    assert cable.kind in KINDS
    assert cable.source.strip()
    assert "docs.nvidia.com/networking/display/" in cable.source
    assert list(cable.lengths_mm) == sorted(set(cable.lengths_mm))
    assert cable.reach_mm > 0
    if cable.kind != "optics":
        assert cable.lengths_mm, "copper is sold in fixed lengths"
