"""The compute fabric drawn as SVG: tiers, islands, rails, switch counts and
oversubscription, with a legend.

Two views, chosen by size:

- **detailed** (at most `DETAILED_NODES` nodes and `DETAILED_SWITCHES` switches): every
  switch and node is a box in its tier's row; node cables are drawn one per cable in
  their rail's colour, switch-to-switch links one line per pair of switches (thicker for
  more cables);
- **grouped** (larger): islands of the same shape are one box ("x24") with their
  nodes, GPUs, leaves and spines, under one box for the core; lines carry the links per
  island and the oversubscription. An island in planes says how it splits (each plane its
  own leaves, spines and core; rails-only: one network per rail), and uplink ratios are
  written as operators write them (2:1 oversubscribed, 1:1.125 with more uplinks than
  endpoints).

Boxes carry `class="box"` and a `data-name`, so tests (and people) can find them; the
layout never lets two boxes overlap and keeps every label inside its box.

The picture never claims more than the plan's lints allow: where the fabric is counted by
ports but is not a true Clos (`myriad.plan.fabric.fabric_limits`, which the
`fabric-shape` lints report), the islands are not labelled non-blocking, the core says it
needs a fourth tier, and each limit is written out in red under the legend.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from myriad.plan.cabling import Cable
from myriad.plan.fabric import FabricLimit
from myriad.plan.model import Fabric, Island

DETAILED_NODES = 128
DETAILED_SWITCHES = 64
FONT = 12
CHAR_W = 0.62  # average glyph width of the sans-serif font, in font sizes
RAIL_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
)
TIER_FILL = {"core": "#fde2e2", "spine": "#fff2cc", "leaf": "#dae8fc", "node": "#eeeeee"}
LIMIT_COLOUR = "#b00020"


@dataclass(frozen=True, slots=True)
class Box:
    name: str
    tier: str
    x: float
    y: float
    w: float
    h: float
    lines: tuple[str, ...]

    @property
    def cx(self) -> float:
        return self.x + self.w / 2


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def ratio(value: float) -> str:
    """An uplink ratio as operators write it: 2:1 oversubscribed, 1:1.125 under-subscribed
    (more uplinks than endpoints, Meta's RTSW)."""
    return f"{value:g}:1" if value >= 1 else f"1:{1 / value:.4g}"


def _planes_line(fabric: Fabric, island: Island) -> tuple[str, ...]:
    """How an island splits into independent planes (rails-only: a network per rail)."""
    if fabric.planes == 1:
        return ()
    leaves, spines = island.leaves // fabric.planes, island.spines // fabric.planes
    where = f"{leaves:,} leaves" + (f", {spines:,} spines" if spines else "") + " each"
    if fabric.rails_only:
        return (f"rails only: {fabric.planes} rail networks, {where}",)
    return (f"{fabric.planes} planes: {where}",)


def text_width(text: str, size: float = FONT) -> float:
    return len(text) * size * CHAR_W


def _box_svg(box: Box, size: float = FONT) -> str:
    parts = [
        f'<rect class="box" data-name="{escape(box.name)}" data-tier="{box.tier}" '
        f'x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="4" '
        f'fill="{TIER_FILL[box.tier]}" stroke="#555"/>'
    ]
    top = box.y + (box.h - len(box.lines) * (size + 2)) / 2 + size
    for n, line in enumerate(box.lines):
        parts.append(
            f'<text class="label" x="{box.cx:.1f}" y="{top + n * (size + 2):.1f}" '
            f'font-size="{size}" text-anchor="middle">{escape(line)}</text>'
        )
    return "\n".join(parts)


def _row(
    names: Sequence[tuple[str, tuple[str, ...]]], tier: str, y: float, width: float, h: float
) -> list[Box]:
    """Boxes spread evenly over `width`, each as wide as its widest label (or its share)."""
    if not names:
        return []
    share = width / len(names)
    boxes = []
    for n, (name, lines) in enumerate(names):
        w = min(share - 6, max(text_width(line) for line in lines) + 10)
        boxes.append(Box(name, tier, 40 + n * share + (share - w) / 2, y, w, h, lines))
    return boxes


def _limit(limits: Sequence[FabricLimit], what: str) -> FabricLimit | None:
    return next((limit for limit in limits if limit.what == what), None)


RAILS_PER_LINE = 12


def _legend(
    fabric: Fabric, x: float, y: float, rails: int, limits: Sequence[FabricLimit] = ()
) -> tuple[str, float]:
    meshed = _limit(limits, "spines-per-group") is None
    lines = [
        f"{fabric.fabric} {fabric.layout}, {fabric.tiers} tier{'s' if fabric.tiers > 1 else ''}",
        f"{_count(fabric.leaves, 'leaf', 'leaves')} ({fabric.leaf_model}, {fabric.radix} ports)",
        f"{_count(fabric.spines, 'spine', 'spines')}, {fabric.core_switches:,} core "
        f"({fabric.spine_model})",
        f"{fabric.endpoints:,} endpoints at {fabric.endpoint_speed_gbps} Gb/s, "
        f"{_count(fabric.rails, 'rail', 'rails')} per node",
        f"cables: {fabric.node_links:,} node, {fabric.leaf_spine_links:,} leaf-spine, "
        f"{fabric.spine_core_links:,} spine-core",
        f"oversubscription: {ratio(fabric.island_oversubscription)} in an island, "
        f"{ratio(fabric.inter_island_oversubscription)} between islands"
        if meshed
        else f"oversubscription: {ratio(fabric.island_oversubscription)} uplinks in an island "
        f"(not non-blocking), {ratio(fabric.inter_island_oversubscription)} between islands",
    ]
    # Rails wrap past RAILS_PER_LINE (an EFA node has 32), inside the box.
    rail_lines = -(-rails // RAILS_PER_LINE) if rails > 1 else 0
    width = max(
        max(text_width(line) for line in lines) + 20,
        60 + min(rails, RAILS_PER_LINE) * 34 if rails > 1 else 0,
    )
    height = len(lines) * (FONT + 4) + 16 + 22 * rail_lines
    parts = [
        f'<g class="legend"><rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
        f'height="{height:.1f}" fill="#fff" stroke="#999"/>'
    ]
    for n, line in enumerate(lines):
        parts.append(
            f'<text class="legend-line" x="{x + 10:.1f}" y="{y + 18 + n * (FONT + 4):.1f}" '
            f'font-size="{FONT}">{escape(line)}</text>'
        )
    if rails > 1:
        ry = y + 18 + len(lines) * (FONT + 4)
        parts.append(f'<text x="{x + 10:.1f}" y="{ry:.1f}" font-size="{FONT}">rail</text>')
        for rail in range(rails):
            row, place = divmod(rail, RAILS_PER_LINE)
            rx, ry = x + 50 + place * 34, y + 18 + len(lines) * (FONT + 4) + 22 * row
            colour = RAIL_COLOURS[rail % len(RAIL_COLOURS)]
            parts.append(
                f'<line x1="{rx:.1f}" y1="{ry - 4:.1f}" x2="{rx + 14:.1f}" y2="{ry - 4:.1f}" '
                f'stroke="{colour}" stroke-width="3"/>'
                f'<text x="{rx + 17:.1f}" y="{ry:.1f}" font-size="{FONT}">{rail}</text>'
            )
    parts.append("</g>")
    return "\n".join(parts), height


def _limits_block(
    limits: Sequence[FabricLimit], x: float, y: float, width: float
) -> tuple[str, float]:
    """Each limit in the lint's words and its remedy, wrapped to `width`; (svg, height)."""
    if not limits:
        return "", 0.0
    chars = max(20, int(width / (FONT * CHAR_W)))
    lines: list[str] = []
    for limit in limits:
        lines.extend(textwrap.wrap(f"{limit.message}.", chars))
        lines.extend(textwrap.wrap(f"Remedy: {limit.suggestion}.", chars))
    parts = ['<g class="limits">']
    for n, line in enumerate(lines):
        parts.append(
            f'<text class="limit" x="{x:.1f}" y="{y + FONT + n * (FONT + 4):.1f}" '
            f'font-size="{FONT}" fill="{LIMIT_COLOUR}">{escape(line)}</text>'
        )
    parts.append("</g>")
    return "\n".join(parts), len(lines) * (FONT + 4) + 8


def _svg(width: float, height: float, title: str, body: Iterable[str]) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans, sans-serif">',
            f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
            f'<text class="title" x="20" y="28" font-size="18">{escape(title)}</text>',
            *body,
            "</svg>",
            "",
        ]
    )


def detailed(
    cluster: str, fabric: Fabric, cables: Sequence[Cable], limits: Sequence[FabricLimit] = ()
) -> str:
    hosts = list(dict.fromkeys(c.a_device for c in cables if c.tier == "node-leaf"))
    tiers: dict[str, list[str]] = {"core": [], "spine": [], "leaf": []}
    for cable in cables:
        if cable.tier == "node-leaf":
            tiers["leaf"].append(cable.b_device)
        elif cable.tier == "leaf-spine":
            tiers["leaf"].append(cable.a_device)
            tiers["spine"].append(cable.b_device)
        else:
            tiers["spine"].append(cable.a_device)
            tiers["core"].append(cable.b_device)
    rows = {tier: sorted(set(names)) for tier, names in tiers.items()}
    widest = max(len(hosts), *(len(names) for names in rows.values()))
    width = max(900.0, widest * 64.0 + 80)
    y = 60.0
    boxes: dict[str, Box] = {}
    for tier in ("core", "spine", "leaf"):
        if not rows[tier]:
            continue
        for box in _row([(n, _switch_label(n)) for n in rows[tier]], tier, y, width - 80, 40):
            boxes[box.name] = box
        y += 130
    for box in _row([(h, (h,)) for h in hosts], "node", y, width - 80, 28):
        boxes[box.name] = box
    body: list[str] = ['<g class="links">']
    pairs: Counter[tuple[str, str]] = Counter()
    for cable in cables:
        if cable.tier == "node-leaf":
            node, leaf = boxes[cable.a_device], boxes[cable.b_device]
            colour = RAIL_COLOURS[(cable.rail or 0) % len(RAIL_COLOURS)]
            rails = max(fabric.rails, 1)
            x1 = node.x + node.w * ((cable.rail or 0) + 0.5) / rails
            x2 = leaf.x + leaf.w * (cable.b_port - 0.5) / fabric.radix
            body.append(
                f'<line class="cable" x1="{x1:.1f}" y1="{node.y:.1f}" x2="{x2:.1f}" '
                f'y2="{leaf.y + leaf.h:.1f}" stroke="{colour}" stroke-width="1.2"/>'
            )
        else:
            pairs[(cable.a_device, cable.b_device)] += 1
    for (low, high), count in sorted(pairs.items()):
        a, b = boxes[low], boxes[high]
        body.append(
            f'<line class="link" x1="{a.cx:.1f}" y1="{a.y:.1f}" x2="{b.cx:.1f}" '
            f'y2="{b.y + b.h:.1f}" stroke="#666" stroke-opacity="0.5" '
            f'stroke-width="{min(1 + count / 2, 6):.1f}"/>'
        )
    body.append("</g>")
    body.extend(_box_svg(box) for box in boxes.values())
    gpus_note = f"{len(hosts)} nodes, {fabric.endpoints} endpoints"
    legend, legend_h = _legend(fabric, 40, y + 60, fabric.rails, limits)
    body.append(
        f'<text class="note" x="40" y="{y + 48:.1f}" font-size="{FONT}">{gpus_note}; '
        "node cables coloured by rail</text>"
    )
    body.append(legend)
    block, block_h = _limits_block(limits, 40, y + 70 + legend_h, width - 80)
    if block:
        body.append(block)
    return _svg(width, y + 80 + legend_h + block_h, f"{cluster}: compute fabric", body)


def _switch_label(name: str) -> tuple[str, ...]:
    return (name,)


def _island_groups(islands: Sequence[Island]) -> list[tuple[list[int], Island]]:
    groups: list[tuple[list[int], Island]] = []
    for island in islands:
        shape = (island.nodes, island.leaves, island.spines)
        if groups and (groups[-1][1].nodes, groups[-1][1].leaves, groups[-1][1].spines) == shape:
            groups[-1][0].append(island.index)
        else:
            groups.append(([island.index], island))
    return groups


def _span(indexes: Sequence[int]) -> str:
    if len(indexes) == 1:
        return f"island {indexes[0]}"
    return f"islands {indexes[0]}-{indexes[-1]} (x{len(indexes)})"


def grouped(
    cluster: str, fabric: Fabric, gpus_per_node: int, limits: Sequence[FabricLimit] = ()
) -> str:
    groups = _island_groups(fabric.islands)
    mesh, reach = _limit(limits, "spines-per-group"), _limit(limits, "groups-per-core")
    label_sets = []
    for indexes, island in groups:
        # Of several islands, each has its own spines; one island may be pods, whose
        # spines the limit counts per pod.
        spines = island.spines if len(fabric.islands) > 1 else (mesh.needed if mesh else 0)
        unmeshed = (
            (f"not non-blocking: a leaf reaches {mesh.available:,} of {spines:,} spines",)
            if mesh is not None and spines > mesh.available
            else ()
        )
        label_sets.append(
            (
                _span(indexes),
                (
                    _span(indexes),
                    f"each {island.nodes:,} nodes, {island.nodes * gpus_per_node:,} GPUs",
                    f"{island.leaves:,} leaves, {island.spines:,} spines",
                    f"{island.nodes * fabric.rails:,} endpoints, {fabric.rails} rails",
                    *_planes_line(fabric, island),
                    *unmeshed,
                ),
            )
        )
    box_w = max(text_width(line) for _, lines in label_sets for line in lines) + 24
    width = max(900.0, len(groups) * (box_w + 30) + 80)
    body: list[str] = []
    y = 70.0
    core: Box | None = None
    if fabric.core_switches:
        core_lines: tuple[str, ...] = (
            f"core: {fabric.core_switches:,} x {fabric.spine_model}",
            f"{fabric.spine_core_links:,} spine-core cables",
        )
        if fabric.planes > 1:
            # A plane's spines link only to its own core switches.
            core_lines += (f"a core of its own for each of {fabric.planes} planes",)
        if reach is not None:
            core_lines += (
                f"a fourth tier is needed: the core reaches {reach.available:,} of "
                f"{reach.needed:,}",
            )
        core_w = max(text_width(line) for line in core_lines) + 24
        core_h = 16 + 16 * len(core_lines)
        core = Box("core", "core", (width - core_w) / 2, y, core_w, core_h, core_lines)
        y += 150
    share = (width - 80) / len(groups)
    islands: list[Box] = []
    box_h = 16 + 16 * max(len(lines) for _, lines in label_sets)
    for n, (name, lines) in enumerate(label_sets):
        x = 40 + n * share + (share - box_w) / 2
        islands.append(Box(name, "spine", x, y, box_w, box_h, lines))
    body.append('<g class="links">')
    if core is not None:
        for (_, island), box in zip(groups, islands, strict=True):
            per_island = island.nodes * fabric.rails * fabric.endpoint_speed_gbps
            links = -(
                -per_island // int(fabric.port_speed_gbps * fabric.inter_island_oversubscription)
            )
            body.append(
                f'<line class="link" x1="{box.cx:.1f}" y1="{box.y:.1f}" x2="{core.cx:.1f}" '
                f'y2="{core.y + core.h:.1f}" stroke="#666" stroke-width="3"/>'
            )
            label = f"~{links:,} core links each ({ratio(fabric.inter_island_oversubscription)})"
            # On the side away from the core, so the line never crosses the label.
            left = box.cx < core.cx
            anchor, lx = ("end", box.cx - 8) if left else ("start", box.cx + 8)
            body.append(
                f'<text class="link-label" x="{lx:.1f}" y="{box.y - 10:.1f}" '
                f'font-size="{FONT - 1}" text-anchor="{anchor}" fill="#333">{escape(label)}</text>'
            )
    body.append("</g>")
    if core is not None:
        body.append(_box_svg(core))
    body.extend(_box_svg(box) for box in islands)
    y += box_h + 40
    count = sum(len(i) for i, _ in groups)
    under = " (more uplinks than endpoints)" if fabric.island_oversubscription < 1 else ""
    note = (
        f"{count} {'island' if count == 1 else 'islands'}; in each, leaves are "
        f"{ratio(fabric.island_oversubscription)} to spines{under}"
        if mesh is None
        else f"{count} islands; leaves have {ratio(fabric.island_oversubscription)} uplinks but "
        f"reach {mesh.available:,} of up to {mesh.needed:,} spines: not non-blocking"
    )
    body.append(f'<text class="note" x="40" y="{y:.1f}" font-size="{FONT}">{escape(note)}</text>')
    legend, legend_h = _legend(fabric, 40, y + 20, 1, limits)
    body.append(legend)
    block, block_h = _limits_block(limits, 40, y + 30 + legend_h, width - 80)
    if block:
        body.append(block)
    return _svg(width, y + 40 + legend_h + block_h, f"{cluster}: compute fabric (grouped)", body)


def fabric_svg(
    cluster: str,
    fabric: Fabric,
    cables: Sequence[Cable] | None,
    gpus_per_node: int,
    limits: Sequence[FabricLimit] = (),
) -> str:
    """The detailed view for small fabrics (given their cables), else the grouped one;
    `limits` are where the fabric falls short of a true Clos (`fabric_limits`)."""
    nodes = sum(island.nodes for island in fabric.islands)
    switches = fabric.leaves + fabric.spines + fabric.core_switches
    if cables is not None and nodes <= DETAILED_NODES and switches <= DETAILED_SWITCHES:
        return detailed(cluster, fabric, cables, limits)
    return grouped(cluster, fabric, gpus_per_node, limits)
