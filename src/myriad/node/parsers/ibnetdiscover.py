"""Parser for `ibnetdiscover` output (infiniband-diags): the subnet's nodes and links.

The output is one record per node: a header line (`Switch`, `Ca` or `Rt`, the port
count, the node's id in quotes, and after `#` its node description in quotes), then one
line per connected port: `[local](guid)? "remote id"[remote port](guid)?  # ... "remote
description" lid N 4xHDR`. Every link is printed from both of its ends; the result holds
it once, with the active width and speed as the tool printed them (`4x`, `HDR`).

Lines before the first record and comments (`#`) and `vendid=` style attributes are
skipped. Standard library only: this runs on the subnet manager's node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from myriad.node.parsers.common import ParseFailure, guarded, require_text

__all__ = ["IbLink", "IbNode", "IbTopology", "parse_ibnetdiscover"]

TOOL = "ibnetdiscover"

_HEADER = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([^"]+)"(?:\s*(?:\([0-9a-fA-F]+\))?)?\s*(.*)$')
_PORT = re.compile(
    r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*"([^"]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*(.*)$'
)
_DESCRIPTION = re.compile(r'#\s*"([^"]*)"')
_RATE = re.compile(r"\b(\d+)x([A-Z0-9]+)\s*$")
_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}


@dataclass(frozen=True, slots=True)
class IbNode:
    kind: str
    node_id: str
    description: str
    ports: int


@dataclass(frozen=True, slots=True)
class IbLink:
    """One link, once: `a` is the end whose (node id, port) sorts first."""

    a_id: str
    a_port: int
    b_id: str
    b_port: int
    width: str | None
    speed: str | None


@dataclass(frozen=True, slots=True)
class IbTopology:
    nodes: dict[str, IbNode]
    links: tuple[IbLink, ...]


def _rate(comment: str) -> tuple[str | None, str | None]:
    match = _RATE.search(comment)
    return (f"{match.group(1)}x", match.group(2)) if match else (None, None)


@guarded(TOOL)
def parse_ibnetdiscover(text: object) -> IbTopology:
    body = require_text(TOOL, text)
    nodes: dict[str, IbNode] = {}
    links: dict[tuple[str, int, str, int], IbLink] = {}
    current: str | None = None
    for number, raw in enumerate(body.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header is not None:
            kind, ports, node_id, rest = header.groups()
            described = _DESCRIPTION.search(rest)
            nodes[node_id] = IbNode(
                _KINDS[kind], node_id, described.group(1) if described else node_id, int(ports)
            )
            current = node_id
            continue
        port = _PORT.match(line)
        if port is not None:
            if current is None:
                raise ParseFailure(TOOL, f"line {number}: a port line before any node: {line!r}")
            local, remote, remote_port, comment = port.groups()
            width, speed = _rate(comment)
            here, there = (current, int(local)), (remote, int(remote_port))
            a, b = (here, there) if here <= there else (there, here)
            key = (a[0], a[1], b[0], b[1])
            if key not in links:
                links[key] = IbLink(a[0], a[1], b[0], b[1], width, speed)
            continue
        if "=" in line.split()[0]:
            continue  # vendid=, devid=, sysimgguid=, switchguid=, caguid=
        raise ParseFailure(
            TOOL, f"line {number}: neither a node, a port nor an attribute: {line!r}"
        )
    if not nodes:
        raise ParseFailure(TOOL, "no Switch, Ca or Rt record in the output")
    for link in links.values():
        for node_id in (link.a_id, link.b_id):
            if node_id not in nodes:
                raise ParseFailure(TOOL, f"a link names node {node_id!r}, which has no record")
    return IbTopology(nodes, tuple(links.values()))
