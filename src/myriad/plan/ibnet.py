"""The planned fabric as an ibsim net file (Debian's ibsim-utils), so OpenSM and
infiniband-diags run against it unchanged.

A net file is ibnetdiscover's format: per node a header (`Switch 64 "S-is00-leaf001"  #
"is00-leaf001"`, `Hca 1 "H-gpu01-mlx5_0"  # "gpu01 mlx5_0"`) and one line per connected
port (`[3] "S-is00-spine001"[1] w=2 e=4`). The text after `#` becomes the node description
that ibnetdiscover prints and the fabric check matches names by; the quoted id is only the
file's own handle.

Link options are ibsim's enabled width (`w`: 1 = 1x, 2 = 4x) and speed (`s` for SDR to QDR,
`e` for the extended speeds: 1 FDR, 2 EDR, 4 HDR). ibsim 0.10 (Debian 12) knows nothing
faster than HDR, so a faster planned link is written at HDR and `SIM_SPEED_CAP` says so;
the check is then told the same cap. The first record is where ibsim attaches clients that
name no node (SIM_HOST), so the first leaf comes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from myriad.plan.cabling import Cable

SIM_SPEED_CAP = "HDR"
# ibsim's port options per speed name: (option, value).
_SPEED_OPTION = {
    "SDR": ("s", 1),
    "DDR": ("s", 2),
    "QDR": ("s", 4),
    "FDR": ("e", 1),
    "EDR": ("e", 2),
    "HDR": ("e", 4),
}
_SPEED_BY_4X_GBPS = {10: "SDR", 20: "DDR", 40: "QDR", 56: "FDR", 100: "EDR", 200: "HDR"}
_WIDTH_OPTION = {1: 1, 4: 2, 8: 4, 12: 8, 2: 16}


@dataclass(frozen=True, slots=True)
class NetLink:
    """One link as the simulator should build it: ends by name (an HCA as "host device")."""

    a: str
    a_port: int
    a_hca: bool
    b: str
    b_port: int
    lanes: int = 4
    speed_gbps: int = 200


@dataclass(slots=True)
class _Node:
    hca: bool
    ports: int
    lines: list[tuple[int, str]] = field(default_factory=list)


def links_from_cables(cables: Iterable[Cable]) -> list[NetLink]:
    return [
        NetLink(
            a=f"{c.a_device} {c.a_hca}" if c.tier == "node-leaf" else c.a_device,
            a_port=c.a_port,
            a_hca=c.tier == "node-leaf",
            b=c.b_device,
            b_port=c.b_port,
            speed_gbps=c.speed_gbps,
        )
        for c in cables
    ]


def _node_id(name: str, hca: bool) -> str:
    return ("H-" if hca else "S-") + name.replace(" ", "-")


def sim_speed(gbps: int) -> str:
    """The speed name ibsim builds a planned 4x link of `gbps` at."""
    return _SPEED_BY_4X_GBPS.get(min(gbps, 200), SIM_SPEED_CAP)


def ibsim_net(links: Iterable[NetLink], switch_ports: Mapping[str, int]) -> str:
    """The net file; `switch_ports` gives each switch's port count (its radix)."""
    nodes: dict[str, _Node] = {}
    for link in links:
        option, value = _SPEED_OPTION[sim_speed(link.speed_gbps)]
        opts = f"w={_WIDTH_OPTION[link.lanes]} {option}={value}"
        ends = ((link.a, link.a_port, link.a_hca), (link.b, link.b_port, False))
        for (name, port, hca), (other, other_port, other_hca) in (ends, ends[::-1]):
            node = nodes.get(name)
            if node is None:
                node = nodes[name] = _Node(hca, 1 if hca else switch_ports[name])
            node.lines.append(
                (port, f'[{port}]\t"{_node_id(other, other_hca)}"[{other_port}]\t{opts}')
            )
    out: list[str] = ["# Planned by myriad: node descriptions carry the planned names."]
    switches = sorted(name for name, node in nodes.items() if not node.hca)
    hcas = sorted(name for name, node in nodes.items() if node.hca)
    for name in [*switches, *hcas]:
        node = nodes[name]
        kind = "Hca" if node.hca else "Switch"
        out.append("")
        out.append(f'{kind}\t{node.ports} "{_node_id(name, node.hca)}"\t\t# "{name}"')
        out.extend(line for _, line in sorted(node.lines))
    return "\n".join(out) + "\n"


def switch_port_counts(
    cables: Iterable[Cable], leaf_ports: int, spine_ports: int
) -> dict[str, int]:
    """Each switch's port count: leaves have the leaf model's, spines and core the spine's."""
    counts: dict[str, int] = {}
    for cable in cables:
        if cable.tier == "node-leaf":
            counts[cable.b_device] = leaf_ports
        elif cable.tier == "leaf-spine":
            counts[cable.a_device] = leaf_ports
            counts[cable.b_device] = spine_ports
        else:
            counts[cable.a_device] = counts[cable.b_device] = spine_ports
    return counts
