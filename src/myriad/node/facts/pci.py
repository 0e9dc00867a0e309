"""Link speed and width of the NVIDIA and Mellanox PCI functions (sysfs)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from myriad.node.facts.declare import Probe, fact, json_object
from myriad.node.facts.probe import as_json, at, attr, record
from myriad.node.parsers import ParseFailure

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record

# PCI vendors whose functions' links are read: NVIDIA GPUs / NVSwitches and Mellanox NICs.
PCI_VENDORS = ("0x10de", "0x15b3")
_GTS = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s")
# Transfer rate per lane → PCIe generation (PCI-SIG: 2.5, 5, 8, 16, 32, 64 GT/s).
_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_gen(speed_gts: float | None) -> int | None:
    return None if speed_gts is None else _GENERATIONS.get(speed_gts)


@dataclass(frozen=True, slots=True)
class PciFunction:
    address: str
    vendor: str
    device_class: str | None
    speed_gts: float | None
    width: int | None
    max_speed_gts: float | None
    max_width: int | None
    numa_node: int | None

    @property
    def gen(self) -> int | None:
        return pcie_gen(self.speed_gts)


def pci_links(root: str) -> Record:
    """Link speed and width of NVIDIA and Mellanox PCI functions (physical functions only)."""
    top = at(root, "/sys/bus/pci/devices")
    if not os.path.isdir(top):
        return record(None, stderr="/sys/bus/pci/devices does not exist", missing=True)
    functions: dict[str, dict[str, str | None]] = {}
    for address in sorted(os.listdir(top)):
        base = os.path.join(top, address)
        vendor = attr(os.path.join(base, "vendor"))
        if vendor not in PCI_VENDORS or os.path.exists(os.path.join(base, "physfn")):
            continue
        entry: dict[str, str | None] = {"vendor": vendor}
        for name in (
            "device",
            "class",
            "current_link_speed",
            "current_link_width",
            "max_link_speed",
            "max_link_width",
            "numa_node",
        ):
            entry[name] = attr(os.path.join(base, name))
        functions[address] = entry
    return as_json(functions)


def _gts(value: object) -> float | None:
    # sysfs writes "16.0 GT/s PCIe" (Linux 5.7+), "16 GT/s" before, "Unknown" for none.
    if not isinstance(value, str):
        return None
    match = _GTS.search(value)
    return float(match.group(1)) if match else None


def _small_int(value: object) -> int | None:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _pci(text: str) -> Mapping[str, PciFunction]:
    data = json_object("pci sysfs", text)
    functions = {}
    for address, entry in data.items():
        if not isinstance(entry, dict):
            raise ParseFailure("pci sysfs", f"{address}: not an object")
        functions[address] = PciFunction(
            address=address,
            vendor=str(entry.get("vendor")),
            device_class=entry.get("class") if isinstance(entry.get("class"), str) else None,
            speed_gts=_gts(entry.get("current_link_speed")),
            width=_small_int(entry.get("current_link_width")),
            max_speed_gts=_gts(entry.get("max_link_speed")),
            max_width=_small_int(entry.get("max_link_width")),
            numa_node=_small_int(entry.get("numa_node")),
        )
    return functions


PCI = fact("pci", Probe("pci", lambda o: pci_links(o.root)), "pci sysfs", _pci)
