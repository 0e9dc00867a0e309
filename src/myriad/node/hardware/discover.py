"""The node's hardware map: GPUs and network ports as sysfs shows them, with their PCIe places.

Read, per the kernel's ABI documents (Documentation/ABI/testing/sysfs-bus-pci,
sysfs-class-infiniband, sysfs-class-net):
- `bus/pci/devices/<BDF>`: a link into `devices/pci<domain>:<bus>/<root port>/.../<BDF>`, so
  the link's target is the device's ancestry; `vendor`, `device`, `class`, `numa_node`, and
  `physfn` on a virtual function;
- `class/infiniband/<dev>`: `device` (its PCI function), `fw_ver`, `node_guid`, and per port
  `ports/<n>/{link_layer,rate,state}`; `device/net/` lists the function's netdevs;
- `class/net/<if>`: `device` (for ports with no RDMA device) and `speed` in Mb/s.

A PCIe switch is what sits between a root port and the devices below it: the bridge right
under the root port is the switch's upstream port, and it names the switch. A GPU and a
port "share a switch" when their ancestries meet below the root port (NCCL's PIX or PXB),
which also covers a GPU behind a ConnectX-8's own switch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from myriad.node.hardware.sysfs import Reader

BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
NVIDIA = "0x10de"
# PCI class codes (PCI Code and ID Assignment Specification): 0x0302 3D controller (SXM
# GPUs), 0x0300 VGA controller (some PCIe GPUs), 0x0604 PCI-to-PCI bridge (switch ports).
GPU_CLASSES = ("0x0302", "0x0300")
BRIDGE_CLASS = "0x0604"
# 0x0200 Ethernet, 0x0207 InfiniBand controller: the network functions.
NETWORK_CLASSES = ("0x0200", "0x0207")
# "ConnectX Family mlx5Gen Virtual Function" (pci.ids): every ConnectX since -6 Dx shares it,
# so it names no model. Passed through to a VM it has no `physfn` link to give it away.
VIRTUAL_FUNCTION_IDS = frozenset({"15b3:101e"})
RATE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec")


@dataclass(frozen=True, slots=True)
class Gpu:
    bdf: str
    pci_id: str
    model: str | None
    numa_node: int | None
    switch: str | None


@dataclass(frozen=True, slots=True)
class Port:
    """One network port: a port of an RDMA device, or a netdev of a PCI function without one."""

    bdf: str
    pci_id: str
    model: str | None
    virtual_function: bool
    rdma_device: str | None
    port: int
    link_layer: str | None
    rate_gbps: float | None
    state: str | None
    netdev: str | None
    guid: str | None
    firmware: str | None
    numa_node: int | None
    switch: str | None
    gpus: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HardwareMap:
    gpus: tuple[Gpu, ...]
    ports: tuple[Port, ...]

    def to_json(self) -> dict[str, object]:
        return {"gpus": [asdict(g) for g in self.gpus], "ports": [asdict(p) for p in self.ports]}


@dataclass(frozen=True, slots=True)
class _Pci:
    bdf: str
    vendor: str
    device: str
    klass: str
    numa_node: int | None
    chain: tuple[str, ...]  # the BDFs from the root port down to the device itself
    virtual_function: bool

    @property
    def pci_id(self) -> str:
        return f"{self.vendor.removeprefix('0x')}:{self.device.removeprefix('0x')}"


def _numa(text: str | None) -> int | None:
    # -1: the platform gave no NUMA affinity (a VM, a one-socket board).
    try:
        value = int(text or "")
    except ValueError:
        return None
    return value if value >= 0 else None


def _pci_devices(fs: Reader) -> dict[str, _Pci]:
    devices: dict[str, _Pci] = {}
    for bdf in fs.listdir("bus/pci/devices"):
        if not BDF.match(bdf):
            continue
        base = f"bus/pci/devices/{bdf}"
        real = fs.resolve(base) or ""
        chain = tuple(part for part in real.split("/") if BDF.match(part))
        devices[bdf] = _Pci(
            bdf=bdf,
            vendor=(fs.read(f"{base}/vendor") or "").lower(),
            device=(fs.read(f"{base}/device") or "").lower(),
            klass=(fs.read(f"{base}/class") or "").lower(),
            numa_node=_numa(fs.read(f"{base}/numa_node")),
            chain=chain or (bdf,),
            virtual_function=fs.exists(f"{base}/physfn"),
        )
        if devices[bdf].pci_id in VIRTUAL_FUNCTION_IDS and not devices[bdf].virtual_function:
            devices[bdf] = replace(devices[bdf], virtual_function=True)
    return devices


def _switch(device: _Pci) -> str | None:
    """The upstream port of the switch the device sits behind, None on a bare root port."""
    # chain: root port, [switch upstream, switch downstream, ...], device.
    return device.chain[1] if len(device.chain) >= 3 else None


def _below_root(device: _Pci) -> set[str]:
    return set(device.chain[1:-1])


def _rate(text: str | None) -> float | None:
    match = RATE.match(text or "")
    return float(match.group(1)) if match else None


def _state(text: str | None) -> str | None:
    # "4: ACTIVE" -> "ACTIVE"
    return text.partition(": ")[2] or text if text else None


def _guid(text: str | None) -> str | None:
    return "0x" + text.replace(":", "") if text else None


def _net_speed(fs: Reader, netdev: str) -> float | None:
    try:
        mbps = int(fs.read(f"class/net/{netdev}/speed") or "")
    except ValueError:
        return None
    return mbps / 1000 if mbps > 0 else None


def discover(fs: Reader, models: Mapping[str, str] | None = None) -> HardwareMap:
    """The GPUs and network ports under `fs`, in PCI order; `models` maps "15b3:1021" -> name."""
    names = models or {}
    pci = _pci_devices(fs)
    gpus = [d for d in pci.values() if d.vendor == NVIDIA and d.klass.startswith(GPU_CLASSES)]
    gpu_records = tuple(
        Gpu(d.bdf, d.pci_id, names.get(d.pci_id), d.numa_node, _switch(d)) for d in gpus
    )

    def placed(device: _Pci) -> dict[str, Any]:
        # What a port takes from its PCI function, whether or not it has an RDMA device.
        mine = _below_root(device)
        return {
            "bdf": device.bdf,
            "pci_id": device.pci_id,
            "model": names.get(device.pci_id),
            "virtual_function": device.virtual_function,
            "numa_node": device.numa_node,
            "switch": _switch(device),
            "gpus": tuple(g.bdf for g in gpus if mine & _below_root(g)),
        }

    ports: list[Port] = []
    seen_netdevs: set[str] = set()
    for rdma in fs.listdir("class/infiniband"):
        function = (fs.resolve(f"class/infiniband/{rdma}/device") or "").rpartition("/")[2]
        device = pci.get(function)
        if device is None:
            continue
        netdevs = fs.listdir(f"class/infiniband/{rdma}/device/net")
        seen_netdevs.update(netdevs)
        for number in fs.listdir(f"class/infiniband/{rdma}/ports"):
            base = f"class/infiniband/{rdma}/ports/{number}"
            link_layer = (fs.read(f"{base}/link_layer") or "").lower() or None
            ports.append(
                Port(
                    **placed(device),
                    rdma_device=rdma,
                    port=int(number) if number.isdigit() else 0,
                    link_layer=link_layer,
                    rate_gbps=_rate(fs.read(f"{base}/rate")),
                    state=_state(fs.read(f"{base}/state")),
                    # One netdev per port on mlx5 (each port is its own PCI function).
                    netdev=netdevs[0] if len(netdevs) == 1 else None,
                    guid=_guid(fs.read(f"class/infiniband/{rdma}/node_guid")),
                    firmware=fs.read(f"class/infiniband/{rdma}/fw_ver"),
                )
            )
    for netdev in fs.listdir("class/net"):
        if netdev in seen_netdevs:
            continue
        function = (fs.resolve(f"class/net/{netdev}/device") or "").rpartition("/")[2]
        device = pci.get(function)
        if device is None or not device.klass.startswith(NETWORK_CLASSES):
            continue
        ports.append(
            Port(
                **placed(device),
                rdma_device=None,
                port=1,
                link_layer="ethernet",
                rate_gbps=_net_speed(fs, netdev),
                state=None,
                netdev=netdev,
                guid=None,
                firmware=None,
            )
        )
    ports.sort(key=lambda p: (p.bdf, p.port))
    return HardwareMap(gpus=gpu_records, ports=tuple(ports))
