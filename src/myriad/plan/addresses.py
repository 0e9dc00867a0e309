"""Deterministic addresses for the nodes of a cluster, from the spec's networks.

Providers that assign addresses themselves (cloud, DHCP on bare metal) report them in the
stack outputs, which win; these are the addresses Myriad plans where nothing else decides:
the local container network, the storage bond, and the compute (IPoIB / RoCE) interfaces.
The first `FIRST_HOST_OFFSET` addresses of every network (and of every leaf's rail subnet)
stay free for gateways, DNS and storage servers; a leaf's gateway is its subnet's first.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence
from typing import Protocol, cast

from myriad.errors import AddressError
from myriad.plan.fabric import RailLeaves

FIRST_HOST_OFFSET = 10


def host_addresses(cidr: str, count: int, *, what: str) -> Sequence[str]:
    """`count` addresses of `cidr` in order, from FIRST_HOST_OFFSET on, as a lazy sequence."""
    network = ipaddress.ip_network(cidr)
    first = int(network.network_address) + FIRST_HOST_OFFSET
    last = int(network.broadcast_address) - 1
    if first + count - 1 > last:
        raise AddressError(
            f"the {what} network {cidr} has room for {max(last - first + 1, 0)} node addresses "
            f"after the first {FIRST_HOST_OFFSET}, not {count}: use a larger network"
        )
    return _AddressRange(first, count, network.prefixlen)


class _AddressRange(Sequence[str]):
    """Addresses computed on access, so 100,000 NICs cost no memory until rendered."""

    def __init__(self, first: int, count: int, prefixlen: int) -> None:
        self._first, self._count, self.prefixlen = first, count, prefixlen

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        # Dotted quad by shifts: a 100k-GPU cluster renders ~125,000 addresses, and
        # str(IPv4Address) costs several times more per address.
        value = self._first + index % self._count
        return f"{value >> 24}.{value >> 16 & 255}.{value >> 8 & 255}.{value & 255}"

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._count))

    def with_prefix(self, index: int) -> str:
        return f"{self[index]}/{self.prefixlen}"


def rail_networks(cidr: str, rails: int) -> list[str]:
    """`cidr` cut into equal networks, one per rail in rail order (the next power of two).

    Each rail's network is then on exactly one interface of a node, so a reply never leaves
    by another rail; where a rail spans several leaves, each leaf's subnet is cut from it
    (rail_addresses).
    """
    network = ipaddress.ip_network(cidr)
    extra = max(rails - 1, 0).bit_length()
    if network.prefixlen + extra > 30:
        raise AddressError(
            f"the compute network {cidr} cannot be cut into {rails} rail subnets: "
            f"use a network of /{30 - extra} or larger"
        )
    return [str(subnet) for _, subnet in zip(range(rails), network.subnets(extra), strict=False)]


class RailRange(Protocol):
    """One rail's node addresses: node i's address with its prefix, as an interface takes
    it, the gateway it reaches the rail's other leaves by (None: one subnet, no gateway),
    and the rail's whole network."""

    network: str

    def with_prefix(self, index: int) -> str: ...

    def gateway(self, index: int) -> str | None: ...


class _StretchedRail:
    """The rail's network is one subnet: every node directly connected, no gateway."""

    def __init__(self, network: str, addresses: _AddressRange) -> None:
        self.network, self._addresses = network, addresses

    def with_prefix(self, index: int) -> str:
        return self._addresses.with_prefix(index)

    def gateway(self, index: int) -> str | None:
        return None


def _dotted(value: int) -> str:
    return f"{value >> 24}.{value >> 16 & 255}.{value >> 8 & 255}.{value & 255}"


class _LeafRail:
    """The rail's network cut into one subnet per leaf: the leaf, the subnet's first
    address, is its nodes' gateway; nodes from FIRST_HOST_OFFSET on, by slot on the leaf."""

    def __init__(self, network: str, rail: int, leaves: RailLeaves, prefixlen: int) -> None:
        self.network, self._rail, self._leaves, self._prefixlen = network, rail, leaves, prefixlen
        self._base = int(ipaddress.ip_network(network).network_address)
        self._size = 1 << (32 - prefixlen)

    def _subnet(self, index: int) -> tuple[int, int]:
        leaf, slot = self._leaves.place(index, self._rail)
        return self._base + leaf * self._size, slot

    def with_prefix(self, index: int) -> str:
        subnet, slot = self._subnet(index)
        return f"{_dotted(subnet + FIRST_HOST_OFFSET + slot)}/{self._prefixlen}"

    def gateway(self, index: int) -> str | None:
        return _dotted(self._subnet(index)[0] + 1)


def leaf_prefixlen(hosts: int) -> int:
    """The smallest subnet holding the reserved addresses, `hosts` nodes and a broadcast."""
    return 32 - (FIRST_HOST_OFFSET + hosts).bit_length()


def rail_addresses(
    cidr: str, rails: int, count: int, leaves: RailLeaves | None = None
) -> list[RailRange]:
    """Per rail, the addresses of `count` compute nodes in that rail's network (rail_networks).

    `leaves` (a routed fabric, fabric.rail_leaves): the rail's network is cut into one subnet
    per leaf of the rail, each the smallest power of two for a leaf's nodes, so adding islands
    renumbers nothing; the leaf is the gateway. Without: one subnet per rail, stretched over
    its leaves.
    """
    networks = rail_networks(cidr, rails)
    if leaves is None:
        return [
            _StretchedRail(
                subnet,
                cast(
                    _AddressRange,
                    host_addresses(subnet, count, what=f"rail {rail} (part of compute {cidr})"),
                ),
            )
            for rail, subnet in enumerate(networks)
        ]
    prefixlen = leaf_prefixlen(leaves.hosts)
    leaf_bits = max(leaves.per_rail - 1, 0).bit_length()
    rail_bits = max(rails - 1, 0).bit_length()
    if ipaddress.ip_network(networks[0]).prefixlen + leaf_bits > prefixlen:
        raise AddressError(
            f"the compute network {cidr} cannot hold {rails} rails of {leaves.per_rail} leaf "
            f"subnets each, a /{prefixlen} per leaf for its {leaves.hosts} nodes after the "
            f"first {FIRST_HOST_OFFSET}: use a network of /{prefixlen - leaf_bits - rail_bits} "
            "or larger"
        )
    return [_LeafRail(network, rail, leaves, prefixlen) for rail, network in enumerate(networks)]
