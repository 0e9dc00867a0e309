"""The node's hardware map against the spec's profile: which port is which, or what is wrong.

The expectation comes from the controller (`myriad.plan.ports.hardware_expectation`), as JSON:

    {"where": "profiles.dgx-h100.nics", "gpus": 8,
     "compute": {"model": "ConnectX-7", "count": 8, "speed_gbps": 400, "devices": [...]},
     "storage": {"model": "ConnectX-7", "count": 2, "speed_gbps": 400, "devices": [...]},
     "models": {"15b3:1021": "ConnectX-7", ...}}

A compute port is a port of the compute NIC model that shares a PCIe switch with a GPU; rail
i is the one beside GPU i (GPUs in PCI order, as nvidia-smi and CUDA's PCI_BUS_ID order
count them). A storage port is a port of the storage model that shares no switch with a GPU.
`devices` (the spec's, or the vendor's published map) must then name the same RDMA devices
in the same order. Every difference is one problem naming the port and the fix; a caller
stops before any firmware or naming change when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from myriad.node.hardware.discover import HardwareMap, Port


@dataclass(frozen=True, slots=True)
class Assigned:
    purpose: str
    index: int
    rdma_device: str | None
    port: int
    bdf: str
    netdev: str | None
    gpu: str | None


@dataclass(frozen=True, slots=True)
class Assignment:
    compute: tuple[Assigned, ...]
    storage: tuple[Assigned, ...]
    problems: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "compute": [asdict(a) for a in self.compute],
            "storage": [asdict(a) for a in self.storage],
            "problems": list(self.problems),
        }


def _name(port: Port) -> str:
    device = port.rdma_device or port.netdev or "?"
    return f"{device} (PCI {port.bdf}, {port.model or port.pci_id})"


def _gpu_rank(hw: HardwareMap, port: Port) -> int:
    order = [g.bdf for g in hw.gpus]
    return min((order.index(g) for g in port.gpus if g in order), default=len(order))


def _speed_problem(port: Port, speed: float | None, label: str) -> list[str]:
    if speed is None or port.rate_gbps is None or port.state != "ACTIVE":
        return []
    if port.rate_gbps == speed:
        return []
    return [
        f"{label}: {_name(port)} is up at {port.rate_gbps:g} Gb/s, not {speed:g}: check the "
        "cable and the switch port's speed, or the spec's NIC model"
    ]


def _devices_problems(
    purpose: str, found: Sequence[Port], wanted: Sequence[str], hw: HardwareMap, where: str
) -> list[str]:
    problems: list[str] = []
    by_device = {p.rdma_device: p for p in hw.ports if p.rdma_device}
    discovered = [p.rdma_device or "?" for p in found]
    for i, device in enumerate(wanted):
        actual = found[i] if i < len(found) else None
        if actual is not None and actual.rdma_device == device:
            continue
        elsewhere = by_device.get(device)
        if elsewhere is None:
            there = "the node has no such RDMA device"
        elif elsewhere.gpus and purpose == "storage":
            there = (
                f"{device} is at PCI {elsewhere.bdf}, beside GPU {elsewhere.gpus[0]} "
                "(a compute port)"
            )
        elif not elsewhere.gpus and purpose == "compute":
            there = f"{device} is at PCI {elsewhere.bdf}, which shares no PCIe switch with a GPU"
        else:
            there = f"{device} is at PCI {elsewhere.bdf}"
        beside = (
            f"the {purpose} port {i} found is {_name(actual)}"
            + (f" beside GPU {actual.gpus[0]}" if actual.gpus else "")
            if actual is not None
            else f"the node has only {len(found)} {purpose} ports"
        )
        problems.append(
            f"{where}.{purpose}.devices[{i}] names {device}, but {beside}; {there}. Fix: set "
            f"{where}.{purpose}.devices to {discovered} (what this node has), or remove it "
            "to use the discovered map"
        )
    return problems


def assign(hw: HardwareMap, expected: Mapping[str, Any]) -> Assignment:
    where = str(expected.get("where", "nics"))
    problems: list[str] = []
    physical = [p for p in hw.ports if not p.virtual_function] or list(hw.ports)

    compute: list[Port] = []
    want = expected.get("compute")
    if want:
        model, count = want.get("model"), int(want.get("count", 0))
        if not want.get("beside_gpu", True):
            # No PCIe switches in the profile: the compute ports are the model's first ones
            # in PCI order, and the model's others are left for storage.
            compute = [p for p in physical if p.model == model][:count]
            physical = [p for p in physical if p not in compute]
        beside_gpu = sorted(
            (p for p in physical if p.gpus and want.get("beside_gpu", True)),
            key=lambda p: (_gpu_rank(hw, p), p.bdf, p.port),
        )
        for port in beside_gpu:
            if port.model != model and not (port.virtual_function and port.model is None):
                problems.append(
                    f"{where}.compute: {_name(port)} shares a PCIe switch with GPU "
                    f"{port.gpus[0]} but is not a {model}: put a {model} in that slot, or set "
                    f"{where}.compute.model to the card the node has"
                )
            else:
                compute.append(port)
        if len(compute) != count:
            beside = bool(want.get("beside_gpu", True))
            covered = {g for p in compute for g in p.gpus}
            lonely = [g.bdf for g in hw.gpus if g.bdf not in covered] if beside else []
            lacking = f"; GPUs with no {model} beside them: {', '.join(lonely)}" if lonely else ""
            sharing = " sharing a PCIe switch with a GPU" if beside else ""
            problems.append(
                f"{where}.compute: the profile has {count} compute ports ({model}), the node "
                f"has {len(compute)}{sharing}{lacking}. Fix: seat or "
                f"replace the card in the slot beside each such GPU (lspci -s <slot>), or "
                f"correct {where}.compute.count"
            )
        for port in compute:
            problems += _speed_problem(port, want.get("speed_gbps"), f"{where}.compute")
        problems += _devices_problems("compute", compute, want.get("devices") or (), hw, where)

    storage: list[Port] = []
    compute_beside = bool((expected.get("compute") or {}).get("beside_gpu", True))
    want = expected.get("storage")
    if want:
        model, count = want.get("model"), int(want.get("count", 0))
        storage = [p for p in physical if p not in compute and not (p.gpus and compute_beside)]
        storage = [p for p in storage if p.model == model]
        if len(storage) < count:
            problems.append(
                f"{where}.storage: the profile has {count} storage ports ({model}), the node "
                f"has {len(storage)} that share no PCIe switch with a GPU "
                f"({', '.join(_name(p) for p in storage) or 'none'}). Fix: seat the storage "
                f"card, or correct {where}.storage"
            )
        storage = storage[:count] if count else storage
        for port in storage:
            problems += _speed_problem(port, want.get("speed_gbps"), f"{where}.storage")
        problems += _devices_problems("storage", storage, want.get("devices") or (), hw, where)

    return Assignment(
        compute=tuple(
            Assigned("compute", i, p.rdma_device, p.port, p.bdf, p.netdev, (p.gpus or (None,))[0])
            for i, p in enumerate(compute)
        ),
        storage=tuple(
            Assigned("storage", i, p.rdma_device, p.port, p.bdf, p.netdev, None)
            for i, p in enumerate(storage)
        ),
        problems=tuple(problems),
    )
