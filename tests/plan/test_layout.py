"""Racks, rows and rack units of every node and fabric switch; figures derived by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.errors import SpecError
from myriad.plan.cabling import iter_cables
from myriad.plan.layout import plan_layout, rack_name
from myriad.plan.pipeline import PlanResult, plan_loaded, plan_spec
from myriad.plan.power import pack_racks
from myriad.spec import load_spec_text

ROOT = Path(__file__).resolve().parents[2]
META = ROOT / "tests" / "plan" / "specs" / "meta-24k-roce.yaml"
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def test_devices_fill_a_rack_until_its_units_or_its_power_run_out() -> None:
    # 42 U, 40 kW. Three 26 U chassis of 20 kW: 26 + 26 > 42, one a rack. Then 1 U
    # switches of 1.1 kW: the third chassis' rack takes 16 (U27-U42, 20 + 17.6 = 37.6 kW),
    # the next rack the other 24 (26.4 kW).
    devices = [(26, 20.0)] * 3 + [(1, 1.1)] * 40
    placed = list(pack_racks(devices, 42, 40.0))
    assert placed[:3] == [(0, 1), (1, 1), (2, 1)]
    assert placed[3:19] == [(2, unit) for unit in range(27, 43)]
    assert placed[19:] == [(3, unit) for unit in range(1, 25)]


def test_a_device_over_the_rack_budget_stands_alone() -> None:
    # 50 kW alone in a 40 kW rack: a rack of its own, and the next device opens another.
    assert list(pack_racks([(1, 1.0), (2, 50.0), (1, 1.0)], 42, 40.0)) == [
        (0, 1),
        (1, 1),
        (2, 1),
    ]


def test_racks_are_named_by_row_and_place_from_one() -> None:
    assert rack_name(0, 16) == "R01-01"
    assert rack_name(15, 16) == "R01-16"
    assert rack_name(16, 16) == "R02-01"
    assert rack_name(1552, 16) == "R98-01"


def _meta() -> PlanResult:
    return plan_spec(META)


def test_meta_racks_two_servers_under_their_rtsw() -> None:
    # Llama 3 paper 3.3.1: two servers (16 GPUs) a rack under one RTSW. HGX-H100-8GPU is
    # 8 U: the servers at U1 and U9; the 1 U RTSW at the rack's top, U42.
    result = _meta()
    assert result.plan is not None and result.plan.fabric is not None
    layout = plan_layout(
        result.loaded.spec, result.loaded.catalog, result.plan.fabric, result.plan.power
    )
    assert [(layout.rack_name(n), layout.slots[n].unit) for n in ("gpu0001", "gpu0002")] == [
        ("R01-01", 1),
        ("R01-01", 9),
    ]
    assert (layout.rack_name("is00-leaf001"), layout.slots["is00-leaf001"].unit) == ("R01-01", 42)
    assert (layout.rack_name("gpu0003"), layout.rack_name("is00-leaf002")) == ("R01-02", "R01-02")
    # 3,072 servers two a rack: 1,536 racks, and one for the three controllers: 1,537 =
    # 96 rows of 16 and one rack; the network row starts on row 98.
    power = result.plan.power
    assert power.server_racks == 1537
    assert layout.rack_name("is00-spine001") == "R98-01"


def test_meta_switch_racks_hold_one_26u_chassis_each() -> None:
    # The CTSW/ATSW chassis are 26 U: two do not fit 42 U, so each takes a rack (the old
    # count pooled units, 151 * 26 / 42, and under-counted). The RTSWs stand in the server
    # racks and take no switch rack.
    result = _meta()
    assert result.plan is not None and result.plan.fabric is not None
    fabric, power = result.plan.fabric, result.plan.power
    assert (fabric.spines, fabric.core_switches) == (144, 7)
    assert power.switch_racks == 151
    [fill] = [f for f in power.rack_fills if f.profile == "grand-teton"]
    assert (fill.per_rack, fill.tor_leaves, fill.tor_units, fill.tor_kw) == (2, 1, 1, 1.0)


def test_every_cable_end_of_the_starter_has_a_place_and_the_racks_match_the_plan() -> None:
    result = plan_spec(STARTER)
    assert result.plan is not None and result.plan.fabric is not None
    spec, catalog, fabric = result.loaded.spec, result.loaded.catalog, result.plan.fabric
    layout = plan_layout(spec, catalog, fabric, result.plan.power)
    ends = {
        device
        for cable in iter_cables(spec, catalog, fabric)
        for device in (cable.a_device, cable.b_device)
    }
    assert ends <= set(layout.slots)
    used = {slot.rack for slot in layout.slots.values()}
    assert len(used) == result.plan.power.server_racks + result.plan.power.switch_racks


def test_a_tor_rack_that_cannot_hold_its_servers_is_an_error() -> None:
    # Four servers a leaf (32 ports down, 32 up to 32 CTSW) in 30 U racks: 4 * 8 + 1 = 33 U;
    # 4 * 10.2 kW + the RTSW's 1 kW = 41.8 kW in a 40 kW rack.
    text = META.read_text().replace("leaf_nodes: 2", "leaf_nodes: 4")
    text = text.replace("island_oversubscription: 0.8889", "island_oversubscription: 1")
    text = text.replace("island_spines: 18", "island_spines: 32")
    text = text.replace("cooling: liquid}", "cooling: liquid, rack_units: 30}")
    result = plan_loaded(load_spec_text(text, "meta-4.yaml"))
    found = [(f.id, f.message) for f in result.findings if f.id == "rack-tor"]
    what = "a rack of 4 grand-teton servers and 1 leaf switch (network.topology.leaf_nodes)"
    assert found == [
        ("rack-tor", f"{what} takes 33 U, more than the 30 U of a rack (facility.rack_units)"),
        (
            "rack-tor",
            f"{what} draws 41.8 kW, more than the 40 kW a rack may draw (facility.rack_kw)",
        ),
    ]


@pytest.mark.parametrize("field", ["racks_per_row", "rack_width_mm", "row_pitch_mm"])
def test_hall_figures_must_be_positive(field: str) -> None:
    text = STARTER.read_text().replace("facility: {", f"facility: {{{field}: 0, ", 1)
    with pytest.raises(SpecError, match=f"facility.{field}"):
        load_spec_text(text, "starter.yaml")
