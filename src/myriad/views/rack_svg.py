"""The plan's racks as a picture: each kind of rack drawn once, with how many there are.

A 1,250-node cluster has hundreds of racks, most alike; the picture shows one full rack and
the part-full one per server profile (servers from the bottom, a box per server, its rack
units to scale, coloured by role), then the switch and storage racks the plan counts. Read
from `myriad plan --json`'s `power` (`rack_fills`, `rack_units`, `rack_kw`), so the picture
and the rack count come from one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

UNIT_PX = 5
RACK_W = 96
# Room between racks for the captions under them ("2 x 8 U + 1 ToR, 21.4 of 40 kW").
GAP = 120
TOP = 44
BOTTOM = 46
LEGEND_W = 460
# About the width of a character at 11-12 px sans-serif, to keep captions inside.
CHAR_PX = 7
LEGEND_H = 22
ROLE_COLOURS = {"compute": "#4c78a8", "controller": "#f58518", "login": "#54a24b"}
OTHER_COLOUR = "#9d9d9d"
SWITCH_COLOUR = "#b279a2"
TIMES = "\N{MULTIPLICATION SIGN}"
STYLE = (
    "<style>.t{font:600 12px sans-serif;fill:#1b2330}.m{font:11px sans-serif;fill:#5b6676}"
    ".rack{fill:#f4f6f9;stroke:#5b6676;stroke-width:1.5}</style>"
)


def _kinds(power: Mapping[str, Any]) -> list[tuple[str, str, int, int, Mapping[str, Any]]]:
    """(title, note, racks alike, servers in each, fill) per rack drawn."""
    kinds = []
    for fill in power.get("rack_fills") or []:
        name = str(fill.get("profile"))
        per, full, rest = int(fill["per_rack"]), int(fill["full"]), int(fill["rest"])
        if full:
            note = "over the rack's kW: one each" if fill.get("over_budget") else "full"
            kinds.append((name, note, full, per, fill))
        if rest:
            kinds.append((name, "part-full", 1, rest, fill))
    return kinds


def _rack(x: int, height: int, title: str, subtitle: str, count: int) -> list[str]:
    return [
        f"<text x='{x + RACK_W / 2}' y='16' text-anchor='middle' class='t'>{escape(title)}</text>",
        f"<text x='{x + RACK_W / 2}' y='30' text-anchor='middle' class='m'>"
        f"{escape(subtitle)}</text>",
        f"<rect x='{x}' y='{TOP}' width='{RACK_W}' height='{height}' class='rack'/>",
        f"<text x='{x + RACK_W / 2}' y='{TOP + height + 18}' text-anchor='middle' class='t'>"
        f"{TIMES} {count:,} rack{'s' if count != 1 else ''}</text>",
    ]


def rack_picture(power: Mapping[str, Any], fabric: Mapping[str, Any] | None) -> str:
    """An SVG of every kind of rack the plan counts; empty when it counts none."""
    units = int(power.get("rack_units") or 42)
    rack_kw = float(power.get("rack_kw") or 0.0)
    height = units * UNIT_PX
    parts: list[str] = []
    x = GAP // 2
    right = 0
    tor_in_racks = any(fill.get("tor_leaves") for fill in power.get("rack_fills") or [])
    for title, note, count, servers, fill in _kinds(power):
        each_kw = float(fill["kw_each"])
        tor, tor_units = int(fill.get("tor_leaves") or 0), int(fill.get("tor_units") or 0)
        size = f"{servers} {TIMES} {int(fill['units_each'])} U"
        if tor:
            size += f" + {tor} ToR"
        rack_used_kw = servers * each_kw + float(fill.get("tor_kw") or 0.0)
        used = f"{size}, {rack_used_kw:,.1f} of {rack_kw:g} kW"
        parts += _rack(x, height, title, note, count)
        roles: Sequence[str] = fill.get("roles") or []
        colour = role_colour(roles)
        box = int(fill["units_each"]) * UNIT_PX
        for slot in range(servers):
            y = TOP + height - (slot + 1) * box
            if y < TOP:
                break
            parts.append(
                f"<rect x='{x + 4}' y='{y + 1}' width='{RACK_W - 8}' height='{box - 2}' "
                f"fill='{colour}' rx='2'><title>{escape(title)}: "
                f"{escape(', '.join(roles))}, {each_kw:g} kW</title></rect>"
            )
        if tor:
            # The ToR leaves at the rack's top, where the layout stands them.
            parts.append(
                f"<rect x='{x + 4}' y='{TOP + 1}' width='{RACK_W - 8}' "
                f"height='{tor_units * UNIT_PX - 2}' fill='{SWITCH_COLOUR}' rx='2'>"
                f"<title>{tor} ToR leaf switch{'es' if tor != 1 else ''}</title></rect>"
            )
        parts.append(
            f"<text x='{x + RACK_W / 2}' y='{TOP + height + 32}' text-anchor='middle' "
            f"class='m'>{escape(used)}</text>"
        )
        right = max(right, _right_edge(x, (title, note, used)))
        x += RACK_W + GAP
    others = [
        ("switches", int(power.get("switch_racks") or 0), _switch_note(fabric, tor_in_racks)),
        ("storage", int(power.get("storage_racks") or 0), "storage systems"),
    ]
    for title, count, note in others:
        if not count:
            continue
        parts += _rack(x, height, title, note, count)
        parts.append(
            f"<text x='{x + RACK_W / 2}' y='{TOP + height / 2}' text-anchor='middle' "
            f"class='m'>{escape(title)}</text>"
        )
        right = max(right, _right_edge(x, (title, note)))
        x += RACK_W + GAP
    if not parts:
        return ""
    legend_y = TOP + height + BOTTOM
    parts += _legend(legend_y, parts)
    width, full_height = max(x - GAP // 2, right, LEGEND_W), legend_y + LEGEND_H
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{full_height}' "
        f"viewBox='0 0 {width} {full_height}' role='img' aria-label='racks'>{STYLE}"
        + "".join(parts)
        + "</svg>"
    )


def _right_edge(x: int, labels: Sequence[str]) -> int:
    """Where the widest label centred on a rack at `x` ends, with a margin."""
    return int(x + RACK_W / 2 + max(map(len, labels)) * CHAR_PX / 2) + 10


def role_colour(roles: Sequence[str]) -> str:
    """A server box's colour: its profile's first role's."""
    return ROLE_COLOURS.get(roles[0], OTHER_COLOUR) if roles else OTHER_COLOUR


def legend(entries: Sequence[tuple[str, str]], y: int, step: int) -> list[str]:
    """A square and a name per (name, colour), `step` px apart on one line at `y`."""
    parts = []
    for n, (label, colour) in enumerate(entries):
        x = 10 + n * step
        parts.append(f"<rect x='{x}' y='{y}' width='12' height='12' fill='{colour}' rx='2'/>")
        parts.append(f"<text x='{x + 17}' y='{y + 10}' class='m'>{escape(label)}</text>")
    return parts


def _legend(y: int, drawn: list[str]) -> list[str]:
    """The colours the picture uses, named."""
    entries = [*ROLE_COLOURS.items(), ("other", OTHER_COLOUR), ("ToR leaf", SWITCH_COLOUR)]
    return legend([(label, c) for label, c in entries if any(c in p for p in drawn)], y, 90)


def _switch_note(fabric: Mapping[str, Any] | None, tor_in_racks: bool) -> str:
    """What the switch racks hold; ToR leaves stand in the server racks instead."""
    if not fabric:
        return "declared switches"
    leaves, spines = fabric.get("leaves") or 0, fabric.get("spines") or 0
    core = fabric.get("core_switches") or 0
    held = [] if tor_in_racks else [_count(leaves, "leaf", "leaves")]
    held.append(_count(spines, "spine", "spines"))
    if core:
        held.append(_count(core, "core switch", "core switches"))
    return ", ".join(held)


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"
