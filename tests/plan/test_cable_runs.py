"""Cable run lengths between rack positions, figures derived by hand."""

from __future__ import annotations

import pytest

from myriad.plan.cable_runs import RackPosition, Routing, run_length_mm

# A hall chosen for round figures: 600 mm racks, 42U, 300 mm per tray bend, 250 mm slack.
HALL = Routing(
    rack_width_mm=600, rack_units=42, tray_allowance_mm=300, slack_mm=250, row_pitch_mm=2400
)


def test_same_rack_runs_the_unit_distance_plus_slack_at_both_ends() -> None:
    # server at U3 to ToR at U42: 39 U * 44.45 mm = 1733.55 mm; + 2 * 250 slack = 2233.55
    length = run_length_mm(RackPosition(0, 3), RackPosition(0, 42), HALL)
    assert length == pytest.approx(2233.55)


def test_same_unit_same_rack_is_only_the_slack() -> None:
    assert run_length_mm(RackPosition(4, 10), RackPosition(4, 10), HALL) == 500


def test_between_racks_climbs_to_the_tray_crosses_and_drops() -> None:
    # rack 1 U10 to rack 4 U40: climb (42-10) + (42-40) = 34 U * 44.45 = 1511.3 mm;
    # across 3 racks * 600 = 1800; tray bends 2 * 300 = 600; slack 2 * 250 = 500;
    # 1511.3 + 1800 + 600 + 500 = 4411.3 mm
    length = run_length_mm(RackPosition(1, 10), RackPosition(4, 40), HALL)
    assert length == pytest.approx(4411.3)


def test_length_does_not_depend_on_which_end_is_first() -> None:
    a, b = RackPosition(2, 5), RackPosition(0, 30)
    assert run_length_mm(a, b, HALL) == run_length_mm(b, a, HALL)


def test_neighbouring_racks_top_to_top_is_one_rack_width_and_the_bends() -> None:
    # U42 to U42 in racks 0 and 1: no climb; 600 + 600 bends + 500 slack = 1700 mm
    assert run_length_mm(RackPosition(0, 42), RackPosition(1, 42), HALL) == 1700


@pytest.mark.parametrize("unit", [0, 43])
def test_a_unit_outside_the_rack_is_refused(unit: int) -> None:
    with pytest.raises(ValueError, match=f"unit {unit} is outside a 42U rack"):
        run_length_mm(RackPosition(0, unit), RackPosition(0, 1), HALL)


def test_a_negative_rack_is_refused() -> None:
    with pytest.raises(ValueError, match="rack index -1 in row 0 is negative"):
        run_length_mm(RackPosition(-1, 1), RackPosition(0, 1), HALL)


def test_between_rows_the_tray_crosses_the_rows_then_runs_along_the_row() -> None:
    # row 0 rack 2 U40 to row 3 rack 5 U42: climb 2 U * 44.45 = 88.9 mm; across rows
    # 3 * 2400 = 7200; along the row 3 * 600 = 1800; bends 600; slack 500: 10188.9 mm
    length = run_length_mm(RackPosition(2, 40, row=0), RackPosition(5, 42, row=3), HALL)
    assert length == pytest.approx(10188.9)


def test_same_rack_index_in_another_row_is_not_the_same_rack() -> None:
    # U42 to U42, rack 0 of rows 0 and 1: 2400 + 600 bends + 500 slack = 3500 mm
    assert run_length_mm(RackPosition(0, 42, row=0), RackPosition(0, 42, row=1), HALL) == 3500
