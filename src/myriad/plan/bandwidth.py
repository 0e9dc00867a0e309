"""Expected bandwidth of one compute node: NIC line rate, PCIe slot, RDMA per NIC, busbw.

These are the figures the validation step gates on (`ib_write_bw`, `all_reduce_perf`), so
each rests on a public figure named next to its constant.
"""

from __future__ import annotations

from myriad.plan.model import NodeBandwidth
from myriad.spec.catalog_models import Catalog, GpuModel, NicModel
from myriad.spec.models import Cluster, NicGroup, Profile

# REFERENCE.md "Bandwidth": PCIe x16, one direction, 128b/130b encoding. Gen6 doubles Gen5
# (PCI-SIG PCIe 6.0: 64 GT/s, FLIT mode).
PCIE_X16_GBS: dict[int, float] = {3: 15.75, 4: 31.5, 5: 63.0, 6: 126.0}
PCIE_X16_LANES = 16
# REFERENCE.md: RDMA per NIC reaches ≈ 12 / 24 / 46-48 GB/s at 100 / 200 / 400 Gb/s, that is
# about 94 % of the 12.5 / 25 / 50 GB/s line rate.
RDMA_LINE_EFFICIENCY = 0.94
# REFERENCE.md: practical transfers through a PCIe link reach about 75-85 % of its figure;
# RDMA NICs sit at the top of that range.
RDMA_PCIE_EFFICIENCY = 0.85
# nccl-tests busbw of a ring over NVLink or PCIe lands near 80 % of the one-direction link
# figure (REFERENCE.md: A100 ≈ 230 of 300 GB/s, A800 ≈ 160 of 200 GB/s per direction).
BUSBW_LINK_EFFICIENCY = 0.8
# A catalog's measured all_reduce busbw is for one node of exactly this many NVSwitch GPUs.
CATALOG_BUSBW_GPUS = 8
BITS_PER_BYTE = 8


def pcie_slot_gbs(gen: int, lanes: int) -> float:
    """One-direction GB/s of a PCIe link of `lanes` lanes at generation `gen`."""
    return PCIE_X16_GBS[gen] * lanes / PCIE_X16_LANES


def nic_line_gbs(nic: NicModel) -> float:
    return nic.speed_gbps * nic.ports / BITS_PER_BYTE


def nic_slot_gbs(group: NicGroup, nic: NicModel, profile: Profile) -> float:
    """The slot runs at the lower generation and width of the slot and the card."""
    slot_gen = group.slot_gen or profile.pcie.gen
    return pcie_slot_gbs(min(slot_gen, nic.pcie_gen), min(group.slot_lanes, nic.pcie_lanes))


def rdma_gbs(line_gbs: float, slot_gbs: float) -> float:
    return min(RDMA_LINE_EFFICIENCY * line_gbs, RDMA_PCIE_EFFICIENCY * slot_gbs)


def gpu_pcie_gbs(gpu: GpuModel, profile: Profile) -> float:
    """A GPU's host link: its own generation, or the server's if that is older."""
    return pcie_slot_gbs(min(gpu.pcie_gen, profile.pcie.gen), min(gpu.pcie_lanes, PCIE_X16_LANES))


def has_nvlink_ring(gpu: GpuModel, profile: Profile, gpus: int) -> bool:
    """NVLink carries the node's ring when the GPUs are SXM/OAM or behind NVSwitch.

    PCIe cards with NVLink bridges are joined in pairs only, so a ring over more than two
    of them crosses PCIe.
    """
    if gpu.nvlink_gbs <= 0:
        return False
    return gpu.form_factor != "pcie" or profile.nvswitch > 0 or gpus == 2


def intra_node_busbw(profile: Profile, catalog: Catalog) -> tuple[float | None, str]:
    """all_reduce busbw inside one node and what limits it; None for fewer than two GPUs."""
    if profile.gpu is None or profile.gpu.count < 2:
        return None, ""
    gpu = catalog.gpus[profile.gpu.model]
    count = profile.gpu.count
    measured = gpu.allreduce_busbw_8gpu_gbs
    if count == CATALOG_BUSBW_GPUS and profile.nvswitch > 0 and measured is not None:
        return measured, "nvlink"
    if has_nvlink_ring(gpu, profile, count):
        # nvlink_gbs counts both directions; a ring moves data one way per link.
        return BUSBW_LINK_EFFICIENCY * gpu.nvlink_gbs / 2, "nvlink"
    return BUSBW_LINK_EFFICIENCY * gpu_pcie_gbs(gpu, profile), "pcie"


def node_bandwidth(name: str, profile: Profile, catalog: Catalog) -> NodeBandwidth:
    intra, intra_limit = intra_node_busbw(profile, catalog)
    group = profile.nics.compute
    if group is None:
        return NodeBandwidth(
            profile=name,
            nic_model=None,
            nic_line_gbs=0.0,
            pcie_slot_gbs=0.0,
            per_nic_rdma_gbs=0.0,
            intra_node_busbw_gbs=intra,
            inter_node_busbw_gbs=None,
            limited_by="nic",
        )
    nic = catalog.nics[group.model]
    line = nic_line_gbs(nic)
    slot = nic_slot_gbs(group, nic, profile)
    per_nic = rdma_gbs(line, slot)
    nics_total = group.count * per_nic
    limited_by = "pcie" if RDMA_PCIE_EFFICIENCY * slot < RDMA_LINE_EFFICIENCY * line else "nic"
    inter = nics_total
    if intra is not None and intra < nics_total:
        # REFERENCE.md: a multi-node job is capped by the intra-node ring.
        inter, limited_by = intra, intra_limit
    return NodeBandwidth(
        profile=name,
        nic_model=group.model,
        nic_line_gbs=line,
        pcie_slot_gbs=slot,
        per_nic_rdma_gbs=per_nic,
        intra_node_busbw_gbs=intra,
        inter_node_busbw_gbs=inter,
        limited_by=limited_by,
    )


def plan_bandwidth(spec: Cluster, catalog: Catalog) -> tuple[NodeBandwidth, ...]:
    """One row per profile used by a compute pool, in pool order."""
    names = dict.fromkeys(pool.profile for pool in spec.pools_with_role("compute"))
    return tuple(node_bandwidth(name, spec.profiles[name], catalog) for name in names)
