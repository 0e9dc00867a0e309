"""The RoCEv2 GIDs of a node's Ethernet RDMA ports, and which index holds a rail's IPv4 one.

The kernel keeps each port's GID table in /sys/class/infiniband/DEV/ports/N/gids/I, the
type of each entry in gid_attrs/types/I ("RoCE v2", "IB/RoCE v1"; unused entries cannot be
read), per Documentation/ABI/testing/sysfs-class-infiniband. An IPv4 address appears as
the IPv4-mapped IPv6 GID ::ffff:a.b.c.d. NCCL older than 2.21 takes NCCL_IB_GID_INDEX as
given (default 0, a RoCE v1 entry): one index must then name the rail's RoCEv2 IPv4 GID
on every rail, which is what this tells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from myriad.node.hardware.sysfs import Reader

ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


def roce_gids(fs: Reader) -> dict[str, list[list[Any]]]:
    """device -> [[index, gid, type], ...] of port 1's populated GIDs, Ethernet ports only."""
    found: dict[str, list[list[Any]]] = {}
    for device in fs.listdir("class/infiniband"):
        port = f"class/infiniband/{device}/ports/1"
        if (fs.read(f"{port}/link_layer") or "").lower() != "ethernet":
            continue
        entries = []
        for name in sorted(fs.listdir(f"{port}/gids"), key=lambda n: int(n) if n.isdigit() else -1):
            gid = fs.read(f"{port}/gids/{name}")
            kind = fs.read(f"{port}/gid_attrs/types/{name}")
            if gid and gid != ZERO and kind and name.isdigit():
                entries.append([int(name), gid, kind])
        found[device] = entries
    return found


def ipv4_gid(address: str) -> str:
    """The GID of an IPv4 address: ::ffff:a.b.c.d, written as sysfs writes GIDs."""
    a, b, c, d = (int(part) for part in address.split("/")[0].split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def ipv4_roce_v2_index(entries: Sequence[Sequence[Any]], address: str) -> int | None:
    wanted = ipv4_gid(address)
    for index, gid, kind in entries:
        if str(gid).lower() == wanted and str(kind).strip().lower() == "roce v2":
            return int(index)
    return None


def gid_problems(
    gids: Mapping[str, Sequence[Sequence[Any]]], rails: Mapping[str, str], pinned: int | None
) -> tuple[list[str], dict[str, int]]:
    """Problems, and the RoCEv2 IPv4 GID index found per rail device."""
    problems: list[str] = []
    found: dict[str, int] = {}
    for device, address in rails.items():
        if device not in gids:
            problems.append(f"{device}: no Ethernet RDMA port 1 (no GID table)")
            continue
        index = ipv4_roce_v2_index(gids[device], address)
        if index is None:
            problems.append(f"{device}: no RoCEv2 GID for {address.split('/')[0]}")
        else:
            found[device] = index
    indices = sorted(set(found.values()))
    if len(indices) > 1:
        problems.append(
            "the RoCEv2 IPv4 GID index differs between rails ("
            + ", ".join(f"{d} {i}" for d, i in found.items())
            + "): one NCCL_IB_GID_INDEX cannot name them all"
        )
    elif indices and pinned is not None and pinned >= 0 and indices[0] != pinned:
        problems.append(
            f"the rails' RoCEv2 IPv4 GID is at index {indices[0]}, the spec pins {pinned}"
        )
    return problems, found
