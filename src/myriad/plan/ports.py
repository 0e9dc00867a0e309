"""The ports a server shape has, by purpose, with the names the host will give them.

Names come from the spec (`devices`, `interfaces` of a NIC group) where the operator gave
them; else, for a server whose vendor publishes its ports (`port_map` of a catalog layout:
DGX H100/H200, where the compute HCAs are mlx5_0,3,4,5,6,9,10,11 and not mlx5_0..7), from
that table. Otherwise RDMA devices follow mlx5's enumeration (compute NICs first, in rail
order, then storage), which on the node the hardware discovery (`myriad.node.hardware`)
checks before anything is named or flashed; IPoIB interfaces are ib0, ib1, ... and Ethernet
ports get the names `rail0`...
/ `stor0`... by purpose, which keeps configs identical across vendors' slot orders. Nothing
in the kernel gives those names: `ports_to_name` lists the ports the `netnames` role must
name on a server (it finds each by its RDMA device and writes a systemd.link file matching
the port's PCI path, see roles/netnames/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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


def vendor_devices(profile: Profile, catalog: Catalog, purpose: Purpose) -> tuple[str, ...]:
    """The RDMA devices the server's vendor publishes for `purpose`, if it covers the group.

    Only when the profile's NICs are the layout's (a compute group of another model or count
    than the vendor's table describes is not that server's ports) and the table has a name
    for every port.
    """
    group: NicGroup | None = getattr(profile.nics, purpose)
    layout = catalog.servers.get(profile.server) if profile.server else None
    if group is None or layout is None or layout.port_map is None or purpose == "management":
        return ()
    if purpose == "compute" and group.model != layout.compute_nics.model:
        return ()
    names = layout.port_map.compute if purpose == "compute" else layout.port_map.storage
    count = _port_count(group, catalog)
    return tuple(names[:count]) if len(names) >= count else ()


def ports(profile: Profile, catalog: Catalog, purpose: Purpose, fabric: str) -> list[Port]:
    group: NicGroup | None = getattr(profile.nics, purpose)
    if group is None:
        return []
    count = _port_count(group, catalog)
    devices = group.devices or vendor_devices(profile, catalog, purpose)
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
            device=devices[i] if devices else f"mlx5_{first_device + i}",
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


def hardware_expectation(
    profile: Profile, catalog: Catalog, fabric: str, where: str
) -> dict[str, Any]:
    """What discovery on a node of this profile must find (`myriad.node.hardware.profile`).

    `where` is the profile's place in the spec (`profiles.dgx.nics`), so a node's refusal
    names the field to fix. `devices` are the RDMA devices the inventory gives the roles for
    each port, in rail order.
    """
    expected: dict[str, Any] = {"where": where, "pcie_gen": profile.pcie.gen}
    if profile.gpu is not None:
        expected["gpus"] = profile.gpu.count
        sm = catalog.gpus[profile.gpu.model].compute_capability
        if sm is not None:
            expected["sm"] = sm
    for purpose in ("compute", "storage"):
        group: NicGroup | None = getattr(profile.nics, purpose)
        if group is None or not catalog.nics[group.model].rdma:
            continue
        expected[purpose] = {
            # Compute NICs share a switch with GPUs where the profile has PCIe switches;
            # without them every device hangs off a CPU root port and PCI order decides.
            **({"beside_gpu": profile.pcie.switches > 0} if purpose == "compute" else {}),
            "model": group.model,
            "count": _port_count(group, catalog),
            "speed_gbps": catalog.nics[group.model].speed_gbps,
            # The names every role will use (the spec's, the vendor's, else the kernel's
            # enumeration): the node refuses when its hardware puts them elsewhere, before
            # mstconfig touches a port that is not the one the inventory means.
            "devices": [p.device for p in ports(profile, catalog, purpose, fabric)],
        }
    expected["models"] = {
        pci_id: name
        for entries in (catalog.nics, catalog.gpus)
        for name, entry in entries.items()
        for pci_id in entry.pci_ids
    }
    return expected
