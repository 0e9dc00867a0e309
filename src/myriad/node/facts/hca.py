"""The RDMA devices: port state and rate, each device's PCI function and netdevs, and the
first port's error counters, all from one read of /sys/class/infiniband (ibstat when sysfs
is hidden: state and rate only)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from myriad.node.facts.declare import Declared, Probe, Reading, command, json_object
from myriad.node.facts.fact import Fact, ok
from myriad.node.facts.probe import as_json, at, attr, record
from myriad.node.parsers import (
    IbReport,
    ParseFailure,
    parse_ibstat,
    parse_sysfs_counters,
    parse_sysfs_infiniband,
)

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record

# The IBTA PortCounters error counters Linux exposes under ports/N/counters/ (drivers/
# infiniband/core/sysfs.c); traffic counters are left out, they say nothing of health.
IB_ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)


@dataclass(frozen=True, slots=True)
class HcaLink:
    """An RDMA device's PCI function and the network interfaces on it (from sysfs)."""

    pci: str
    netdevs: tuple[str, ...]


def sysfs_infiniband(root: str, top: str | None = None) -> Record:
    """Port state, rate, link layer and error counters of every RDMA device, its PCI
    function and netdevs; `top` replaces /sys/class/infiniband (the node health runner's
    tests read a tree built from captures)."""
    top = top or at(root, "/sys/class/infiniband")
    if not os.path.isdir(top):
        return record(
            None, stderr="/sys/class/infiniband does not exist (no RDMA devices)", missing=True
        )
    files: dict[str, str] = {}
    devices: dict[str, dict[str, Any]] = {}
    for device in sorted(os.listdir(top)):
        base = os.path.join(top, device)
        for name in ("fw_ver", "hca_type", "board_id", "node_guid"):
            value = attr(os.path.join(base, name))
            if value is not None:
                files[f"{device}/{name}"] = value
        for port in sorted(glob.glob(os.path.join(base, "ports", "*"))):
            number = os.path.basename(port)
            for name in ("state", "phys_state", "rate", "link_layer"):
                value = attr(os.path.join(port, name))
                if value is not None:
                    files[f"{device}/ports/{number}/{name}"] = value
            for name in IB_ERROR_COUNTERS:
                value = attr(os.path.join(port, "counters", name))
                if value is not None:
                    files[f"{device}/ports/{number}/counters/{name}"] = value
        pci = os.path.realpath(os.path.join(base, "device"))
        netdevs = (
            sorted(os.listdir(os.path.join(base, "device", "net")))
            if os.path.isdir(os.path.join(base, "device", "net"))
            else []
        )
        devices[device] = {"pci": os.path.basename(pci), "netdevs": netdevs}
    return as_json({"files": files, "devices": devices})


SYSFS = Probe("sysfs_infiniband", lambda o: sysfs_infiniband(o.root, o.infiniband))
IBSTAT = command("ibstat", "ibstat")

_IbSysfs = tuple[IbReport, Mapping[str, HcaLink], Mapping[str, Mapping[str, int | None]]]


def _sysfs_ib(text: str) -> _IbSysfs:
    data = json_object("sysfs infiniband", text)
    files, devices = data.get("files"), data.get("devices")
    if not isinstance(files, dict) or not isinstance(devices, dict):
        raise ParseFailure("sysfs infiniband", "expected files and devices")
    links = {}
    for name, entry in devices.items():
        if not isinstance(entry, dict):
            raise ParseFailure("sysfs infiniband", f"{name}: not an object")
        netdevs = entry.get("netdevs") or []
        links[name] = HcaLink(pci=str(entry.get("pci")), netdevs=tuple(str(n) for n in netdevs))
    # A device directory with no readable files is still a device: the parser needs files.
    report = parse_sysfs_infiniband(files) if files else IbReport(devices=())
    # The first port's counters, as hca_ports holds the first port's state.
    parsed = parse_sysfs_counters(files) if files else {}
    counters = {
        device.name: parsed[device.name][device.ports[0].number]
        for device in report.devices
        if device.ports and device.ports[0].number in parsed.get(device.name, {})
    }
    return report, links, counters


def _sysfs(r: Reading) -> Fact[_IbSysfs]:
    return r.read(SYSFS.name, "sysfs infiniband", _sysfs_ib)


def _without_sysfs(r: Reading) -> Fact[Any]:
    # Without sysfs (never on Linux with RDMA devices, but a sandbox may hide it) the PCI
    # mapping and the counters are unknown, for the reason sysfs gave.
    sysfs = _sysfs(r)
    return Fact(sysfs.state, None, sysfs.detail)


def _hcas(r: Reading) -> Fact[IbReport]:
    sysfs = _sysfs(r)
    if sysfs.ok:
        return ok(sysfs.get()[0])
    # ibstat still tells state and rate where sysfs cannot be read.
    ibstat = r.read(IBSTAT.name, "ibstat", parse_ibstat)
    return ibstat if ibstat.ok else _without_sysfs(r)


def _part(index: int) -> Callable[[Reading], Fact[Any]]:
    def read(r: Reading) -> Fact[Any]:
        sysfs = _sysfs(r)
        return ok(sysfs.get()[index]) if sysfs.ok else _without_sysfs(r)

    return read


HCAS: Declared[Fact[IbReport]] = Declared("hcas", (SYSFS, IBSTAT), _hcas)
HCA_LINKS: Declared[Fact[Mapping[str, HcaLink]]] = Declared("hca_links", (SYSFS,), _part(1))
# Each RDMA device's first port's error counters (sysfs ports/N/counters/), counter ->
# value, None where the port has no PMA; a device without counter files is absent.
HCA_COUNTERS: Declared[Fact[Mapping[str, Mapping[str, int | None]]]] = Declared(
    "hca_counters", (SYSFS,), _part(2)
)
