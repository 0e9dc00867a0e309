"""Typed entries of the hardware catalog: the datasheet figures the planner and lints use.

Every entry names where its figures come from (`source`), so a reviewer can check a
number before trusting a plan built on it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    model_validator,
)


def whole_number(value: object) -> object:
    """A float never stands for a choice among whole numbers: pydantic would take 5.0 as 5."""
    if isinstance(value, float):
        shown = f"write {int(value)}" if value.is_integer() else "use a whole number"
        raise ValueError(f"expected a whole number, got number {value!r}; {shown}")
    return value


Whole = BeforeValidator(whole_number)
PcieGen = Annotated[Literal[3, 4, 5, 6], Whole]
LinkLayer = Literal["infiniband", "ethernet"]
# "vendor:device" as lspci -n and sysfs print them (lower-case hex): 15b3:1021.
PciId = Annotated[str, Field(pattern=r"^[0-9a-f]{4}:[0-9a-f]{4}$")]
PCI_IDS_DESCRIPTION = (
    "PCI vendor:device ids this model reports (lspci -n), which is how discovery on a node "
    "names what it finds; the PCI ID Repository (pci.ids) lists them"
)


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    source: str = Field(min_length=3, description="Datasheet or document the figures come from")


class GpuModel(_Entry):
    vendor: Literal["nvidia", "amd", "intel"] = Field(
        default="nvidia", description="The GPU's maker"
    )
    form_factor: Literal["sxm", "oam", "pcie"] = Field(
        description="sxm or oam: a module on the board, joined by NVLink or its like; pcie: a "
        "card, joined in pairs by a bridge at most, else over PCIe"
    )
    memory_gb: PositiveInt = Field(description="Memory as marketed (80 for an 80 GB part)")
    board_power_w: PositiveInt = Field(
        description="Maximum board power (TDP), W; the power estimate of a server without a "
        "figure of its own"
    )
    bf16_dense_tflops: PositiveFloat = Field(
        description="Dense BF16 tensor throughput (no sparsity), TFLOPS"
    )
    fp8_dense_tflops: PositiveFloat | None = Field(
        default=None, description="Dense FP8 tensor throughput, TFLOPS; none: no FP8"
    )
    fp4_dense_tflops: PositiveFloat | None = Field(
        default=None, description="Dense FP4 tensor throughput, TFLOPS; none: no FP4"
    )
    nvlink_gbs: float = Field(
        ge=0, description="NVLink bandwidth per GPU, both directions together, GB/s"
    )
    nvlink_links: int = Field(ge=0, description="NVLink links per GPU (what nvidia-smi lists)")
    pcie_gen: PcieGen = Field(description="PCIe generation of the GPU's host link")
    pcie_lanes: PositiveInt = Field(default=16, description="PCIe lanes of the GPU's host link")
    allreduce_busbw_8gpu_gbs: PositiveFloat | None = Field(
        default=None,
        description="nccl-tests all_reduce busbw of one 8-GPU node at large messages, GB/s",
    )
    pci_ids: tuple[PciId, ...] = Field(default=(), description=PCI_IDS_DESCRIPTION)
    compute_capability: int | None = Field(
        default=None,
        ge=10,
        le=200,
        description="CUDA compute capability times ten (90 for 9.0), as NCCL's topology says sm",
    )


class NicModel(_Entry):
    speed_gbps: PositiveInt = Field(le=100_000, description="Line rate per port, Gb/s")
    ports: PositiveInt = Field(default=1, le=16, description="Network ports per card")
    pcie_gen: PcieGen = Field(description="PCIe generation of the card")
    pcie_lanes: PositiveInt = Field(default=16, description="PCIe lanes of the card")
    link_layers: tuple[LinkLayer, ...] = Field(
        min_length=1, description="Link layers the ports speak: infiniband, ethernet or both (VPI)"
    )
    rdma: bool = Field(default=True, description="Whether the card does RDMA (RoCE or InfiniBand)")
    power_w: PositiveFloat = Field(default=25.0, description="Typical power of one card, W")
    pci_ids: tuple[PciId, ...] = Field(default=(), description=PCI_IDS_DESCRIPTION)


class SwitchModel(_Entry):
    kind: LinkLayer = Field(description="infiniband or ethernet: the fabrics it can build")
    # 4096 ports is past any switch built; fewer than 2 cannot be linked in tiers.
    ports: int = Field(ge=2, le=4096, description="Ports at port_speed_gbps (after any splitting)")
    port_speed_gbps: PositiveInt = Field(description="Line rate per port, Gb/s")
    power_w: PositiveFloat = Field(description="Typical power with optics, W")
    rack_units: PositiveInt = Field(default=1, le=60, description="Height, rack units")
    ports_per_cage: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Ports sharing one transceiver cage (2: twin-port OSFP such as QM9700)",
    )


CableKind = Literal["dac", "acc", "optics"]
CableEnds = Literal["switch-switch", "switch-host"]


class CableModel(_Entry):
    """A cable family of the compute fabric: passive copper, active copper, or optics (a
    fibre with a transceiver at each end), and the lengths or reach it comes in."""

    kind: CableKind = Field(
        description="dac: passive copper; acc: active copper; optics: a fibre and two "
        "transceivers. The planner prefers them in that order, cheapest first"
    )
    speed_gbps: Annotated[Literal[200, 400, 800], Whole] = Field(
        description="Line rate of each port the cable serves, Gb/s (400 for a twin-port "
        "2x400G OSFP cable)"
    )
    part: str = Field(
        min_length=1,
        description="Part number family as the vendor prints it (MCP4Y10-Nxxx); for optics "
        "the transceiver at each end",
    )
    ends: CableEnds | None = Field(
        default=None,
        description="switch-switch: between switches only; switch-host: switch to network "
        "cards; none: either",
    )
    lengths_mm: tuple[PositiveInt, ...] = Field(
        default=(),
        description="Lengths it is sold in, mm, ascending; copper needs them, optics may "
        "give max_reach_mm alone",
    )
    max_reach_mm: PositiveInt | None = Field(
        default=None,
        description="Longest link the optics carry, mm, patch panels included; none: the "
        "longest of lengths_mm",
    )

    @model_validator(mode="after")
    def _lengths_fit(self) -> CableModel:
        if list(self.lengths_mm) != sorted(set(self.lengths_mm)):
            raise ValueError("lengths_mm must be ascending with no length twice")
        if self.kind != "optics" and self.max_reach_mm is not None:
            raise ValueError("copper reaches its longest length: give lengths_mm only")
        if not self.lengths_mm and self.max_reach_mm is None:
            raise ValueError("give lengths_mm (or, for optics, max_reach_mm)")
        if self.lengths_mm and self.max_reach_mm and self.lengths_mm[-1] > self.max_reach_mm:
            raise ValueError("a sold length cannot exceed max_reach_mm")
        return self

    @property
    def reach_mm(self) -> int:
        """The longest run this family covers."""
        return self.max_reach_mm or self.lengths_mm[-1]


class ServerCpu(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    sockets: PositiveInt = Field(description="CPU sockets")
    cores_per_socket: PositiveInt = Field(description="Physical cores per socket")


class ServerNics(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    model: str = Field(description="A NIC of the catalog")
    count: PositiveInt = Field(description="Cards of this model")


RdmaName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]


class PortMap(BaseModel):
    """The RDMA device of each port as the server's vendor publishes it, in rail order."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    compute: tuple[RdmaName, ...] = Field(
        min_length=1, description="Compute RDMA devices in GPU order: rail i is beside GPU i"
    )
    storage: tuple[RdmaName, ...] = Field(
        default=(), description="Storage / in-band RDMA devices, in the vendor's order"
    )
    source: str = Field(min_length=3, description="The vendor's table these names come from")


class ServerLayout(_Entry):
    gpu_model: str = Field(description="The GPU of the catalog this server carries")
    gpu_count: PositiveInt = Field(le=72, description="GPUs in the server")
    cpu: ServerCpu = Field(description="The server's CPU sockets and cores")
    memory_gib: PositiveInt = Field(description="Host memory as shipped, GiB")
    pcie_gen: PcieGen = Field(description="PCIe generation of the server's slots")
    pcie_switches: int = Field(ge=0, description="PCIe switches between CPUs and devices")
    nvswitch: int = Field(ge=0, description="NVSwitch chips (0: none)")
    compute_nics: ServerNics = Field(description="The NICs meant for the compute fabric")
    max_power_kw: PositiveFloat = Field(
        description="Maximum system power, kW: what a profile naming this layout counts "
        "unless it gives power_kw"
    )
    rack_units: PositiveInt = Field(description="Height, rack units")
    port_map: PortMap | None = Field(
        default=None,
        description="The vendor's published RDMA device names by purpose; none: discovered",
    )
    rack_system: str | None = Field(
        default=None,
        description="The rack-scale system (a key of racks) this server is a compute tray of: "
        "its trays come and go by whole racks, one NVLink domain each; none: a server alone",
    )


class RackSystem(_Entry):
    """A rack sold as one machine (GB200 NVL72): compute trays joined by NVLink switch trays
    into one NVLink domain, powered and cooled as a whole."""

    compute_trays: PositiveInt = Field(le=72, description="Compute trays (one OS each)")
    switch_trays: int = Field(ge=0, le=72, description="NVLink switch trays")
    gpus: PositiveInt = Field(le=576, description="GPUs in the rack, all in one NVLink domain")
    cpus: int = Field(ge=0, le=576, description="CPUs (Grace) in the rack")
    nvlink_domain_tbs: PositiveFloat = Field(
        description="NVLink bandwidth of the whole domain, TB/s, as the vendor states it"
    )
    max_power_kw: PositiveFloat = Field(
        le=1000, description="Power of the whole rack, kW: trays, switch trays, power shelves"
    )
    cooling: Literal["air", "liquid"] = Field(description="How the rack must be cooled")


class DriverBranch(_Entry):
    """One NVIDIA data center driver branch and its support window."""

    designation: Literal["long-term-support", "production", "new-feature"] = Field(
        description="NVIDIA's kind of branch: long-term-support, production or new-feature"
    )
    end_of_life: str = Field(
        pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="Last month NVIDIA supports it, YYYY-MM"
    )


class Catalog(BaseModel):
    """The whole catalog; the shipped file and a spec's `catalog:` section share this shape."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    gpus: dict[str, GpuModel] = Field(
        default_factory=dict, description="GPU models by the name profiles give (gpu.model)"
    )
    nics: dict[str, NicModel] = Field(
        default_factory=dict, description="NIC models by the name profiles give (nics.*.model)"
    )
    switches: dict[str, SwitchModel] = Field(
        default_factory=dict,
        description="Switch models by the name the topology and network.switches give",
    )
    servers: dict[str, ServerLayout] = Field(
        default_factory=dict, description="Server layouts by the name profiles give (server)"
    )
    racks: dict[str, RackSystem] = Field(
        default_factory=dict,
        description="Rack-scale systems by the name server layouts give (rack_system)",
    )
    driver_branches: dict[str, DriverBranch] = Field(
        default_factory=dict,
        description="NVIDIA driver branches still supported, by major version; others have ended",
    )
    cables: dict[str, CableModel] = Field(
        default_factory=dict,
        description="Cable and optics families of the compute fabric by part family name; "
        "the planner picks one per cable from its run length and speed",
    )

    def merged_with(self, other: Catalog) -> Catalog:
        """Entries of `other` add to or replace entries of this catalog, name by name."""
        return Catalog(
            gpus={**self.gpus, **other.gpus},
            nics={**self.nics, **other.nics},
            switches={**self.switches, **other.switches},
            servers={**self.servers, **other.servers},
            racks={**self.racks, **other.racks},
            driver_branches={**self.driver_branches, **other.driver_branches},
            cables={**self.cables, **other.cables},
        )
