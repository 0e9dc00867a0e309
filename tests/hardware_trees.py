"""Hardware trees for discovery tests, built from published tables and captures (see SOURCES.md).

`Tree` writes sysfs as the kernel lays it out (a PCI device under its root port and switch
ports, `bus/pci/devices` links, `class/infiniband` and `class/net` links, an RDMA device's
`device` link and its function's `net/`), in the text form of `myriad.node.hardware.tree`.
The DGX H100 and HGX H200 trees in tests/samples/sysfs-tree are this module's output for the
tables below (a test checks that); the variants (a swapped card, a missing port, a
ConnectX-8 with a GPU behind the NIC's own switch) are edits of them made in the tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MELLANOX, NVIDIA = "0x15b3", "0x10de"
CX7, CX6, CX8, CX_VF = "0x1021", "0x101b", "0x1023", "0x101e"
H100, H200 = "0x2330", "0x2335"
IB_CLASS, ETH_CLASS, GPU_CLASS, BRIDGE_CLASS = "0x020700", "0x020000", "0x030200", "0x060400"


def bdf(bus: int, dev: int = 0, fn: int = 0) -> str:
    return f"0000:{bus:02x}:{dev:02x}.{fn}"


@dataclass
class Tree:
    comments: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # BDF -> its real path

    def pci(self, chain: list[str], vendor: str, device: str, klass: str, numa: int) -> str:
        """A PCI function at the end of `chain` (root port first); bridges on the way too."""
        root = f"devices/pci{chain[0][:4]}:{chain[0][5:7]}"
        path = root
        for i, part in enumerate(chain):
            path = f"{path}/{part}"
            self.where[part] = path
            self.links[f"bus/pci/devices/{part}"] = f"../../../{path}"
            if i < len(chain) - 1 and f"{path}/class" not in self.files:
                self._attrs(path, "0x8086" if i == 0 else "0x1000", "0xc030", BRIDGE_CLASS, numa)
        self._attrs(path, vendor, device, klass, numa)
        return path

    def _attrs(self, path: str, vendor: str, device: str, klass: str, numa: int) -> None:
        self.files.update(
            {
                f"{path}/vendor": vendor,
                f"{path}/device": device,
                f"{path}/class": klass,
                f"{path}/numa_node": str(numa),
            }
        )

    def rdma(
        self,
        function: str,
        name: str,
        *,
        layer: str,
        rate: str,
        state: str,
        guid: str,
        fw: str,
        netdev: str | None,
        speed_mbps: int | None = None,
    ) -> None:
        path = self.where[function]
        ib = f"{path}/infiniband/{name}"
        self.links[f"class/infiniband/{name}"] = f"../../{ib}"
        self.links[f"{ib}/device"] = f"../../../{function}"
        self.files.update(
            {
                f"{ib}/fw_ver": fw,
                f"{ib}/node_guid": guid,
                f"{ib}/ports/1/link_layer": layer,
                f"{ib}/ports/1/rate": rate,
                f"{ib}/ports/1/state": state,
            }
        )
        if netdev is not None:
            self.net(function, netdev, speed_mbps)

    def net(self, function: str, netdev: str, speed_mbps: int | None) -> None:
        net = f"{self.where[function]}/net/{netdev}"
        self.links[f"class/net/{netdev}"] = f"../../{net}"
        self.links[f"{net}/device"] = f"../../../{function}"
        if speed_mbps is not None:
            self.files[f"{net}/speed"] = str(speed_mbps)
        else:
            self.files[f"{net}/address"] = "00:00:00:00:00:00"

    def text(self) -> str:
        lines = [f"# {c}" for c in self.comments]
        entries = [(p, f"link {p} {t}") for p, t in self.links.items()]
        entries += [(p, f"file {p} {json.dumps(v)}") for p, v in self.files.items()]
        return "\n".join(lines + [line for _, line in sorted(entries)]) + "\n"


# NVIDIA DGX H100/H200 User Guide, "Network Modules", Table 6: OSFP port, ConnectX device,
# network module/CPU, GPU, default netdev, RDMA device. The netdev names carry the PCI bus
# (ibp24s0: bus 24 = 0x18). The same eight buses (18 40 4f 5e 9a c0 ce dc) are the compute
# HCAs of the DGX BasePOD deployment guide ("Compute network / IB interfaces").
DGX_H100_TABLE6 = [
    # (GPU, CPU, netdev, RDMA device)
    (0, 0, "ibp24s0", "mlx5_0"),
    (1, 0, "ibp64s0", "mlx5_3"),
    (2, 0, "ibp79s0", "mlx5_4"),
    (3, 0, "ibp94s0", "mlx5_5"),
    (4, 1, "ibp154s0", "mlx5_6"),
    (5, 1, "ibp192s0", "mlx5_9"),
    (6, 1, "ibp206s0", "mlx5_10"),
    (7, 1, "ibp220s0", "mlx5_11"),
]
# Storage / in-band: the two dual-port ConnectX-7 cards in slots 1 and 2 (mlx5_1, 2 and
# mlx5_7, 8 in Table 6's numbering). Their buses are not in the guide: 0x29 and 0xaa are
# chosen so that the kernel's PCI-order enumeration gives exactly Table 6's names.
DGX_H100_STORAGE = [(0x29, 0, "mlx5_1", "mlx5_2"), (0xAA, 1, "mlx5_7", "mlx5_8")]
FIRMWARE = "28.41.1000"  # ConnectX-7 firmware of the H100 node in tests/samples/ibstat


def dgx_h100() -> Tree:
    tree = Tree(
        comments=[
            "DGX H100, built from NVIDIA's DGX H100/H200 User Guide, Network Modules, Table 6",
            "(not a capture: see tests/samples/SOURCES.md for what is published and what is not)",
        ]
    )
    for _gpu, cpu, netdev, rdma in DGX_H100_TABLE6:
        nic_bus = int(netdev.removeprefix("ibp").removesuffix("s0"))
        # One PCIe switch per GPU/NIC pair: root port at bus-3, upstream port, two
        # downstream ports; the GPU 3 buses after its NIC (placeholder numbers).
        root, up, down = bdf(nic_bus - 3, 1), bdf(nic_bus - 2), bdf(nic_bus - 1)
        tree.pci([root, up, down, bdf(nic_bus)], MELLANOX, CX7, IB_CLASS, cpu)
        tree.pci([root, up, bdf(nic_bus - 1, 1), bdf(nic_bus + 3)], NVIDIA, H100, GPU_CLASS, cpu)
        tree.rdma(
            bdf(nic_bus),
            rdma,
            layer="InfiniBand",
            rate="400 Gb/sec (4X NDR)",
            state="4: ACTIVE",
            guid=f"a088:c203:00dd:{nic_bus:02x}00",
            fw=FIRMWARE,
            netdev=netdev,
            speed_mbps=None,
        )
    for bus, cpu, first, second in DGX_H100_STORAGE:
        root = bdf(bus - 1, 1)
        for fn, rdma in enumerate((first, second)):
            tree.pci([root, bdf(bus, 0, fn)], MELLANOX, CX7, ETH_CLASS, cpu)
            tree.rdma(
                bdf(bus, 0, fn),
                rdma,
                layer="Ethernet",
                rate="400 Gb/sec (4X NDR)",
                state="4: ACTIVE",
                guid=f"a088:c203:00ee:{bus:02x}0{fn}",
                fw=FIRMWARE,
                netdev=f"enp{bus}s0f{fn}np{fn}",
                speed_mbps=400000,
            )
    return tree


def hgx_h200_vastai() -> Tree:
    """The PCI tree of a rented HGX H200 (a VM with passthrough), from `lspci -tv` there.

    openfabric-systems/simllm, tests/fixtures/nccl_topology/vastai_hgx_h200_8x/
    node_inventory.txt: QEMU root ports 80, 88, ... b8:00.0; behind each a switch (upstream
    81:00.0, downstream 82:00.0 and 82:01.0), the GPU (10de:2335) at 83:00.0 and a ConnectX
    virtual function (15b3:101e) at 84:00.0; `nvidia-smi topo -m` names them mlx5_0..7, NIC i
    PIX to GPU i; GPUs 0-3 on NUMA node 0, 4-7 on 1. Not in the capture (so not here): HCA
    firmware, GUIDs, port state and rate (the container had no RDMA stack).
    """
    tree = Tree(
        comments=[
            "HGX H200 (vast.ai VM), PCI tree from lspci -tv in openfabric-systems/simllm",
            "tests/fixtures/nccl_topology/vastai_hgx_h200_8x/node_inventory.txt @ ba7a58db6a81",
        ]
    )
    for i in range(8):
        base = 0x80 + 8 * i
        root, up = bdf(base), bdf(base + 1)
        numa = 0 if i < 4 else 1
        tree.pci([root, up, bdf(base + 2), bdf(base + 3)], NVIDIA, H200, GPU_CLASS, numa)
        tree.pci([root, up, bdf(base + 2, 1), bdf(base + 4)], MELLANOX, CX_VF, ETH_CLASS, numa)
        ib = f"{tree.where[bdf(base + 4)]}/infiniband/mlx5_{i}"
        tree.links[f"class/infiniband/mlx5_{i}"] = f"../../{ib}"
        tree.links[f"{ib}/device"] = f"../../../{bdf(base + 4)}"
        tree.files[f"{ib}/ports/1/link_layer"] = "InfiniBand"
    return tree


def renamed_by_rdma_core(tree: Tree) -> Tree:
    """The tree after a reboot with rdma-core's NAME_FALLBACK rule: mlx5_0 is ibp24s0f0, ..."""
    for path in [p for p in tree.links if p.startswith("class/infiniband/")]:
        target = tree.links.pop(path)
        device = target.rsplit("/", 1)[1]
        pci = target.split("/")[-3]
        new = f"ibp{int(pci[5:7], 16)}s0f{pci[-1]}"
        tree.links[f"class/infiniband/{new}"] = target.replace(device, new)
        for key in [k for k in tree.files if f"/infiniband/{device}/" in k]:
            tree.files[key.replace(f"/{device}/", f"/{new}/")] = tree.files.pop(key)
        for key in [k for k in tree.links if f"/infiniband/{device}/" in k]:
            tree.links[key.replace(f"/{device}/", f"/{new}/")] = tree.links.pop(key)
    return tree
