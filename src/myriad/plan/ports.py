"""The ports a server shape has, by purpose, with the names the host will give them.

Names come from the spec (`devices`, `interfaces` of a NIC group) where the operator gave
them. Otherwise RDMA devices follow mlx5's enumeration (compute NICs first, in rail order,
then storage), IPoIB interfaces are ib0, ib1, ... and Ethernet ports get the predictable
names `rail0`... / `stor0`... that a systemd .link file per port assigns (by MAC or PCI path)
on real hosts: naming ports by purpose keeps configs identical across vendors' slot orders.
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
