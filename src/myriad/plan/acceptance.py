"""What acceptance tests should measure on a planned cluster, each figure with its source.

`myriad accept` compares what nccl-tests and perftest measure with these figures: a test
passes at or above `expected x (1 - margin)`. Every figure names what it rests on (the
catalog entry, the REFERENCE.md figure, the fabric's oversubscription) and the arithmetic,
so a report can show expected, measured, the ratio and why the expectation is what it is.

- **NVLink (one node):** `all_reduce_perf` inside one server: the catalog's measured 8-GPU
  busbw where the server is an 8-GPU NVSwitch board, else 80 % of one direction of NVLink
  (plan/bandwidth.py, `intra_node_busbw`).
- **RDMA per port:** `ib_write_bw` on one NIC port: 94 % of the port's line rate, or 85 % of
  its PCIe slot's share where the slot is narrower (plan/bandwidth.py, `rdma_gbs`).
- **all_reduce / all_gather across nodes (ring):** the node's NICs together, each at its
  RDMA figure, capped by the node's own NVLink ring (REFERENCE.md: "a multi-node job ≈ NICs
  per node x per-NIC figure, capped by the intra-node ring"). A ring crosses a leaf, spine
  or core boundary twice per channel whatever the group's size, so an oversubscribed tier
  does not lower it: the figure is the same within a leaf, across spines and across islands.
- **alltoall across nodes:** each rank sends through one NIC (NVIDIA's nccl-tests maintainers:
  "Alltoall cannot aggregate the bandwidth of multiple NICs", nccl-tests issue #267), so the
  network gives each rank one NIC's RDMA figure (less where GPUs share NICs); busbw is that
  x N/(N-1) on N nodes, since the share inside the node rides NVLink (nccl-tests issue
  #130). Across islands a share (k-1)/k of each rank's traffic leaves its island of k equal
  ones, and the core carries 1/r of what the nodes inject (r: inter-island
  oversubscription): the figure is scaled by min(1, (1/r) / ((k-1)/k)).

The margin: 0.10 is the spec's default (`accept.margin`, `spec/accept.py`): the figures above
already include the efficiencies real runs reach, operators gate at 0.90-0.95 of the expected
figure (REFERENCE.md), and `validate --perf` gates at 0.9 today, so 0.10 keeps one gate for
both while leaving run-to-run noise (a few percent at 8-16 GB messages) inside the margin.
"""

from __future__ import annotations

from dataclasses import dataclass

from myriad.plan.bandwidth import (
    BITS_PER_BYTE,
    BUSBW_LINK_EFFICIENCY,
    CATALOG_BUSBW_GPUS,
    RDMA_LINE_EFFICIENCY,
    RDMA_PCIE_EFFICIENCY,
    intra_node_busbw,
    nic_slot_gbs,
    rdma_gbs,
)
from myriad.plan.model import Fabric
from myriad.spec.accept import DEFAULT_MARGIN
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Profile

__all__ = [
    "DEFAULT_MARGIN",
    "Expected",
    "ProfileFigures",
    "alltoall_busbw",
    "profile_figures",
]


@dataclass(frozen=True, slots=True)
class Expected:
    """One expected figure in GB/s, the margin it is judged with, and where it comes from."""

    test: str
    gbs: float
    margin: float
    source: str
    derivation: str

    def __post_init__(self) -> None:
        if not 0 <= self.margin < 1:
            raise ValueError(f"margin {self.margin} is not a fraction in [0, 1)")

    @property
    def gate_gbs(self) -> float:
        return self.gbs * (1 - self.margin)

    @property
    def gbps(self) -> float:
        return self.gbs * BITS_PER_BYTE

    def ratio(self, measured_gbs: float) -> float:
        return measured_gbs / self.gbs if self.gbs else 0.0

    def passes(self, measured_gbs: float) -> bool:
        return measured_gbs >= self.gate_gbs


@dataclass(frozen=True, slots=True)
class ProfileFigures:
    """The figures of one compute profile. `nvlink` is None for a server of one GPU;
    `rdma_port` and the multi-node figures None for a server with no compute NIC."""

    profile: str
    gpus: int
    nic_ports: int
    nvlink: Expected | None
    rdma_port: Expected | None
    allreduce: Expected | None
    alltoall: Expected | None

    def multi_node(self, collective: str) -> Expected | None:
        """The figure of an nccl-tests collective over several nodes of one island."""
        if collective in ("all_reduce", "all_gather"):
            return self.allreduce
        if collective == "alltoall":
            return self.alltoall
        raise ValueError(f"no expected figure for collective {collective!r}")


def _nvlink(profile: Profile, catalog: Catalog, margin: float) -> Expected | None:
    busbw, limit = intra_node_busbw(profile, catalog)
    if busbw is None or profile.gpu is None:
        return None
    model = profile.gpu.model
    gpu = catalog.gpus[model]
    if limit == "nvlink" and busbw == gpu.allreduce_busbw_8gpu_gbs:
        source = f"catalog {model}: allreduce_busbw_8gpu_gbs ({gpu.source})"
        derivation = f"{busbw:g} GB/s as measured for {CATALOG_BUSBW_GPUS} GPUs"
    elif limit == "nvlink":
        source = f"catalog {model}: nvlink_gbs {gpu.nvlink_gbs:g}, both directions ({gpu.source})"
        derivation = f"{BUSBW_LINK_EFFICIENCY:g} x {gpu.nvlink_gbs:g} / 2 = {busbw:g} GB/s"
    else:
        source = f"catalog {model}: PCIe Gen{gpu.pcie_gen} x{gpu.pcie_lanes}, no NVLink ring"
        derivation = f"{BUSBW_LINK_EFFICIENCY:g} x the GPU's PCIe link = {busbw:g} GB/s"
    return Expected("nccl all_reduce, one node", busbw, margin, source, derivation)


def profile_figures(
    name: str, profile: Profile, catalog: Catalog, *, margin: float = DEFAULT_MARGIN
) -> ProfileFigures:
    """The expected figures of servers of `profile` (an entry of the spec's profiles)."""
    nvlink = _nvlink(profile, catalog, margin)
    gpus = profile.gpu.count if profile.gpu is not None else 0
    group = profile.nics.compute
    if group is None:
        return ProfileFigures(name, gpus, 0, nvlink, None, None, None)
    nic = catalog.nics[group.model]
    ports = group.count * nic.ports
    port_line = nic.speed_gbps / BITS_PER_BYTE
    # The slot is shared by the card's ports.
    slot_share = nic_slot_gbs(group, nic, profile) / nic.ports
    per_port = rdma_gbs(port_line, slot_share)
    if RDMA_PCIE_EFFICIENCY * slot_share < RDMA_LINE_EFFICIENCY * port_line:
        port_how = f"{RDMA_PCIE_EFFICIENCY:g} x PCIe slot share {slot_share:g} GB/s"
    else:
        port_how = f"{RDMA_LINE_EFFICIENCY:g} x {nic.speed_gbps} Gb/s / 8"
    rdma_port = Expected(
        "ib_write_bw, one port",
        per_port,
        margin,
        f"catalog {group.model}: {nic.speed_gbps} Gb/s per port, PCIe Gen{nic.pcie_gen}"
        f" x{nic.pcie_lanes} ({nic.source}); REFERENCE.md: RDMA per NIC ≈ 94 % of line rate",
        f"{port_how} = {per_port:g} GB/s ({per_port * BITS_PER_BYTE:g} Gb/s)",
    )
    nics_total = ports * per_port
    if nvlink is not None and nvlink.gbs < nics_total:
        allreduce_gbs = nvlink.gbs
        how = f"min({ports} x {per_port:g} = {nics_total:g}, NVLink ring {nvlink.gbs:g})"
    else:
        allreduce_gbs = nics_total
        how = f"{ports} ports x {per_port:g} = {nics_total:g}"
    allreduce = Expected(
        "nccl all_reduce/all_gather (ring), several nodes",
        allreduce_gbs,
        margin,
        "REFERENCE.md: a multi-node job ≈ NICs per node x per-NIC figure, capped by the "
        "intra-node ring; a ring is not slowed by oversubscribed tiers",
        f"{how} GB/s",
    )
    share = min(1.0, ports / gpus) if gpus else 1.0
    alltoall = Expected(
        "nccl alltoall, network share per rank",
        per_port * share,
        margin,
        "nccl-tests issue #267 (maintainer): alltoall cannot aggregate several NICs; one "
        "port's RDMA figure per rank",
        f"{per_port:g} x min(1, {ports} ports / {gpus} GPUs) = {per_port * share:g} GB/s",
    )
    return ProfileFigures(name, gpus, ports, nvlink, rdma_port, allreduce, alltoall)


def alltoall_busbw(
    figures: ProfileFigures, fabric: Fabric, nodes: int, islands_spanned: int = 1
) -> Expected:
    """alltoall busbw over `nodes` nodes spread evenly over `islands_spanned` islands.

    nccl-tests computes alltoall busbw as algbw x (n-1)/n; with NVLink inside the node only
    the inter-node share limits it, so busbw ≈ N/(N-1) x the network bandwidth per GPU for
    N nodes (NVIDIA's maintainer, nccl-tests issue #130): twice it on 2 nodes, towards
    once it on many.
    """
    base = figures.alltoall
    if base is None:
        raise ValueError(f"profile {figures.profile} has no compute NIC: no alltoall figure")
    if nodes < 2:
        raise ValueError("alltoall over the network needs at least two nodes")
    scale = nodes / (nodes - 1)
    how = f"{base.gbs:g} x {nodes}/{nodes - 1}"
    source = f"{base.source}; nccl-tests issue #130: busbw ≈ N/(N-1) x network per GPU"
    if islands_spanned > 1:
        r = fabric.inter_island_oversubscription
        leaving = (islands_spanned - 1) / islands_spanned
        core = min(1.0, (1 / r) / leaving)
        scale *= core
        how += f" x min(1, (1/{r:g}) / ({islands_spanned - 1}/{islands_spanned}))"
        source += f"; fabric: inter-island oversubscription {r:g}:1"
    gbs = base.gbs * scale
    where = f", {islands_spanned} islands" if islands_spanned > 1 else ""
    return Expected(
        f"nccl alltoall, {nodes} nodes{where}",
        gbs,
        base.margin,
        source,
        f"{how} = {gbs:g} GB/s",
    )
