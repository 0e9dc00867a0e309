"""The node's network interfaces: links (`ip -j -d link`), IPv4 addresses (`ip -j -4
addr`), IPv4 routes of every table (`ip -j -4 route show table all`) and bonds
(/proc/net/bonding)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from myriad.node.facts.declare import Probe, command, fact, text_files
from myriad.node.facts.probe import as_json, at, read_text, record
from myriad.node.parsers import (
    Bond,
    Interface,
    ParseFailure,
    parse_bonding,
    parse_ip_addr,
    parse_ip_link,
    parse_ip_route,
)

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record


def proc_bonding(root: str) -> Record:
    top = at(root, "/proc/net/bonding")
    if not os.path.isdir(top):
        return record(
            None, stderr="/proc/net/bonding does not exist (bonding not loaded)", missing=True
        )
    bonds: dict[str, str] = {}
    for name in sorted(os.listdir(top)):
        text = read_text(os.path.join(top, name))
        if text is not None:
            bonds[name] = text
    return as_json(bonds)


def _bonds(text: str) -> Mapping[str, Bond]:
    data = text_files("/proc/net/bonding")(text)
    bonds = {}
    for name, content in data.items():
        try:
            bonds[name] = parse_bonding(content)
        except ParseFailure as exc:
            raise ParseFailure("/proc/net/bonding", f"{name}: {exc.reason}") from None
    return bonds


def _links(text: str) -> Mapping[str, Interface]:
    return {link.name: link for link in parse_ip_link(text)}


BONDS = fact("bonds", Probe("bonding", lambda o: proc_bonding(o.root)), "/proc/net/bonding", _bonds)
LINKS = fact("links", command("ip_link", "ip", "-j", "-d", "link"), "ip -j -d link", _links)
# Each interface's IPv4 addresses as ADDRESS/PREFIX: a RoCE rail's address is what gives
# it a RoCEv2 GID.
ADDRESSES = fact(
    "addresses", command("ip_addr", "ip", "-j", "-4", "addr"), "ip -j -4 addr", parse_ip_addr
)
# Every routing table's IPv4 routes: a RoCE rail behind a routed leaf reaches the rail's
# other leaves through its leaf, in the rail's own table and in main.
ROUTES = fact(
    "routes",
    command("ip_route", "ip", "-j", "-4", "route", "show", "table", "all"),
    "ip -j -4 route show table all",
    parse_ip_route,
)
