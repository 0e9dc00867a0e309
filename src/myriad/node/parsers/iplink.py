"""Parsers for `ip -j link`, `ip -j -d link`, `ip -j -4 addr` and `ip -j -4 route show table
all` (iproute2 JSON output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from myriad.node.parsers.common import ParseFailure, guarded, load_json

__all__ = ["Interface", "Route", "parse_ip_addr", "parse_ip_link", "parse_ip_route"]

TOOL = "ip -j link"


@dataclass(frozen=True, slots=True)
class Interface:
    """One link. `kind` and `slave_kind` come only with `-d` (ip -j -d link)."""

    ifindex: int | None
    name: str
    mtu: int
    operstate: str | None
    flags: tuple[str, ...]
    master: str | None
    kind: str | None
    slave_kind: str | None
    link_type: str | None
    address: str | None

    @property
    def up(self) -> bool:
        return "UP" in self.flags

    @property
    def lower_up(self) -> bool:
        return "LOWER_UP" in self.flags


def _optional_str(entry: dict[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseFailure(TOOL, f"{where}: {key} is not a string: {value!r}")
    return value


def _int(value: object) -> TypeGuard[int]:
    # JSON booleans are ints to Python; an MTU of `true` is not an MTU.
    return isinstance(value, int) and not isinstance(value, bool)


def _interface(position: int, entry: object) -> Interface:
    if not isinstance(entry, dict):
        raise ParseFailure(TOOL, f"entry {position} is not an object")
    name = entry.get("ifname")
    if not isinstance(name, str) or not name:
        raise ParseFailure(TOOL, f"entry {position} has no ifname")
    mtu, ifindex, flags = entry.get("mtu"), entry.get("ifindex"), entry.get("flags", [])
    if not _int(mtu):
        raise ParseFailure(TOOL, f"{name}: mtu is not an integer: {mtu!r}")
    if ifindex is not None and not _int(ifindex):
        raise ParseFailure(TOOL, f"{name}: ifindex is not an integer: {ifindex!r}")
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise ParseFailure(TOOL, f"{name}: flags is not a list of strings")
    linkinfo = entry.get("linkinfo", {})
    if not isinstance(linkinfo, dict):
        raise ParseFailure(TOOL, f"{name}: linkinfo is not an object")
    return Interface(
        ifindex=ifindex,
        name=name,
        mtu=mtu,
        operstate=_optional_str(entry, "operstate", name),
        flags=tuple(flags),
        master=_optional_str(entry, "master", name),
        kind=_optional_str(linkinfo, "info_kind", name),
        slave_kind=_optional_str(linkinfo, "info_slave_kind", name),
        link_type=_optional_str(entry, "link_type", name),
        address=_optional_str(entry, "address", name),
    )


@guarded(TOOL)
def parse_ip_link(text: str) -> tuple[Interface, ...]:
    """Parse `ip -j link` or `ip -j -d link`, keeping the kernel's interface order."""
    data = load_json(TOOL, text)
    if not isinstance(data, list):
        raise ParseFailure(TOOL, f"expected a JSON array of links, got {type(data).__name__}")
    interfaces = tuple(_interface(i, entry) for i, entry in enumerate(data))
    names = [iface.name for iface in interfaces]
    if len(set(names)) != len(names):
        raise ParseFailure(TOOL, "an interface name appears twice")
    return interfaces


@guarded("ip -j -4 addr")
def parse_ip_addr(text: str) -> dict[str, tuple[str, ...]]:
    """Parse `ip -j -4 addr`: each interface's IPv4 addresses as ADDRESS/PREFIX, in order."""
    tool = "ip -j -4 addr"
    data = load_json(tool, text)
    if not isinstance(data, list):
        raise ParseFailure(tool, f"expected a JSON array of links, got {type(data).__name__}")
    held: dict[str, tuple[str, ...]] = {}
    for position, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str):
            raise ParseFailure(tool, f"entry {position} has no ifname")
        infos = entry.get("addr_info", [])
        if not isinstance(infos, list):
            raise ParseFailure(tool, f"{entry['ifname']}: addr_info is not a list")
        addresses = []
        for info in infos:
            if not isinstance(info, dict):
                raise ParseFailure(tool, f"{entry['ifname']}: an addr_info entry is not an object")
            local, prefix = info.get("local"), info.get("prefixlen")
            if info.get("family", "inet") != "inet":
                continue
            if not isinstance(local, str) or not _int(prefix):
                raise ParseFailure(tool, f"{entry['ifname']}: an address without local/prefixlen")
            addresses.append(f"{local}/{prefix}")
        held[entry["ifname"]] = tuple(addresses)
    return held


ROUTE_TOOL = "ip -j -4 route show table all"


@dataclass(frozen=True, slots=True)
class Route:
    """One IPv4 route. iproute2 leaves `table` out for the main table and `dst` is
    "default" for 0.0.0.0/0; both are kept as the kernel's words ("main", "default")."""

    table: str
    dst: str
    gateway: str | None
    dev: str | None
    prefsrc: str | None
    kind: str


def _route(position: int, entry: object) -> Route:
    if not isinstance(entry, dict):
        raise ParseFailure(ROUTE_TOOL, f"entry {position} is not an object")
    dst = entry.get("dst")
    if not isinstance(dst, str) or not dst:
        raise ParseFailure(ROUTE_TOOL, f"entry {position} has no dst")
    where = f"route {dst}"
    fields = {}
    for key in ("table", "gateway", "dev", "prefsrc", "type"):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise ParseFailure(ROUTE_TOOL, f"{where}: {key} is not a string: {value!r}")
        fields[key] = value
    return Route(
        table=fields["table"] or "main",
        dst=dst,
        gateway=fields["gateway"],
        dev=fields["dev"],
        prefsrc=fields["prefsrc"],
        kind=fields["type"] or "unicast",
    )


@guarded(ROUTE_TOOL)
def parse_ip_route(text: str) -> tuple[Route, ...]:
    """Parse `ip -j -4 route show table all`: every table's routes, in the kernel's order."""
    data = load_json(ROUTE_TOOL, text)
    if not isinstance(data, list):
        kind = type(data).__name__
        raise ParseFailure(ROUTE_TOOL, f"expected a JSON array of routes, got {kind}")
    return tuple(_route(i, entry) for i, entry in enumerate(data))
