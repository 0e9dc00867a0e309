"""Which media a fabric cable takes, from its run length, its speed and the catalog's cables.

Passive copper (DAC) is cheapest, then active copper (ACC), then optics (a fibre and a
transceiver at each end); a cable takes the cheapest kind that covers its run. Copper is
sold in fixed lengths, so within a kind the family with the shortest sold length that
covers the run wins. Optics may be catalogued by reach alone: then the fibre's length is
unknown (None) and the family with the shortest reach that covers the run wins.

Where the catalog tells switch-to-switch parts from switch-to-host parts (`ends`), a link
between switches takes only the first and a node-to-leaf link only the second; an entry
without `ends` serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from myriad.spec.catalog_models import CableKind, CableModel

# Cheapest first: the order a cable tries them in.
KINDS: tuple[CableKind, ...] = ("dac", "acc", "optics")


@dataclass(frozen=True, slots=True)
class Media:
    """What one cable is made of."""

    kind: str  # "dac" | "acc" | "optics"
    part: str  # catalog part family, "" when none is catalogued
    length_mm: int | None  # the sold length covering the run; None: no catalogued length
    transceivers: int  # at its two ends together: 0 for copper, 2 for optics


# Families of the speed exist but none reaches: only optics go that far.
UNCATALOGUED = Media("optics", "", None, 2)
# No family of the speed at all: the run may well be copper, so the sheet does not guess;
# its transceivers are counted as optics', the conservative figure.
UNKNOWN = Media("unknown", "", None, 2)


def choose_media(
    run_mm: float,
    speed_gbps: int,
    cables: Mapping[str, CableModel],
    *,
    switch_to_switch: bool,
) -> Media:
    """The cheapest catalogued media covering a run of `run_mm` at `speed_gbps` (the lower
    speed of the two ends); optics with no part or length when nothing covers it, and
    `UNKNOWN` when the catalog has no cable of that speed."""
    if run_mm < 0:
        raise ValueError(f"a run cannot be {run_mm} mm long")
    if not any(cable.speed_gbps == speed_gbps for cable in cables.values()):
        return UNKNOWN
    wanted = "switch-switch" if switch_to_switch else "switch-host"
    fitting = [
        cable
        for cable in cables.values()
        if cable.speed_gbps == speed_gbps
        and cable.ends in (None, wanted)
        and cable.reach_mm >= run_mm
    ]
    for kind in KINDS:
        of_kind = [cable for cable in fitting if cable.kind == kind]
        if of_kind:
            best = min(of_kind, key=lambda cable: _fit_key(cable, run_mm))
            return Media(
                kind=kind,
                part=best.part,
                length_mm=_sold_length(best, run_mm),
                transceivers=2 if kind == "optics" else 0,
            )
    return UNCATALOGUED


def _sold_length(cable: CableModel, run_mm: float) -> int | None:
    return next((length for length in cable.lengths_mm if length >= run_mm), None)


def _fit_key(cable: CableModel, run_mm: float) -> tuple[int, str]:
    # The covering sold length, else the reach; the part breaks ties so the choice does
    # not hang on the catalog's order.
    length = _sold_length(cable, run_mm)
    return (length if length is not None else cable.reach_mm, cable.part)
