"""`myriad plan --cabling FILE.csv --svg FILE`: the cabling sheet and the fabric picture,
written whole or not at all; what `--json` adds about the cables.

The sheet is never held whole: the CSV is written as its cables are placed, their totals
counted on the way, and `--json`'s list of cables is a `Streamed` that places them again
while the document is written (placing is deterministic and linear, so a second pass costs
time, not memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from myriad.errors import PlanError
from myriad.fsutil import atomic_write_lines, atomic_write_text
from myriad.plan.cabling import (
    Cable,
    SheetTotals,
    cabling_csv,
    iter_cables,
    placed_cables,
    sheet_totals,
)
from myriad.plan.fabric import fabric_limits
from myriad.plan.layout import plan_layout
from myriad.plan.pipeline import PlanResult
from myriad.views.fabric_svg import DETAILED_NODES, fabric_svg
from myriad.views.json_stream import Streamed


def _placed(result: PlanResult) -> Iterator[Cable]:
    plan = result.plan
    if plan is None or plan.fabric is None:
        raise PlanError("the spec has no compute fabric: there is nothing to cable or draw")
    spec, catalog, fabric = result.loaded.spec, result.loaded.catalog, plan.fabric
    return placed_cables(spec, catalog, fabric, plan_layout(spec, catalog, fabric, plan.power))


def _counted(cables: Iterator[Cable], totals: SheetTotals) -> Iterator[Cable]:
    for cable in cables:
        totals.add(cable)
        yield cable


def hall(result: PlanResult) -> dict[str, Any]:
    """The facility's figures every length on the sheet assumes."""
    facility = result.loaded.spec.facility
    return {
        "racks_per_row": facility.racks_per_row,
        "rack_units": facility.rack_units,
        "rack_width_mm": facility.rack_width_mm,
        "row_pitch_mm": facility.row_pitch_mm,
        "tray_drop_mm": facility.tray_drop_mm,
        "cable_slack_mm": facility.cable_slack_mm,
    }


def write_fabric_files(
    result: PlanResult, cabling: Path | None, svg: Path | None
) -> dict[str, Any]:
    """Write what was asked; with `cabling`, return the hall's figures, the sheet's totals
    and its cables as a `Streamed` list for `--json`."""
    plan = result.plan
    if plan is None or plan.fabric is None:
        raise PlanError("the spec has no compute fabric: there is nothing to cable or draw")
    document: dict[str, Any] = {}
    if cabling is not None:
        totals = sheet_totals(result.loaded.catalog, plan.fabric)
        atomic_write_lines(cabling, cabling_csv(_counted(_placed(result), totals)))
        document["hall"] = hall(result)
        document["totals"] = totals.to_dict()
        document["cables"] = Streamed(lambda: (cable.to_dict() for cable in _placed(result)))
    if svg is not None:
        atomic_write_text(svg, fabric_picture(result))
    return document


def sheet_summary(path: Path, cabling: dict[str, Any]) -> str:
    """Two lines for the terminal: what the sheet holds, and what its lengths assume."""
    totals, figures = cabling["totals"], cabling["hall"]
    cables = sum(totals["by_media"].values())
    media = ", ".join(f"{kind} {count:,}" for kind, count in totals["by_media"].items())
    return (
        f"cabling sheet written to {path}: {cables:,} cables ({media}), "
        f"{totals['transceivers']:,} transceivers\n"
        f"lengths assume rows of {figures['racks_per_row']} racks "
        f"{figures['rack_width_mm']} mm apart, rows {figures['row_pitch_mm']} mm apart, "
        f"{figures['tray_drop_mm']} mm into the tray and {figures['cable_slack_mm']} mm of "
        "slack each end (facility.*)"
    )


def fabric_picture(result: PlanResult, cables: list[Cable] | None = None) -> str:
    """The fabric as SVG: every cable for a small fabric, grouped for a large one; where
    the fabric is not a true Clos it says so, as the `fabric-shape` lints do."""
    plan = result.plan
    if plan is None or plan.fabric is None:
        raise PlanError("the spec has no compute fabric: there is nothing to draw")
    fabric = plan.fabric
    nodes = sum(island.nodes for island in fabric.islands)
    if cables is None and nodes <= DETAILED_NODES:
        cables = list(iter_cables(result.loaded.spec, result.loaded.catalog, fabric))
    compute = [p for p in plan.pools if p.role == "compute"]
    gpus_per_node = max((p.gpus // p.nodes for p in compute if p.nodes), default=0)
    limits = fabric_limits(result.loaded.spec, result.loaded.catalog)
    return fabric_svg(plan.cluster, fabric, cables, gpus_per_node, limits)
