"""The ports a server shape has, by purpose, with the names the host will give them.

Names come from the spec (`devices`, `interfaces` of a NIC group) where the operator gave
them. Otherwise RDMA devices follow mlx5's enumeration (compute NICs first, in rail order,
then storage), IPoIB interfaces are ib0, ib1, ... and Ethernet ports get the names `rail0`...
/ `stor0`... by purpose, which keeps configs identical across vendors' slot orders. Nothing
in the kernel gives those names: `ports_to_name` lists the ports the `netnames` role must
name on a server (it finds each by its RDMA device and writes a systemd.link file matching
the port's PCI path, see roles/netnames/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from myriad.spec.catalog_models import Catalog
from myriad.spec.models import NicGroup, Profile

Purpose = Literal["compute", "storage", "management"]
_ETHERNET_PREFIX = {"compute": "rail", "storage": "stor", "management": "mgmt"}


@dataclass(frozen=True, slots=True)
class Port:
    purpose: Purpose
    index: int
    device: str
    interface: str
    speed_gbps: int


def _port_count(group: NicGroup | None, catalog: Catalog) -> int:
    return 0 if group is None else group.count * catalog.nics[group.model].ports


def ports(profile: Profile, catalog: Catalog, purpose: Purpose, fabric: str) -> list[Port]:
    group: NicGroup | None = getattr(profile.nics, purpose)
    if group is None:
        return []
    count = _port_count(group, catalog)
    first_device = 0
    for earlier in ("compute", "storage", "management"):
        if earlier == purpose:
            break
        first_device += _port_count(getattr(profile.nics, earlier), catalog)
    ipoib = purpose == "compute" and fabric == "infiniband"
    prefix = "ib" if ipoib else _ETHERNET_PREFIX[purpose]
    speed = catalog.nics[group.model].speed_gbps
    return [
        Port(
            purpose=purpose,
            index=i,
            device=group.devices[i] if group.devices else f"mlx5_{first_device + i}",
            interface=group.interfaces[i] if group.interfaces else f"{prefix}{i}",
            speed_gbps=speed,
        )
        for i in range(count)
    ]


def ports_to_name(profile: Profile, catalog: Catalog, fabric: str) -> list[Port]:
    """The Ethernet ports whose names Myriad made up, on NICs with an RDMA device to find them by.

    IPoIB interfaces keep the kernel's names; names the spec gives (`interfaces`) are the
    operator's and already exist; a NIC without RDMA has no device to find its port by.
    """
    named: list[Port] = []
    for purpose in ("compute", "storage", "management"):
        group: NicGroup | None = getattr(profile.nics, purpose)
        if group is None or group.interfaces or not catalog.nics[group.model].rdma:
            continue
        named.extend(
            p for p in ports(profile, catalog, purpose, fabric) if not p.interface.startswith("ib")
        )
    return named
