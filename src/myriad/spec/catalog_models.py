"""Typed entries of the hardware catalog: the datasheet figures the planner and lints use.

Every entry names where its figures come from (`source`), so a reviewer can check a
number before trusting a plan built on it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PositiveFloat, PositiveInt


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
    vendor: Literal["nvidia", "amd", "intel"] = "nvidia"
    form_factor: Literal["sxm", "oam", "pcie"]
    memory_gb: PositiveInt = Field(description="Memory as marketed (80 for an 80 GB part)")
    board_power_w: PositiveInt
    bf16_dense_tflops: PositiveFloat
    fp8_dense_tflops: PositiveFloat | None = None
    nvlink_gbs: float = Field(
        ge=0, description="NVLink bandwidth per GPU, both directions together, GB/s"
    )
    nvlink_links: int = Field(ge=0, description="NVLink links per GPU (what nvidia-smi lists)")
    pcie_gen: PcieGen
    pcie_lanes: PositiveInt = 16
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
    ports: PositiveInt = Field(default=1, le=16)
    pcie_gen: PcieGen
    pcie_lanes: PositiveInt = 16
    link_layers: tuple[LinkLayer, ...] = Field(min_length=1)
    rdma: bool = True
    power_w: PositiveFloat = 25.0
    pci_ids: tuple[PciId, ...] = Field(default=(), description=PCI_IDS_DESCRIPTION)


class SwitchModel(_Entry):
    kind: LinkLayer
    # 4096 ports is past any switch built; fewer than 2 cannot be linked in tiers.
    ports: int = Field(ge=2, le=4096, description="Ports at port_speed_gbps (after any splitting)")
    port_speed_gbps: PositiveInt
    power_w: PositiveFloat = Field(description="Typical power with optics, W")
    rack_units: PositiveInt = Field(default=1, le=60)
    ports_per_cage: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Ports sharing one transceiver cage (2: twin-port OSFP such as QM9700)",
    )


class ServerCpu(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    sockets: PositiveInt
    cores_per_socket: PositiveInt


class ServerNics(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    model: str
    count: PositiveInt


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
    gpu_model: str
    gpu_count: PositiveInt = Field(le=72)
    cpu: ServerCpu
    memory_gib: PositiveInt
    pcie_gen: PcieGen
    pcie_switches: int = Field(ge=0)
    nvswitch: int = Field(ge=0)
    compute_nics: ServerNics
    max_power_kw: PositiveFloat
    rack_units: PositiveInt
    port_map: PortMap | None = Field(
        default=None,
        description="The vendor's published RDMA device names by purpose; none: discovered",
    )


class DriverBranch(_Entry):
    """One NVIDIA data center driver branch and its support window."""

    designation: Literal["long-term-support", "production", "new-feature"]
    end_of_life: str = Field(
        pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="Last month NVIDIA supports it, YYYY-MM"
    )


class Catalog(BaseModel):
    """The whole catalog; the shipped file and a spec's `catalog:` section share this shape."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    gpus: dict[str, GpuModel] = Field(default_factory=dict)
    nics: dict[str, NicModel] = Field(default_factory=dict)
    switches: dict[str, SwitchModel] = Field(default_factory=dict)
    servers: dict[str, ServerLayout] = Field(default_factory=dict)
    driver_branches: dict[str, DriverBranch] = Field(
        default_factory=dict,
        description="NVIDIA driver branches still supported, by major version; others have ended",
    )

    def merged_with(self, other: Catalog) -> Catalog:
        """Entries of `other` add to or replace entries of this catalog, name by name."""
        return Catalog(
            gpus={**self.gpus, **other.gpus},
            nics={**self.nics, **other.nics},
            switches={**self.switches, **other.switches},
            servers={**self.servers, **other.servers},
            driver_branches={**self.driver_branches, **other.driver_branches},
        )
