"""RDMA fabric checks (InfiniBand and RoCE alike): the compute HCAs, their ports, and the
PCIe links of every RDMA NIC, read from sysfs (or ibstat where sysfs is hidden)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from myriad.node.checks.model import (
    SHOWN,
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    each,
    listed,
    unavailable,
    unknown,
    verdict,
)
from myriad.node.facts import NodeFacts

LINK_FIX = "check the cable, transceiver and switch port; `ibstat` shows the port state"


def _hcas(c: Context) -> list[str] | Skip:
    """The compute HCAs' RDMA device names, or why the HCA checks do not apply."""
    if not c.compute_ports:
        return Skip(f"{c.p}.nics.compute", f"profile {c.pool.profile} has no compute NICs")
    if c.spec.network.fabric == "ethernet":
        return Skip("network.fabric", "fabric is ethernet: no RDMA")
    return [port.device for port in c.compute_ports]


def _port_reading(ports: Mapping[str, Any], name: str) -> tuple[Any, str | None]:
    """A device's first port, or why it cannot be judged: (port, None) / (None, problem)."""
    if name not in ports:
        return None, f"{name} missing"
    return ports[name], None


# --- hca.present -----------------------------------------------------------------------------


def _derive_present(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    return Expect(devices, f"{c.p}.nics.compute", bringup_fix("rdma", "load the HCA drivers"))


def _evaluate_present(
    expected: list[str], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.hcas.ok:
        return unavailable(facts.hcas)
    present = {device.name for device in facts.hcas.get().devices}
    missing = [f"{name} missing" for name in expected if name not in present]
    return verdict(missing, f"{len(expected)} present")


HCA_PRESENT = Check(
    id="hca.present",
    title="compute HCAs present",
    spec_fields=("profiles.*.nics.compute",),
    derive=_derive_present,
    evaluate=_evaluate_present,
    explain=lambda expected: listed(list(expected)),
)


# --- hca.state -------------------------------------------------------------------------------


def _derive_state(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    return Expect(devices, f"{c.p}.nics.compute", LINK_FIX)


def _evaluate_state(expected: list[str], facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.hca_ports.ok:
        return unavailable(facts.hca_ports)
    problems, unread = [], []
    ports = facts.hca_ports.get()
    for name in expected:
        port, problem = _port_reading(ports, name)
        if problem is not None:
            problems.append(problem)
        elif port is None:
            unread.append(f"{name} has no readable port")
        elif not (port.active and port.link_up):
            problems.append(f"{name} {port.state}/{port.phys_state}")
    return verdict(problems, f"{len(expected)} ACTIVE/LinkUp", unread)


HCA_STATE = Check(
    id="hca.state",
    title="HCA ports ACTIVE / LinkUp",
    spec_fields=("profiles.*.nics.compute",),
    derive=_derive_state,
    evaluate=_evaluate_state,
    explain=lambda expected: listed(list(expected)) + " ACTIVE/LinkUp",
)


# --- hca.rate, hca.link-layer: one port attribute on every HCA ---------------------------


def _port_attribute(
    attribute: str, unit: str, expected: dict[str, Any], facts: NodeFacts
) -> Outcome:
    if not facts.hca_ports.ok:
        return unavailable(facts.hca_ports)
    want = expected["value"]
    problems, unread = [], []
    ports = facts.hca_ports.get()
    for name in expected["names"]:
        port, problem = _port_reading(ports, name)
        value = None if port is None else getattr(port, attribute)
        if problem is not None:
            problems.append(problem)
        elif value is None or value == "":
            unread.append(f"{name} {attribute.replace('_', ' ')} not reported")
        else:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if value != want:
                problems.append(f"{name} {value}{unit}")
    return verdict(problems, f"{want}{unit} on {len(expected['names'])}", unread)


def _derive_rate(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    return Expect(
        each(devices, c.compute_ports[0].speed_gbps), f"{c.p}.nics.compute.model", LINK_FIX
    )


HCA_RATE = Check(
    id="hca.rate",
    title="HCA port rate",
    spec_fields=("profiles.*.nics.compute.model",),
    derive=_derive_rate,
    evaluate=lambda expected, facts, view, node: _port_attribute(
        "rate_gbps", " Gb/s", expected, facts
    ),
    explain=lambda expected: f"{expected['value']} Gb/s on {listed(expected['names'])}",
)


def _derive_link_layer(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    layer = "InfiniBand" if c.spec.network.fabric == "infiniband" else "Ethernet"
    return Expect(
        each(devices, layer),
        "network.fabric",
        "set the port's link type: mlxconfig -d <dev> set LINK_TYPE_P1=1 (IB) / 2 (ETH)",
    )


HCA_LINK_LAYER = Check(
    id="hca.link-layer",
    title="HCA link layer",
    spec_fields=("network.fabric",),
    derive=_derive_link_layer,
    evaluate=lambda expected, facts, view, node: _port_attribute("link_layer", "", expected, facts),
    explain=lambda expected: f"{expected['value']} on {listed(expected['names'])}",
)


# --- nic.pcie --------------------------------------------------------------------------------


def _nic_links(c: Context, purpose: str, ports: Sequence[Any]) -> list[list[Any]]:
    """[device, {gen, width}] for each RDMA port of a NIC group: the link its slot allows."""
    group = getattr(c.profile.nics, purpose)
    nic = c.catalog.nics[group.model]
    if not nic.rdma:
        return []
    gen = min(group.slot_gen or c.profile.pcie.gen, nic.pcie_gen)
    link = {"gen": gen, "width": min(group.slot_lanes, nic.pcie_lanes)}
    return [[port.device, link] for port in ports]


def _derive_nic_pcie(c: Context) -> Expect | Skip:
    links = []
    if c.compute_ports:
        links += _nic_links(c, "compute", c.compute_ports)
    if c.storage_ports:
        links += _nic_links(c, "storage", c.storage_ports)
    if not links:
        return Skip(f"{c.p}.nics", "no RDMA NICs to locate on the PCIe bus")
    if c.spec.provider.kind == "aws":
        return Skip("provider.kind", "cloud NICs are virtual functions, not slots")
    return Expect(
        links,
        f"{c.p}.nics.*.slot_gen, slot_lanes",
        "a NIC trained below its slot's link: reseat it, check the slot and BIOS",
    )


def _evaluate_nic_pcie(
    expected: list[list[Any]], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    for fact in (facts.hca_links, facts.pci):
        if not fact.ok:
            return unavailable(fact)
    links, functions = facts.hca_links.get(), facts.pci.get()
    problems, unread = [], []
    for device, want in expected:
        link = links.get(device)
        function = None if link is None else functions.get(link.pci)
        if function is None:
            problems.append(f"{device} not found on the PCIe bus")
        elif function.gen is None or function.width is None:
            unread.append(f"{device} link speed or width not reported")
        elif function.gen < want["gen"] or function.width < want["width"]:
            problems.append(f"{device} Gen{function.gen} x{function.width}")
    first = expected[0][1]
    return verdict(
        problems, f"{len(expected)} at Gen{first['gen']} x{first['width']} or better", unread
    )


def _explain_nic_pcie(expected: list[list[Any]]) -> str:
    shown = ", ".join(f"{d} Gen{link['gen']} x{link['width']}" for d, link in expected[:SHOWN])
    more = len(expected) - SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "")


NIC_PCIE = Check(
    id="nic.pcie",
    title="NIC PCIe link",
    spec_fields=("profiles.*.nics.*.slot_gen", "profiles.*.nics.*.slot_lanes"),
    derive=_derive_nic_pcie,
    evaluate=_evaluate_nic_pcie,
    explain=_explain_nic_pcie,
)


# --- hca.model, hca.firmware -----------------------------------------------------------------

# What a catalog NIC model reports about itself: the CA types of its physical and virtual
# functions, and the major number of its firmware. The CA type is "MT" and the PCI device
# id in decimal, as sysfs hca_type and ibstat print it (PCI ID Repository, vendor 15b3:
# 101b ConnectX-6, 101c its VF, 101d ConnectX-6 Dx, 101e "ConnectX Family mlx5Gen Virtual
# Function", 101f ConnectX-6 Lx, 1021 ConnectX-7, 1023 ConnectX-8, a2dc BlueField-3). The
# firmware major is the family's in NVIDIA's firmware release notes (ConnectX-6 20.x, -6 Dx
# 22.x, -6 Lx 26.x, -7 28.x, BlueField-3 32.x, ConnectX-8 40.x); it is what tells the
# models apart behind MT4126, the one VF id every family since ConnectX-6 Dx shares.
HCA_FAMILIES: dict[str, tuple[tuple[str, ...], int]] = {
    "ConnectX-6": (("MT4123", "MT4124"), 20),
    "ConnectX-6-Dx": (("MT4125", "MT4126"), 22),
    "ConnectX-6-Lx": (("MT4127", "MT4126"), 26),
    "ConnectX-7": (("MT4129", "MT4126"), 28),
    "BlueField-3": (("MT41692", "MT4126"), 32),
    "ConnectX-8": (("MT4131", "MT4126"), 40),
}
FIRMWARE_FIX = (
    "update the HCA firmware (mlxfwmanager --online -u, or flint with NVIDIA's image for "
    "the board's PSID), then mlxfwreset or reboot {node}"
)


def _ca_type(value: str | None) -> str | None:
    # ibv_devinfo prints the bare device id (vendor_part_id 4129), the others MT4129.
    if value is None or not value.isdigit():
        return value
    return f"MT{value}"


# A cluster runs a handful of firmware versions: each is read once, not once per HCA.
@lru_cache(maxsize=256)
def _firmware(value: str | None) -> tuple[int, ...] | None:
    """A firmware version (28.41.1000) as numbers; None where it is not one."""
    if value is None or not all(part.isdigit() and part.isascii() for part in value.split(".")):
        return None
    return tuple(int(part) for part in value.split("."))


def _no_version(device: Any) -> str:
    if device.firmware is None:
        return f"{device.name} firmware not reported"
    return f"{device.name} firmware {device.firmware!r} is not a version"


def _derive_model(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    # Compute ports exist (_hcas), so the profile has compute NICs.
    assert c.profile.nics.compute is not None
    model = c.profile.nics.compute.model
    field = f"{c.p}.nics.compute.model"
    if model not in HCA_FAMILIES:
        return Skip(field, f"{model} reports no CA type Myriad knows; hca.present checks it")
    ca_types, firmware = HCA_FAMILIES[model]
    return Expect(
        each(devices, {"model": model, "ca_types": list(ca_types), "firmware_major": firmware}),
        field,
        f"the node has other HCAs than the spec says: correct {field} or the pool",
    )


def _evaluate_model(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.hcas.ok:
        return unavailable(facts.hcas)
    want = expected["value"]
    ca_types, major = want["ca_types"], want["firmware_major"]
    devices = {device.name: device for device in facts.hcas.get().devices}
    problems, unread, seen = [], [], set()
    for name in expected["names"]:
        device = devices.get(name)
        if device is None:
            problems.append(f"{name} missing")
            continue
        ca_type, version = _ca_type(device.ca_type), _firmware(device.firmware)
        if ca_type is None or version is None:
            unread.append(
                f"{name} CA type not reported" if ca_type is None else _no_version(device)
            )
            continue
        seen.add((ca_type, device.firmware))
        if ca_type not in ca_types or version[0] != major:
            problems.append(f"{name} {ca_type} fw {device.firmware}")
    count = len(expected["names"])
    shown = listed([f"{ca_type} fw {firmware}" for ca_type, firmware in sorted(seen)])
    return verdict(problems, f"{want['model']} on {count} ({shown})", unread)


def _explain_model(expected: dict[str, Any]) -> str:
    want = expected["value"]
    return (
        f"{want['model']} ({'/'.join(want['ca_types'])}, fw {want['firmware_major']}.x) "
        f"on {listed(expected['names'])}"
    )


HCA_MODEL = Check(
    id="hca.model",
    title="HCA model (CA type and firmware family)",
    spec_fields=("profiles.*.nics.compute.model",),
    derive=_derive_model,
    evaluate=_evaluate_model,
    explain=_explain_model,
)


def _derive_firmware(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    minimum = str(c.variables.get("rdma_firmware_min_version") or "")
    if not minimum:
        return Skip(
            "rdma_firmware_min_version", "no minimum firmware set; hca.model shows the firmware"
        )
    return Expect(each(devices, minimum), "rdma_firmware_min_version", FIRMWARE_FIX)


def _evaluate_firmware(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    minimum = _firmware(expected["value"])
    if minimum is None:
        return unknown(f"rdma_firmware_min_version {expected['value']!r} is not a version")
    if not facts.hcas.ok:
        return unavailable(facts.hcas)
    devices = {device.name: device for device in facts.hcas.get().devices}
    old, unread, seen = [], [], set()
    for name in expected["names"]:
        device = devices.get(name)
        version = None if device is None else _firmware(device.firmware)
        if device is None:
            old.append(f"{name} missing")
        elif version is None:
            unread.append(_no_version(device))
        else:
            seen.add(str(device.firmware))
            # The rdma role's own test compares the same way (Ansible's `version` test).
            if version < minimum:
                old.append(f"{name} {device.firmware}")
    return verdict(old, listed(sorted(seen)), unread)


HCA_FIRMWARE = Check(
    id="hca.firmware",
    title="HCA firmware at least the minimum",
    spec_fields=("rdma_firmware_min_version",),
    derive=_derive_firmware,
    evaluate=_evaluate_firmware,
    explain=lambda expected: f"{expected['value']} or later on {listed(expected['names'])}",
)


# --- hca.errors ------------------------------------------------------------------------------

# The IBTA PortCounters error counters (sysfs ports/N/counters/) and the count above which
# each is a fault. A node reads them once, as totals since they were last cleared (driver
# load or `perfquery -R`), so the limits are on totals, not rates:
# - link_downed: the link failed error recovery and went down. Once is a flap an operator
#   must see (cable, transceiver, switch port), so any is a fail.
# - symbol_error, link_error_recovery, port_rcv_errors, local_link_integrity_errors,
#   excessive_buffer_overrun_errors: physical-layer errors. Link training and a reseat leave
#   a few; more than 10 is a link that keeps erring. (ibqueryerrors reports any count above
#   its threshold, 0 by default, across the fabric; a node check allows training's few.)
# - the rest count packets dropped for reasons mostly beyond this link (errors marked by a
#   remote port, switch relay, partition/VL15 drops, discards while the port was not yet
#   ACTIVE at boot): above 100, the port drops traffic it should carry.
IB_ERROR_LIMITS: dict[str, int] = {
    "link_downed": 0,
    "symbol_error": 10,
    "link_error_recovery": 10,
    "port_rcv_errors": 10,
    "local_link_integrity_errors": 10,
    "excessive_buffer_overrun_errors": 10,
    "port_rcv_remote_physical_errors": 100,
    "port_rcv_switch_relay_errors": 100,
    "port_xmit_discards": 100,
    "port_xmit_constraint_errors": 100,
    "port_rcv_constraint_errors": 100,
    "VL15_dropped": 100,
}
ERRORS_FIX = (
    "check the cable, transceiver and switch port of the named HCA (mlxlink -d <dev> shows "
    "the BER), then clear the counters (perfquery -R) and watch them"
)


def _derive_errors(c: Context) -> Expect | Skip:
    devices = _hcas(c)
    if isinstance(devices, Skip):
        return devices
    if c.spec.network.fabric != "infiniband":
        # RoCE and EFA ports keep these IB counters at zero or do not have them: their
        # errors are in the Ethernet counters (ethtool -S).
        return Skip("network.fabric", f"fabric is {c.spec.network.fabric}: no IB port counters")
    return Expect(each(devices, IB_ERROR_LIMITS), f"{c.p}.nics.compute", ERRORS_FIX)


def _evaluate_errors(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.hca_counters.ok:
        return unavailable(facts.hca_counters)
    limits: dict[str, int] = expected["value"]
    counters = facts.hca_counters.get()
    problems, unread, below = [], [], []
    for name in expected["names"]:
        port = counters.get(name)
        if port is None:
            unread.append(f"{name} no counters")
            continue
        absent = [counter for counter in limits if counter not in port]
        if absent:
            unread.append(f"{name} {', '.join(absent)} not reported")
        if any(port.get(counter, 0) is None for counter in limits):
            unread.append(f"{name} counters N/A (the port has no PMA)")
        for counter, limit in limits.items():
            value = port.get(counter)
            if value is None or value == 0:
                continue
            if value > limit:
                problems.append(f"{name} {counter} {value}")
            else:
                below.append(f"{name} {counter} {value}")
    good = f"within limits on {len(expected['names'])}"
    if below:
        good += f" ({listed(below)})"
    return verdict(problems, good, unread)


HCA_ERRORS = Check(
    id="hca.errors",
    title="HCA port error counters within limits",
    spec_fields=("profiles.*.nics.compute",),
    derive=_derive_errors,
    evaluate=_evaluate_errors,
    explain=lambda expected: (
        f"link_downed 0, physical errors <= 10, drops <= 100 on {listed(expected['names'])}"
    ),
)
