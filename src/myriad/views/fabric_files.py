"""`myriad plan --cabling FILE.csv --svg FILE`: the cabling plan and the fabric picture,
written whole or not at all; what `--json` adds about the cables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from myriad.errors import PlanError
from myriad.fsutil import atomic_write_text
from myriad.plan.cabling import Cable, cable_totals, cabling_csv, iter_cables
from myriad.plan.fabric import fabric_limits
from myriad.plan.pipeline import PlanResult
from myriad.views.fabric_svg import DETAILED_NODES, fabric_svg


def write_fabric_files(
    result: PlanResult, cabling: Path | None, svg: Path | None
) -> dict[str, Any]:
    """Write what was asked; return the cabling's totals and, with `cabling`, its rows."""
    plan = result.plan
    if plan is None or plan.fabric is None:
        raise PlanError("the spec has no compute fabric: there is nothing to cable or draw")
    spec, catalog, fabric = result.loaded.spec, result.loaded.catalog, plan.fabric
    cables = list(iter_cables(spec, catalog, fabric)) if cabling is not None else None
    document: dict[str, Any] = {}
    if cables is not None and cabling is not None:
        atomic_write_text(cabling, "".join(cabling_csv(cables)))
        document["totals"] = cable_totals(cables)
        document["cables"] = [cable.to_dict() for cable in cables]
    if svg is not None:
        atomic_write_text(svg, fabric_picture(result, cables))
    return document


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
