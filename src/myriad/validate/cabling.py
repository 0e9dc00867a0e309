"""The fabric as planned against the fabric as discovered, cable by cable.

Pure functions: the planned cables (`myriad.plan.cabling`) and a parsed `ibnetdiscover`
topology in, findings out. Devices are matched by node description: an HCA's is
"<host> <rdma device>" (Linux's default), a switch's its planned name (or the name between
`;` and `:` of a managed switch's "MF0;leaf-r3-07:MQM9700/U1"). GUIDs are not planned, so
they match nothing.

Each finding explains a fault once and nothing else:

- a planned switch that was not discovered: `missing-switch` (its cables are not listed);
- a discovered device the plan does not have: `unexpected-device`, with where it is plugged;
- a cable whose both ends are unconnected (an HCA whose only link is down is not
  discovered at all): `missing-link`;
- two cables that exchanged one end each: `swapped`, with the two ports to swap;
- any other cable in another place: `wrong-port`, with the move that fixes it;
- a link in the right place at another width or speed: `wrong-width` / `wrong-speed`;
- a link between planned devices on ports the plan leaves free: `unexpected-link`.

Findings come in that order of kind for devices, then by cable number, then the
unexpected links, so a report reads the same on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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
        if cable.tier == "node-leaf":
            a_name = _hca_key(cable.a_device, cable.a_hca)
            hcas[a_name] = (cable.a_device, cable.a_hca)
        else:
            a_name = cable.a_device
            switches[a_name] = None
        switches[cable.b_device] = None
        a, b = (a_name, cable.a_port), (cable.b_device, cable.b_port)
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
    rate: dict[End, tuple[str | None, str | None]] = {}
    unexpected_ends: set[End] = set()
    for link in discovered.links:
        a = (name_of[link.a_id], link.a_port)
        b = (name_of[link.b_id], link.b_port)
        peer[a], peer[b] = b, a
        rate[a] = rate[b] = (link.width, link.speed)
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
    misplaced: list[Cable] = []
    by_cable: list[Finding] = []

    def seen_peer(end: End) -> End | None:
        found = peer.get(end)
        return None if found is None or found in unexpected_ends else found

    for cable in cable_list:
        if cable.a_device in gone or cable.b_device in gone:
            continue
        a = (
            _hca_key(cable.a_device, cable.a_hca) if cable.tier == "node-leaf" else cable.a_device,
            cable.a_port,
        )
        b = (cable.b_device, cable.b_port)
        pa, pb = seen_peer(a), seen_peer(b)
        if pa == b:
            wrong = _rate_finding(cable, a, b, rate[a], hcas, speed_cap)
            if wrong is None:
                ok += 1
            else:
                by_cable.append(wrong)
        elif pa is None and pb is None:
            by_cable.append(
                Finding(
                    "missing-link",
                    _owner(a, hcas),
                    f"cable {cable.cable}: {describe(a, hcas)} to {describe(b, hcas)} is not "
                    "connected",
                    LINK_FIX,
                    (cable.cable,),
                )
            )
        else:
            misplaced.append(cable)
    by_cable.extend(_misplaced(misplaced, planned_peer, cable_at, seen_peer, hcas))
    findings.extend(sorted(by_cable, key=lambda f: f.cables))

    for link in discovered.links:
        if link.a_id in unexpected or link.b_id in unexpected:
            continue
        a, b = (name_of[link.a_id], link.a_port), (name_of[link.b_id], link.b_port)
        if a not in planned_peer and b not in planned_peer:
            findings.append(
                Finding(
                    "unexpected-link",
                    _owner(a, hcas),
                    f"{describe(a, hcas)} is linked to {describe(b, hcas)}; the plan leaves "
                    "both ports free",
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


def _misplaced(
    cables: Sequence[Cable],
    planned_peer: Mapping[End, End],
    cable_at: Mapping[End, Cable],
    seen_peer: Callable[[End], End | None],
    hcas: Mapping[str, tuple[str, str]],
) -> list[Finding]:
    """Cables not where the plan puts them: pairs that swapped one end each, then moves."""
    ends: dict[int, tuple[End, End]] = {}
    for cable in cables:
        a = (
            _hca_key(cable.a_device, cable.a_hca) if cable.tier == "node-leaf" else cable.a_device,
            cable.a_port,
        )
        ends[cable.cable] = (a, planned_peer[a])
    done: set[int] = set()
    findings: list[Finding] = []
    for cable in cables:
        if cable.cable in done:
            continue
        a, b = ends[cable.cable]
        pa = seen_peer(a)
        other = cable_at.get(pa) if pa is not None else None
        if other is not None and other.cable in ends and other.cable not in done:
            c, d = ends[other.cable]
            swap = _swap(a, b, c, d, seen_peer)
            if swap is not None:
                done |= {cable.cable, other.cable}
                stays1, moved1, stays2, moved2 = swap
                findings.append(
                    Finding(
                        "swapped",
                        _owner(a, hcas),
                        f"cables {cable.cable} and {other.cable} are swapped: "
                        f"{describe(stays1, hcas)} is in {_where(moved2, hcas)} and "
                        f"{describe(stays2, hcas)} in {_where(moved1, hcas)}; plan says "
                        f"{_where(moved1, hcas)} and {_where(moved2, hcas)}",
                        f"swap the cables in {_where(moved1, hcas)} and {_where(moved2, hcas)}",
                        (min(cable.cable, other.cable), max(cable.cable, other.cable)),
                    )
                )
                continue
        done.add(cable.cable)
        for end, planned in ((a, b), (b, a)):
            found = seen_peer(end)
            if found is None or found == planned:
                continue
            findings.append(
                Finding(
                    "wrong-port",
                    _owner(end, hcas),
                    f"{describe(end, hcas)} is in {_where(found, hcas)}; plan says "
                    f"{_where(planned, hcas)}",
                    f"move the cable from {_where(found, hcas)} to {_where(planned, hcas)}",
                    (cable.cable,),
                )
            )
    return findings


def _swap(
    a: End, b: End, c: End, d: End, seen_peer: Callable[[End], End | None]
) -> tuple[End, End, End, End] | None:
    """(stays, moved, stays, moved) when cables a-b and c-d are linked a-d, c-b or a-c, b-d."""
    if seen_peer(a) == d and seen_peer(c) == b:
        return a, b, c, d
    if seen_peer(a) == c and seen_peer(b) == d:
        return a, b, d, c
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
