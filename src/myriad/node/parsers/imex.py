"""Parser for `nvidia-imex-ctl -N`: the IMEX domain as one node's IMEX daemon sees it.

NVIDIA's IMEX guide (docs.nvidia.com/multi-node-nvlink-systems/imex-guide, "The
nvidia-imex-ctl") documents the query; its output, as captured on a GB200 NVL72 domain
(tests/samples/nvidia-imex-ctl), is a legend of connection codes, a timestamp, one line per
node of the daemon's nodes_config.cfg (`Node #N - <address> - <status> [- Version: <v>]`),
a matrix of connection codes (row: from node, column: to node) and `Domain State: <state>`.
The domain state line comes last, so output cut anywhere before it is refused as truncated,
and the matrix must be square over the listed nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from myriad.node.parsers.common import ParseFailure, first_line, guarded, require_text

__all__ = ["CONNECTED", "ImexDomain", "ImexNode", "parse_imex_nodes"]

TOOL = "nvidia-imex-ctl -N"
# The legend's code for a working connection ("C - Connected - Ready for operation").
CONNECTED = "C"

_NODE = re.compile(
    r"Node #(?P<index>\d+)\s+-\s+(?P<address>\S+)\s+-\s+(?P<status>[A-Z_]+)"
    r"(?:\s+-\s+Version:\s+(?P<version>\S+))?"
)
_MATRIX_HEADER = re.compile(r"Nodes From\\To((?:\s+\d+)*)")
_MATRIX_ROW = re.compile(r"(?P<index>\d+)\s+(?P<codes>\S+(?:\s+\S+)*)")
_DOMAIN = re.compile(r"Domain State:\s*(?P<state>\S+)")


@dataclass(frozen=True, slots=True)
class ImexNode:
    """One node of the IMEX domain: its address in nodes_config.cfg and its daemon's state."""

    index: int
    address: str
    status: str
    version: str | None


@dataclass(frozen=True, slots=True)
class ImexDomain:
    """The domain: its nodes, the connection code from each node to each (`links[i][j]`:
    from node i to node j, `C` when connected) and the state the daemon reports."""

    nodes: tuple[ImexNode, ...]
    links: tuple[tuple[str, ...], ...]
    state: str

    def broken_links(self) -> list[str]:
        """`from->to: code` for every pair whose connection is not `C`."""
        return [
            f"{self.nodes[i].address}->{self.nodes[j].address}: {code}"
            for i, row in enumerate(self.links)
            for j, code in enumerate(row)
            if code != CONNECTED
        ]


@guarded(TOOL)
def parse_imex_nodes(text: str) -> ImexDomain:
    """Parse `nvidia-imex-ctl -N`; ParseFailure for anything else (an error message from a
    daemon that is not running, output cut short, a matrix that does not match the nodes)."""
    body = require_text(TOOL, text)
    lines = [line.rstrip() for line in body.splitlines()]
    nodes: list[ImexNode] = []
    links: list[tuple[str, ...]] = []
    columns: list[int] | None = None
    state: str | None = None
    seen_nodes = False
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line == "Nodes:":
            seen_nodes = True
            continue
        if node := _NODE.fullmatch(line):
            nodes.append(
                ImexNode(
                    index=int(node.group("index")),
                    address=node.group("address"),
                    status=node.group("status"),
                    version=node.group("version"),
                )
            )
            continue
        if header := _MATRIX_HEADER.fullmatch(line):
            columns = [int(c) for c in header.group(1).split()]
            continue
        if domain := _DOMAIN.fullmatch(line):
            state = domain.group("state")
            continue
        if columns is not None and state is None and (row := _MATRIX_ROW.fullmatch(line)):
            if int(row.group("index")) != len(links):
                raise ParseFailure(
                    TOOL,
                    f"line {number}: matrix row {row.group('index')} "
                    f"where row {len(links)} was due",
                )
            links.append(tuple(row.group("codes").split()))
    if not seen_nodes:
        raise ParseFailure(
            TOOL, f"no node list; not nvidia-imex-ctl -N output: {first_line(body)!r}"
        )
    if state is None:
        raise ParseFailure(TOOL, "no 'Domain State:' line; the output looks truncated")
    if [n.index for n in nodes] != list(range(len(nodes))):
        raise ParseFailure(TOOL, "nodes are not numbered 0.. in order; the output looks damaged")
    if not nodes:
        raise ParseFailure(TOOL, "the node list is empty")
    if columns != list(range(len(nodes))):
        raise ParseFailure(TOOL, f"the connectivity matrix does not name the {len(nodes)} nodes")
    if len(links) != len(nodes) or any(len(row) != len(nodes) for row in links):
        raise ParseFailure(
            TOOL,
            f"the connectivity matrix is not {len(nodes)} by {len(nodes)}; the output looks "
            "truncated",
        )
    return ImexDomain(nodes=tuple(nodes), links=tuple(links), state=state)
