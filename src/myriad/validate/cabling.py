"""The fabric as planned against the fabric as discovered, cable by cable.

Pure functions: the planned cables (`myriad.plan.cabling`) and a parsed `ibnetdiscover`
topology in, findings out. Devices are matched by node description: an HCA's is
"<host> <rdma device>" (Linux's default), a switch's its planned name (or the name between
`;` and `:` of a managed switch's "MF0;leaf-r3-07:MQM9700/U1"). GUIDs are not planned, so
they match nothing.

Each finding explains a fault once and nothing else:

- a planned switch that was not discovered: `missing-switch` (its cables are not listed);
- a discovered device the plan does not have: `unexpected-device`, with where it is plugged;
- a link in the right place at another width or speed: `wrong-width` / `wrong-speed`;
- a cable with one end in its planned port and the other elsewhere: `wrong-port`, with the
  move that fixes it, or `swapped` for two such cables each in the other's port;
- a cable no discovered link can be (an HCA whose only link is down is not discovered at
  all): `missing-link`, naming the moved cable that holds its port, if one does;
- a link between planned devices that is no planned cable: `unexpected-link`.

Which misplaced link is which cable is a matching (`_match`): the one that explains the
fabric with the fewest faults, so doing every fix at once gives the planned fabric.
Findings come in that order of kind for devices, then by cable number, then the
unexpected links, so a report reads the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from myriad.node.checks import CheckResult
from myriad.node.parsers.ibnetdiscover import IbTopology
from myriad.plan.cabling import Cable
from myriad.validate.report import ValidationReport

Kind = Literal[
    "missing-switch",
    "unexpected-device",
    "missing-link",
    "swapped",
    "wrong-port",
    "wrong-width",
    "wrong-speed",
    "unexpected-link",
]
End = tuple[str, int]

# InfiniBand speed names by per-lane data rate, slowest first; a 4x link's Gb/s is 4 lanes.
SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
_SPEED_BY_4X_GBPS = {10: "SDR", 20: "DDR", 40: "QDR", 56: "FDR", 100: "EDR", 200: "HDR"}
_SPEED_BY_4X_GBPS |= {400: "NDR", 800: "XDR"}
PLANNED_WIDTH = "4x"
CHECK_OF: dict[Kind, str] = {
    "missing-switch": "fabric.devices",
    "unexpected-device": "fabric.devices",
    "missing-link": "fabric.cabling",
    "swapped": "fabric.cabling",
    "wrong-port": "fabric.cabling",
    "unexpected-link": "fabric.cabling",
    "wrong-width": "fabric.link-rate",
    "wrong-speed": "fabric.link-rate",
}
CHECKS = ("fabric.devices", "fabric.cabling", "fabric.link-rate")
LINK_FIX = "reseat or replace the cable and its transceivers; `ibportstate` shows the port"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    device: str
    message: str
    fix: str
    cables: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Comparison:
    findings: tuple[Finding, ...]
    planned_cables: int
    cables_as_planned: int
    discovered_nodes: int
    discovered_links: int

    @property
    def ok(self) -> bool:
        return not self.findings


def planned_speed(gbps: int, cap: str | None = None) -> str:
    """The speed name of a 4x link of `gbps`; above `cap` (a simulator's limit) the cap."""
    name = _SPEED_BY_4X_GBPS.get(gbps)
    if name is None:
        raise ValueError(f"no 4x InfiniBand speed carries {gbps} Gb/s")
    if cap is not None and SPEEDS.index(name) > SPEEDS.index(cap):
        return cap
    return name


def device_name(description: str) -> str:
    """A discovered node's name: the description, or a managed switch's name inside it."""
    if ";" in description and ":" in description.split(";", 1)[1]:
        return description.split(";", 1)[1].split(":", 1)[0]
    return description


def _hca_key(host: str, hca: str) -> str:
    return f"{host} {hca}"


def describe(end: End, hcas: Mapping[str, tuple[str, str]]) -> str:
    device, port = end
    if device in hcas:
        host, hca = hcas[device]
        return f"node {host} HCA {hca}" + ("" if port == 1 else f" port {port}")
    return f"{device} port {port}"


def _where(end: End, hcas: Mapping[str, tuple[str, str]]) -> str:
    """The end as a place a cable goes into (a switch port, or an HCA port)."""
    return describe(end, hcas)


def _owner(end: End, hcas: Mapping[str, tuple[str, str]]) -> str:
    return hcas[end[0]][0] if end[0] in hcas else end[0]


def compare_fabric(
    cables: Iterable[Cable], discovered: IbTopology, *, speed_cap: str | None = None
) -> Comparison:
    """Findings for every way `discovered` differs from the planned `cables`."""
    planned_peer: dict[End, End] = {}
    cable_at: dict[End, Cable] = {}
    hcas: dict[str, tuple[str, str]] = {}
    switches: dict[str, None] = {}
    cable_list: list[Cable] = []
    for cable in cables:
        cable_list.append(cable)
        a, b = _ends(cable)
        if cable.tier == "node-leaf":
            hcas[a[0]] = (cable.a_device, cable.a_hca)
        else:
            switches[a[0]] = None
        switches[cable.b_device] = None
        planned_peer[a], planned_peer[b] = b, a
        cable_at[a] = cable_at[b] = cable

    # Discovered devices by name; a second node of one name is unexpected.
    name_of: dict[str, str] = {}
    unexpected: dict[str, str] = {}
    seen: set[str] = set()
    for node in discovered.nodes.values():
        name = device_name(node.description)
        planned = name in hcas if node.kind == "ca" else name in switches
        if planned and name not in seen:
            seen.add(name)
            name_of[node.node_id] = name
        else:
            label = f"{node.description} ({node.node_id})" if name in seen else node.description
            unexpected[node.node_id] = label
            name_of[node.node_id] = label
    peer: dict[End, End] = {}
    unexpected_ends: set[End] = set()
    for link in discovered.links:
        a = (name_of[link.a_id], link.a_port)
        b = (name_of[link.b_id], link.b_port)
        peer[a], peer[b] = b, a
        for node_id, end in ((link.a_id, a), (link.b_id, b)):
            if node_id in unexpected:
                unexpected_ends.add(end)

    findings: list[Finding] = []
    missing_switches = [s for s in switches if s not in seen]
    for switch in missing_switches:
        count = sum(1 for c in cable_list if switch in (c.a_device, c.b_device))
        findings.append(
            Finding(
                "missing-switch",
                switch,
                f"switch {switch} was not discovered (the plan gives it {count} cables)",
                f"power on {switch} and check its links; its node description must be {switch!r}",
            )
        )
    for node_id, label in unexpected.items():
        node = discovered.nodes[node_id]
        kind = {"ca": "HCA", "switch": "switch", "router": "router"}[node.kind]
        places = sorted(
            _where(peer[end], hcas) for end in unexpected_ends if end[0] == label and end in peer
        )
        where = "; plugged into " + ", ".join(places) if places else ""
        findings.append(
            Finding(
                "unexpected-device",
                label.split()[0],
                f"{kind} {label!r} is not in the plan{where}",
                "unplug it, or add it to the spec",
            )
        )

    gone = set(missing_switches)
    ok = 0
    by_cable: list[Finding] = []
    # Discovered links between planned devices: those on their planned ports are the
    # cables as planned (or at the wrong rate); the rest are matched below.
    exact: set[int] = set()
    others: list[tuple[End, End]] = []
    for link in discovered.links:
        if link.a_id in unexpected or link.b_id in unexpected:
            continue
        x, y = (name_of[link.a_id], link.a_port), (name_of[link.b_id], link.b_port)
        if planned_peer.get(x) == y:
            cable = cable_at[x]
            a, b = _ends(cable)
            wrong = _rate_finding(cable, a, b, (link.width, link.speed), hcas, speed_cap)
            if wrong is None:
                ok += 1
            else:
                by_cable.append(wrong)
            exact.add(cable.cable)
        else:
            others.append((x, y))
    loose = {
        cable.cable: _ends(cable)
        for cable in cable_list
        if cable.cable not in exact and cable.a_device not in gone and cable.b_device not in gone
    }
    placed, stray = _match(loose, others, cable_at)
    by_cable.extend(_placement_findings(loose, placed, hcas))
    findings.extend(sorted(by_cable, key=lambda f: f.cables))

    for x, y in stray:
        free = x not in planned_peer and y not in planned_peer
        findings.append(
            Finding(
                "unexpected-link",
                _owner(x, hcas),
                f"{describe(x, hcas)} is linked to {describe(y, hcas)}; the plan "
                + ("leaves both ports free" if free else "has no cable between them"),
                "unplug the cable",
            )
        )
    return Comparison(
        findings=tuple(findings),
        planned_cables=len(cable_list),
        cables_as_planned=ok,
        discovered_nodes=len(discovered.nodes),
        discovered_links=len(discovered.links),
    )


def _ends(cable: Cable) -> tuple[End, End]:
    """A cable's planned ends by the names discovery gives them (an HCA as "host device")."""
    a_name = _hca_key(cable.a_device, cable.a_hca) if cable.tier == "node-leaf" else cable.a_device
    return (a_name, cable.a_port), (cable.b_device, cable.b_port)


@dataclass(frozen=True, slots=True)
class _Placed:
    """A planned cable taken to be a discovered link that has one of its ends right:
    `stays` is in its planned port, the other end is in `found` where the plan says
    `planned`."""

    cable: int
    stays: End
    found: End
    planned: End
    link: int


# An edge of the matching: (cable, link index, the end they share, the link's other end,
# whether the shared end is the cable's lower end `a`).
_Edge = tuple[int, int, End, End, bool]


def _match(
    loose: Mapping[int, tuple[End, End]],
    links: Sequence[tuple[End, End]],
    cable_at: Mapping[End, Cable],
) -> tuple[dict[int, _Placed], list[tuple[End, End]]]:
    """Which misplaced link is which planned cable, and the links that are none.

    A link can be a cable it shares an end with: the cable in either of its ports, so at
    most two; a cable can be the link in either of its planned ports, so at most two. The
    graph of cables and links is therefore paths and cycles, and a largest matching of each
    is found exactly, in linear time. The largest matching explains the fabric with the
    fewest faults (every cable left over is missing, every link left over unexpected), so
    no cable gets two fixes and no missing cable hides behind a move. Between equally large
    matchings the one that keeps more cables by their lower end (the HCA or the leaf's
    uplink port, where a cable is routed from) is taken: a plug moved between switch ports
    is the likelier fault, and the move is then named at the switch.
    """
    edges_at: dict[tuple[str, int], list[_Edge]] = {}
    for index, (x, y) in enumerate(links):
        for here, there in ((x, y), (y, x)):
            cable = cable_at.get(here)
            if cable is None or cable.cable not in loose:
                continue
            edge = (cable.cable, index, here, there, here == loose[cable.cable][0])
            edges_at.setdefault(("cable", cable.cable), []).append(edge)
            edges_at.setdefault(("link", index), []).append(edge)
    for edges in edges_at.values():
        edges.sort(key=lambda e: (not e[4], e[1]))

    def other(edge: _Edge, vertex: tuple[str, int]) -> tuple[str, int]:
        return ("link", edge[1]) if vertex[0] == "cable" else ("cable", edge[0])

    def walk(start: tuple[str, int]) -> list[_Edge]:
        path: list[_Edge] = []
        vertex, previous = start, None
        while True:
            nexts = [e for e in edges_at.get(vertex, ()) if e is not previous]
            if not nexts or (path and vertex == start):
                return path
            previous = nexts[0]
            path.append(previous)
            seen.add(vertex)
            vertex = other(previous, vertex)
            seen.add(vertex)

    seen: set[tuple[str, int]] = set()
    chosen: list[_Edge] = []
    starts = [("cable", n) for n in sorted(loose)] + [("link", i) for i in range(len(links))]
    for start in starts:  # paths, from an end
        if start not in seen and len(edges_at.get(start, ())) == 1:
            chosen.extend(_best_on_path(walk(start)))
    for start in starts:  # what is left is cycles
        if start not in seen and start in edges_at:
            cycle = walk(start)
            first = [cycle[0], *_best_on_path(cycle[2:-1])]
            rest = _best_on_path(cycle[1:])
            chosen.extend(first if _score(first) >= _score(rest) else rest)
    placed = {e[0]: _Placed(e[0], e[2], e[3], _other_end(loose[e[0]], e[2]), e[1]) for e in chosen}
    taken = {p.link for p in placed.values()}
    return placed, [link for i, link in enumerate(links) if i not in taken]


def _other_end(ends: tuple[End, End], end: End) -> End:
    return ends[1] if end == ends[0] else ends[0]


def _score(edges: Sequence[_Edge]) -> tuple[int, int]:
    return len(edges), sum(1 for e in edges if e[4])


def _best_on_path(path: Sequence[_Edge]) -> list[_Edge]:
    """The best set of edges of a path no two of which are neighbours (share a vertex):
    most edges, then most kept by their lower end; on a tie the earlier edges. Linear:
    best[i] is the best score over the first i edges, and whether it takes edge i - 1."""
    best: list[tuple[int, int]] = [(0, 0)]
    takes: list[bool] = [False]
    for i, edge in enumerate(path):
        skip = best[i]
        before = best[i - 1] if i else (0, 0)
        take = (before[0] + 1, before[1] + edge[4])
        takes.append(take > skip)
        best.append(take if take > skip else skip)
    chosen: list[_Edge] = []
    i = len(path)
    while i > 0:
        if takes[i]:
            chosen.append(path[i - 1])
            i -= 2
        else:
            i -= 1
    return chosen[::-1]


def _placement_findings(
    loose: Mapping[int, tuple[End, End]],
    placed: Mapping[int, _Placed],
    hcas: Mapping[str, tuple[str, str]],
) -> list[Finding]:
    """The misplaced cables as findings: two moved cables in each other's ports as one
    swap, every other placed cable as a move, and a cable nothing was matched to as
    missing, saying which moved cable holds its port."""
    by_planned = {p.planned: p for p in placed.values()}
    holds = {p.found: p.cable for p in placed.values()}
    findings: list[Finding] = []
    done: set[int] = set()
    for number in sorted(loose):
        if number in done:
            continue
        done.add(number)
        here = placed.get(number)
        if here is None:
            a, b = loose[number]
            held = [(end, holds[end]) for end in (a, b) if end in holds]
            message = f"cable {number}: {describe(a, hcas)} to {describe(b, hcas)} is not connected"
            fix = LINK_FIX
            if held:
                message += "; " + " and ".join(
                    f"{_where(end, hcas)} holds cable {n}" for end, n in held
                )
                ports = " and ".join(_where(end, hcas) for end, _ in held)
                moved = " and ".join(str(n) for _, n in held)
                fix = (
                    f"move cable{'s' if len(held) > 1 else ''} {moved} out of {ports} "
                    f"({'their' if len(held) > 1 else 'its'} own finding), then connect "
                    f"{describe(a, hcas)} to {describe(b, hcas)}"
                )
            findings.append(Finding("missing-link", _owner(a, hcas), message, fix, (number,)))
            continue
        there = by_planned.get(here.found)
        if there is not None and there.found == here.planned and there.cable not in done:
            done.add(there.cable)
            findings.append(
                Finding(
                    "swapped",
                    _owner(here.stays, hcas),
                    f"cables {number} and {there.cable} are swapped: "
                    f"{describe(here.stays, hcas)} is in {_where(here.found, hcas)} and "
                    f"{describe(there.stays, hcas)} in {_where(there.found, hcas)}; plan says "
                    f"{_where(here.planned, hcas)} and {_where(there.planned, hcas)}",
                    f"swap the cables in {_where(here.planned, hcas)} and "
                    f"{_where(there.planned, hcas)}",
                    (number, there.cable),
                )
            )
            continue
        findings.append(
            Finding(
                "wrong-port",
                _owner(here.stays, hcas),
                f"{describe(here.stays, hcas)} is in {_where(here.found, hcas)}; plan says "
                f"{_where(here.planned, hcas)}",
                f"move the cable from {_where(here.found, hcas)} to {_where(here.planned, hcas)}",
                (number,),
            )
        )
    return findings


def _rate_finding(
    cable: Cable,
    a: End,
    b: End,
    found: tuple[str | None, str | None],
    hcas: Mapping[str, tuple[str, str]],
    speed_cap: str | None,
) -> Finding | None:
    width, speed = found
    expected_speed = planned_speed(cable.speed_gbps, speed_cap)
    where = f"cable {cable.cable} ({describe(a, hcas)} to {describe(b, hcas)})"
    shown = f"{width or '?'}{speed or '?'}"
    planned = f"{PLANNED_WIDTH}{expected_speed}"
    if width != PLANNED_WIDTH:
        return Finding(
            "wrong-width",
            _owner(a, hcas),
            f"{where} trained at {shown}; plan says {planned}",
            LINK_FIX,
            (cable.cable,),
        )
    if speed != expected_speed:
        return Finding(
            "wrong-speed",
            _owner(a, hcas),
            f"{where} trained at {shown}; plan says {planned}",
            LINK_FIX + "; check both ends' enabled speeds",
            (cable.cable,),
        )
    return None


def fabric_report(comparison: Comparison, cluster: str, spec: str) -> ValidationReport:
    """The comparison as a validation report: one failed result per finding, and one
    passed result per check that found nothing (the node column names the device)."""
    results: list[CheckResult] = []
    for finding in comparison.findings:
        results.append(
            CheckResult(
                node=finding.device,
                check=CHECK_OF[finding.kind],
                status="fail",
                expected="as in the cabling plan",
                actual=finding.message,
                spec_field="network.topology",
                fix=finding.fix,
                detail=finding.kind,
            )
        )
    failing = {CHECK_OF[f.kind] for f in comparison.findings}
    summary = (
        f"{comparison.cables_as_planned} of {comparison.planned_cables} cables as planned; "
        f"{comparison.discovered_nodes} nodes, {comparison.discovered_links} links discovered"
    )
    for check in CHECKS:
        if check not in failing:
            results.append(
                CheckResult(
                    "fabric", check, "pass", "as in the cabling plan", summary, "network.topology"
                )
            )
    return ValidationReport(cluster=cluster, spec=spec, results=tuple(results))
