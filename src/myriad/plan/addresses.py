"""Deterministic addresses for the nodes of a cluster, from the spec's networks.

Providers that assign addresses themselves (cloud, DHCP on bare metal) report them in the
stack outputs, which win; these are the addresses Myriad plans where nothing else decides:
the local container network, the storage bond, and the compute (IPoIB / RoCE) interfaces.
The first `FIRST_HOST_OFFSET` addresses of every network stay free for gateways, DNS and
storage servers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence
from typing import cast

from myriad.errors import AddressError

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
    """`cidr` cut into equal subnets, one per rail in rail order (the next power of two).

    Each rail's subnet is then directly connected on exactly one interface of a node, so a
    reply never leaves by another rail, and the rail's leaf switches route between islands.
    """
    network = ipaddress.ip_network(cidr)
    extra = max(rails - 1, 0).bit_length()
    if network.prefixlen + extra > 30:
        raise AddressError(
            f"the compute network {cidr} cannot be cut into {rails} rail subnets: "
            f"use a network of /{30 - extra} or larger"
        )
    return [str(subnet) for _, subnet in zip(range(rails), network.subnets(extra), strict=False)]


def rail_addresses(cidr: str, rails: int, count: int) -> list[_AddressRange]:
    """Per rail, the addresses of `count` compute nodes in that rail's subnet (rail_networks);
    `with_prefix(i)` is node i's address on that rail as an interface takes it."""
    return [
        cast(
            _AddressRange,
            host_addresses(subnet, count, what=f"rail {rail} (part of compute {cidr})"),
        )
        for rail, subnet in enumerate(rail_networks(cidr, rails))
    ]
