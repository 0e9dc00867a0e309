"""Length of one cable run between two rack positions.

A pure function of where the two ends sit and of the facility's routing figures. The
figures of a facility (rack width, row pitch, how far a run climbs to reach the overhead
tray, the slack left at each end) differ from hall to hall and no vendor publishes them, so
they are inputs the caller states (the spec's `facility`), never defaults this module
invents. Only the rack unit is a standard: EIA/ECA-310-E defines 1U as 1.75 in, and the
inch is 25.4 mm exactly, so 1U = 44.45 mm.

Within a rack a cable runs vertically between the two devices. Between racks of one row
it climbs from each end to the top of its rack, crosses the racks between them in the
overhead tray and drops again; the routing allowance pays for the bends into and out of
the tray at both racks. Between rows the tray also crosses the rows between them, and the
run is counted along the tray's two legs (across rows, then along the row), not diagonally.
"""

from __future__ import annotations

from dataclasses import dataclass

# EIA/ECA-310-E: 1U = 1.75 in; 1 in = 25.4 mm exactly, so 1.75 * 25.4 = 44.45 mm.
RACK_UNIT_MM = 44.45


@dataclass(frozen=True)
class RackPosition:
    """Where one end of a cable sits: the rack's index in its row (0 is the first rack),
    the rack unit of the port, counted from 1 at the bottom, and the row (0 is the first)."""

    rack: int
    unit: int
    row: int = 0


@dataclass(frozen=True)
class Routing:
    """A facility's routing figures, all in millimetres except the rack height.

    rack_width_mm: centre-to-centre distance of neighbouring racks in a row.
    row_pitch_mm: centre-to-centre distance of neighbouring rows.
    rack_units: usable height of a rack; a run between racks climbs to its top.
    tray_allowance_mm: added once per rack a run leaves or enters through the tray.
    slack_mm: left at each end of every cable for service loops."""

    rack_width_mm: float
    rack_units: int
    tray_allowance_mm: float
    slack_mm: float
    row_pitch_mm: float = 0.0


def run_length_mm(a: RackPosition, b: RackPosition, routing: Routing) -> float:
    """Millimetres of cable from `a` to `b` along the route, slack at both ends included."""
    for end in (a, b):
        if not 1 <= end.unit <= routing.rack_units:
            raise ValueError(f"unit {end.unit} is outside a {routing.rack_units}U rack")
        if end.rack < 0 or end.row < 0:
            raise ValueError(f"rack index {end.rack} in row {end.row} is negative")
    ends = 2 * routing.slack_mm
    if (a.row, a.rack) == (b.row, b.rack):
        return abs(a.unit - b.unit) * RACK_UNIT_MM + ends
    climb = (routing.rack_units - a.unit) + (routing.rack_units - b.unit)
    across = (
        abs(a.rack - b.rack) * routing.rack_width_mm + abs(a.row - b.row) * routing.row_pitch_mm
    )
    return climb * RACK_UNIT_MM + across + 2 * routing.tray_allowance_mm + ends
