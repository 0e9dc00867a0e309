"""RDMA fabric checks (InfiniBand and RoCE alike): the compute HCAs, their ports, and the
PCIe links of every RDMA NIC, read from sysfs (or ibstat where sysfs is hidden)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from myriad.validate.checks.model import (
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
    verdict,
)
from myriad.validate.facts import NodeFacts

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
