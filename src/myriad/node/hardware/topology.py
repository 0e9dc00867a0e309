"""NCCL's topology from the node's hardware map, in the shape of the nccl role's nccl_topology.

NCCL_TOPO_FILE describes CPUs (NUMA nodes), the PCIe switches under them and the GPUs and
NICs under those (NCCL's xml.cc reads `<cpu numaid>`, `<pci busid>`, `<gpu dev sm>`,
`<nic><net name port speed guid>`). Built from what discovery found, not from the spec:
the busids are this node's. GPUs count in PCI order (CUDA's PCI_BUS_ID order); only the
compute ports NCCL is given (the assignment's) are listed. What sysfs does not say (the
GPU's compute capability, the PCIe generation) comes from the expectation (the catalog).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from myriad.node.hardware.discover import HardwareMap
from myriad.node.hardware.profile import Assigned


def nccl_topology(
    hw: HardwareMap, compute: Sequence[Assigned], expected: Mapping[str, Any]
) -> dict[str, Any]:
    cpus: dict[int, dict[str, Any]] = {}
    switches: dict[str, dict[str, Any]] = {}

    def segment(switch: str | None, numa: int | None) -> dict[str, Any]:
        cpu = cpus.setdefault(numa or 0, {"numa_id": numa or 0, "pcie_switches": []})
        if switch is None:
            return cpu
        if switch not in switches:
            switches[switch] = {"busid": switch, "gpus": [], "nics": []}
            cpu["pcie_switches"].append(switches[switch])
        return switches[switch]

    sm = expected.get("sm")
    for dev, gpu in enumerate(hw.gpus):
        entry: dict[str, Any] = {"busid": gpu.bdf, "dev": dev}
        if isinstance(sm, int):
            entry["sm"] = sm
        segment(gpu.switch, gpu.numa_node).setdefault("gpus", []).append(entry)
    ports = {(p.bdf, p.port): p for p in hw.ports}
    for rail in compute:
        port = ports.get((rail.bdf, rail.port))
        if port is None or rail.rdma_device is None:
            continue
        nic: dict[str, Any] = {"busid": port.bdf, "name": rail.rdma_device, "port": port.port}
        if port.rate_gbps:
            nic["speed"] = int(port.rate_gbps * 1000)  # Mb/s, as NCCL's <net speed>
        if port.guid:
            nic["guid"] = port.guid
        segment(port.switch, port.numa_node).setdefault("nics", []).append(nic)
    topology: dict[str, Any] = {"cpus": [cpus[k] for k in sorted(cpus)]}
    if isinstance(expected.get("pcie_gen"), int):
        topology["pcie_gen"] = expected["pcie_gen"]
    return topology
