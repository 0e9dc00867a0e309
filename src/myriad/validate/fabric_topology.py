"""Slurm's topology.conf (topology/tree) from the discovered fabric, and where its tree
differs from the planned one (`myriad.plan.fabric.iter_switch_tree`).

Tiers are read off the links: a switch with HCAs is a leaf and lists their hosts; a switch
linked to leaves is a spine and lists them; one linked to spines is core. A switch's name is
its node description (as the fabric check matches it); hosts are the first word of an
HCA's description ("gpu01 mlx5_0"). Node lists are written comma-separated, which Slurm
reads as well as its bracketed ranges.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from myriad.node.parsers.ibnetdiscover import IbTopology
from myriad.plan.fabric import TreeSwitch
from myriad.validate.cabling import device_name


@dataclass(frozen=True, slots=True)
class FoundSwitch:
    name: str
    tier: str
    nodes: tuple[str, ...]
    switches: tuple[str, ...]


def discovered_tree(topology: IbTopology) -> list[FoundSwitch]:
    name = {n.node_id: device_name(n.description) for n in topology.nodes.values()}
    kind = {n.node_id: n.kind for n in topology.nodes.values()}
    hosts: dict[str, set[str]] = {}
    peers: dict[str, set[str]] = {}
    for link in topology.links:
        for here, there in ((link.a_id, link.b_id), (link.b_id, link.a_id)):
            if kind[here] != "switch":
                continue
            if kind[there] == "ca":
                hosts.setdefault(here, set()).add(name[there].split()[0])
            elif kind[there] == "switch" and there != here:
                peers.setdefault(here, set()).add(there)
    switches = [i for i, k in kind.items() if k == "switch"]
    tier = {i: 0 for i in switches if hosts.get(i)}
    for level in (1, 2):
        for switch in switches:
            if switch not in tier and any(tier.get(p) == level - 1 for p in peers.get(switch, ())):
                tier[switch] = level
    found = []
    for switch in sorted(switches, key=lambda i: (tier.get(i, 3), name[i])):
        level = tier.get(switch, 3)
        below = sorted(name[p] for p in peers.get(switch, ()) if tier.get(p, 3) == level - 1)
        found.append(
            FoundSwitch(
                name[switch],
                ("leaf", "spine", "core", "unplaced")[level],
                tuple(sorted(hosts.get(switch, ()))) if level == 0 else (),
                tuple(below),
            )
        )
    return found


def topology_conf(tree: Iterable[FoundSwitch]) -> str:
    lines = ["# Slurm topology/tree, from the discovered fabric (myriad validate --fabric)."]
    for switch in tree:
        if switch.nodes:
            lines.append(f"SwitchName={switch.name} Nodes={','.join(switch.nodes)}")
        elif switch.switches:
            lines.append(f"SwitchName={switch.name} Switches={','.join(switch.switches)}")
    return "\n".join(lines) + "\n"


def tree_differences(planned: Iterable[TreeSwitch], found: Iterable[FoundSwitch]) -> list[str]:
    """One line per switch whose nodes or lower switches differ from the plan."""
    seen = {s.name: s for s in found}
    lines: list[str] = []
    for switch in planned:
        there = seen.pop(switch.name, None)
        if there is None:
            lines.append(f"{switch.name}: planned, not discovered")
            continue
        for what, want, got in (
            ("nodes", set(switch.nodes), set(there.nodes)),
            ("switches", set(switch.switches), set(there.switches)),
        ):
            if want != got:
                missing = ",".join(sorted(want - got)) or "-"
                extra = ",".join(sorted(got - want)) or "-"
                lines.append(f"{switch.name}: {what} missing {missing}; not planned {extra}")
    lines.extend(f"{name}: discovered, not planned" for name in sorted(seen))
    return lines
