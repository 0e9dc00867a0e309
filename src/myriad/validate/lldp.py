"""LLDP neighbour expectations from the cabling plan, and a node's `lldpcli` neighbours
checked against them (RoCE and Ethernet fabrics, where LLDP says what each port reaches).

Each node-leaf cable of the plan says: this node's compute port (its interface name, from
`myriad.plan.ports`) reaches that leaf's port. Switches name their ports their own way, so
the comparison is given two translations: the LLDP system name of a planned switch
(`switch_name`, default: the planned name) and the name of a numbered port (`port_format`,
with `{port}` the port number and `{lane}` its first lane, (port - 1) x `lanes`: SONiC
calls the 24th port of an 8-lane switch Ethernet184, as "Ethernet{lane}" gives).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from myriad.node.parsers.lldpcli import LldpNeighbor
from myriad.plan.cabling import Cable
from myriad.plan.ports import ports
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster


@dataclass(frozen=True, slots=True)
class LldpExpectation:
    interface: str
    switch: str
    port: int
    cable: int


@dataclass(frozen=True, slots=True)
class LldpFinding:
    interface: str
    message: str
    fix: str


def lldp_expectations(
    spec: Cluster, catalog: Catalog, cables: Iterable[Cable]
) -> dict[str, list[LldpExpectation]]:
    """Per host, what LLDP should see on each compute interface."""
    interfaces: dict[str, dict[str, str]] = {}
    for pool in spec.pools_with_role("compute"):
        profile = spec.profiles[pool.profile]
        by_device = {
            p.device: p.interface for p in ports(profile, catalog, "compute", spec.network.fabric)
        }
        for number in range(1, pool.count + 1):
            interfaces[pool.hostname(number)] = by_device
    expected: dict[str, list[LldpExpectation]] = {}
    for cable in cables:
        if cable.tier != "node-leaf":
            continue
        interface = interfaces[cable.a_device].get(cable.a_hca, cable.a_hca)
        expected.setdefault(cable.a_device, []).append(
            LldpExpectation(interface, cable.b_device, cable.b_port, cable.cable)
        )
    return expected


def port_namer(port_format: str = "{port}", lanes: int = 8) -> Callable[[int], str]:
    return lambda port: port_format.format(port=port, lane=(port - 1) * lanes)


def compare_lldp(
    host: str,
    expected: Sequence[LldpExpectation],
    neighbors: Sequence[LldpNeighbor],
    *,
    switch_name: Mapping[str, str] | None = None,
    port_name: Callable[[int], str] = str,
) -> list[LldpFinding]:
    """Findings for `host`'s planned interfaces; interfaces the plan has no cable for
    (storage, management) are not judged."""
    seen = {n.interface: n for n in neighbors}
    names = switch_name or {}
    findings: list[LldpFinding] = []
    for want in expected:
        switch = names.get(want.switch, want.switch)
        port = port_name(want.port)
        planned = f"{switch} {port}"
        got = seen.get(want.interface)
        if got is None:
            findings.append(
                LldpFinding(
                    want.interface,
                    f"node {host} {want.interface} has no LLDP neighbour; plan says {planned}",
                    f"check the cable of {want.interface} and that lldpd runs on {host} and "
                    f"LLDP is on for {switch}",
                )
            )
            continue
        there = got.port_id if got.port_id_type != "mac" else got.port_descr
        if got.chassis_name == switch and port in (got.port_id, got.port_descr):
            continue
        findings.append(
            LldpFinding(
                want.interface,
                f"node {host} {want.interface} is in {got.chassis_name} {there}; plan says "
                f"{planned} (cable {want.cable})",
                f"move the cable from {got.chassis_name} {there} to {planned}",
            )
        )
    return findings
