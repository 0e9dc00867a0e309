"""The plan's racks on the floor: rows of racks, each a square coloured by what it holds.

The rows are the layout's (`myriad.plan.layout`): server racks fill rows of
`racks_per_row` in the plan's order, the switch racks start a row of their own, storage
racks follow them. A run of rows that hold the same is drawn once with how many there
are, so a 1,700-rack hall stays a page. Read from `myriad plan --json`'s `power`, like the
rack elevations, so the picture and the counts come from one place; rack names on the
cabling sheet (`R<row>-<rack>`) are found here by row and place.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from itertools import groupby
from typing import Any

from myriad.views.rack_svg import STYLE, SWITCH_COLOUR, legend, role_colour

CELL = 14
STEP = 16
LEFT = 120
TOP = 28
ROW_H = 22
STORAGE_COLOUR = "#72b7b2"
# Profile names run longer than the rack picture's role names.
LEGEND_STEP = 130
TIMES = "\N{MULTIPLICATION SIGN}"


def _rows(power: Mapping[str, Any], per_row: int) -> list[tuple[str, ...]]:
    """Each row's racks, a kind name per rack."""
    servers: list[str] = []
    for fill in power.get("rack_fills") or []:
        servers += [str(fill["profile"])] * (int(fill["full"]) + (1 if fill["rest"] else 0))
    network = ["switches"] * int(power.get("switch_racks") or 0)
    network += ["storage"] * int(power.get("storage_racks") or 0)
    rows = []
    for racks in (servers, network):
        for start in range(0, len(racks), per_row):
            rows.append(tuple(racks[start : start + per_row]))
    return rows


def _colours(power: Mapping[str, Any], rows: list[tuple[str, ...]]) -> dict[str, str]:
    """A colour per kind of rack drawn, in the order racks stand."""
    colours = {"switches": SWITCH_COLOUR, "storage": STORAGE_COLOUR}
    for fill in power.get("rack_fills") or []:
        colours[str(fill["profile"])] = role_colour(fill.get("roles") or [])
    drawn = dict.fromkeys(kind for row in rows for kind in row)
    return {kind: colours[kind] for kind in drawn}


def floor_picture(power: Mapping[str, Any]) -> str:
    """An SVG of the rows of racks; empty when the plan counts no rack."""
    per_row = int(power.get("racks_per_row") or 16)
    rows = _rows(power, per_row)
    if not rows:
        return ""
    colours = _colours(power, rows)
    parts: list[str] = [
        f"<text x='{LEFT}' y='16' class='m'>racks 1-{per_row} of each row, left to right</text>"
    ]
    y = TOP
    row = 0
    for content, alike in groupby(rows):
        count = len(list(alike))
        first, last = row + 1, row + count
        name = f"R{first:02d}" if count == 1 else f"R{first:02d}-R{last:02d}"
        parts.append(f"<text x='10' y='{y + 11}' class='t'>{name}</text>")
        for place, kind in enumerate(content):
            parts.append(
                f"<rect x='{LEFT + place * STEP}' y='{y}' width='{CELL}' height='{CELL}' "
                f"fill='{colours[kind]}' rx='2'><title>{escape(kind)}</title></rect>"
            )
        if count > 1:
            parts.append(
                f"<text x='{LEFT + per_row * STEP + 8}' y='{y + 11}' class='m'>"
                f"{TIMES} {count:,} rows alike</text>"
            )
        row += count
        y += ROW_H
    y += 8
    parts += legend(list(colours.items()), y, LEGEND_STEP)
    width = max(LEFT + per_row * STEP + 140, 10 + len(colours) * LEGEND_STEP)
    height = y + 22
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='rows of racks'>{STYLE}"
        + "".join(parts)
        + "</svg>"
    )
