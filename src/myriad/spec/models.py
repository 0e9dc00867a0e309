"""The cluster spec: frozen pydantic models, strict where YAML would silently coerce.

Cross-references (a pool's profile, a catalog model name) are checked after these models
validate, by `myriad.spec.references`, so that every problem of a file is reported at once
with its location.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from myriad.spec.bringup import Bringup
from myriad.spec.catalog_models import Catalog, PcieGen, Whole
from myriad.spec.health import Health
from myriad.spec.monitoring import Monitoring

# Every count in a spec is bounded, so that no number makes planning or rendering hang: the
# largest clusters built so far hold a few hundred thousand GPUs (tens of thousands of nodes).
MAX_NODES = 200_000
MAX_POOLS = 1000

Role = Literal["controller", "login", "compute", "storage"]
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$|^[a-z]$")]


def _ipv4_network(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"not a network address in CIDR form such as 10.0.0.0/16 ({exc})") from exc
    if network.version != 4:
        raise ValueError("an IPv4 network is expected, such as 10.0.0.0/16")
    return str(network)


Cidr = Annotated[str, AfterValidator(_ipv4_network)]
Version = Annotated[str, Field(pattern=r"^\d+(\.\d+){0,3}$")]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class Metadata(_Model):
    name: Name
    description: str = ""


class BareMetalHost(_Model):
    """One server: the NIC it PXE-boots from, its BMC, and the address it is given."""

    name: str = Field(min_length=1)
    mac: str = Field(pattern=r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
    bmc_address: str = Field(min_length=1)
    address: str = Field(
        description="Management address, handed out by the PXE server's static DHCP lease"
    )
    redfish_system: str | None = Field(
        default=None,
        min_length=1,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="System id under /redfish/v1/Systems; default: the BMC's only system",
    )

    @field_validator("bmc_address")
    @classmethod
    def _bmc_url(cls, value: str) -> str:
        # A bare host (or host:port) means HTTPS, which is what a BMC serves Redfish on.
        url = value if "://" in value else f"https://{value}"
        try:
            parsed = urllib.parse.urlsplit(url)
            parsed.port  # noqa: B018 - reading the port is what validates it
        except ValueError as exc:
            raise ValueError(
                f"not a BMC address such as 10.1.0.21 or https://bmc01 ({exc})"
            ) from exc
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("a BMC address is a host, host:port or an http(s):// URL of the BMC")
        if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
            raise ValueError(
                "name the BMC only (https://host[:port]); the Redfish paths are Myriad's"
            )
        return value

    @field_validator("address")
    @classmethod
    def _ipv4(cls, value: str) -> str:
        try:
            address = ipaddress.ip_address(value)
        except ValueError as exc:
            raise ValueError(f"not an IP address such as 10.0.0.21 ({exc})") from exc
        if address.version != 4:
            raise ValueError("an IPv4 address is expected, such as 10.0.0.21")
        return str(address)


class OsDisk(_Model):
    """The disk the OS goes on; the installer's own choice, the largest, is a data drive on HGX."""

    model: str | None = Field(
        default=None, min_length=1, description="Disk model glob, e.g. 'SAMSUNG MZ1L2960*'"
    )
    serial: str | None = Field(default=None, min_length=1, description="Disk serial glob")
    size: Literal["smallest", "largest"] = Field(
        default="smallest", description="Among the disks that match, the smallest or largest"
    )
    raid1: bool = Field(
        default=False, description="mdadm RAID1 over two matching disks (the M.2 boot pair)"
    )


class BareMetalOptions(_Model):
    """How bare-metal nodes are installed over PXE."""

    os_disk: OsDisk = Field(default_factory=OsDisk)
    parallel_installs: int = Field(
        default=50, ge=1, le=10000, description="Nodes installing at once; the rest wait queued"
    )
    install_timeout_minutes: int = Field(
        default=60, ge=5, le=1440, description="From power-on to the installed system on SSH"
    )
    boot_mode: Literal["UEFI", "Legacy"] = Field(
        default="UEFI", description="BootSourceOverrideMode of the one-time network boot"
    )
    dhcp_subnet_prefix: int | None = Field(
        default=None,
        ge=8,
        le=30,
        description="Prefix length of the rack subnets behind DHCP relays; unset: one segment",
    )


class AwsCapacity(_Model):
    """Where AWS compute nodes get their capacity: on demand, or a reservation of either kind."""

    market: Literal["on-demand", "capacity-reservation", "capacity-block"] = "on-demand"
    reservation_id: str | None = Field(default=None, pattern=r"^cr-[0-9a-f]{8,17}$")
    island_reservations: dict[
        Annotated[str, Field(pattern=r"^island-(0|[1-9][0-9]{0,5})$")],
        Annotated[str, Field(pattern=r"^cr-[0-9a-f]{8,17}$")],
    ] = Field(
        default_factory=dict,
        description=(
            "A reservation per compute island (island-<n>: cr-...), in place of "
            "reservation_id for that island: a Capacity Block holds at most 64 instances and "
            "one fleet launches into one block"
        ),
    )

    @model_validator(mode="after")
    def _reservation_matches_market(self) -> AwsCapacity:
        if self.market == "on-demand" and (self.reservation_id or self.island_reservations):
            given = "reservation_id" if self.reservation_id else "island_reservations"
            raise ValueError(
                f"{given} is given but market is on-demand; set market: "
                "capacity-reservation or capacity-block"
            )
        if self.market != "on-demand" and not (self.reservation_id or self.island_reservations):
            raise ValueError(
                f"market {self.market} needs reservation_id (cr-...) or island_reservations"
            )
        return self


class Provider(_Model):
    """Where the machines come from; fields beyond `kind` apply to that kind only."""

    kind: Literal["local", "aws", "baremetal"]
    # aws
    region: str | None = None
    availability_zone_id: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2,6}[0-9]+-(?:[a-z]+[0-9]+-)?az[0-9]+$",
        description="Zone by ID (use1-az4), the same physical zone in every account",
    )
    availability_zone: str | None = Field(
        default=None, description="Refused: a zone name maps to a different zone per account"
    )
    admin_cidr: Cidr | None = None
    capacity: AwsCapacity = AwsCapacity()
    capacity_reservation_id: str | None = Field(
        default=None, description="Refused: replaced by capacity.reservation_id"
    )
    image: Literal["os", "dlami"] = Field(
        default="os",
        description="os: software.os's image; dlami: AWS's GPU deep-learning base AMI (GPU pools)",
    )
    ssh_key_name: str | None = Field(
        default=None, min_length=1, description="EC2 key pair installed for the default user"
    )
    root_volume_gib: int = Field(default=200, ge=8, le=16384, description="Root EBS volume, GiB")
    instance_types: dict[Name, Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")]] = (
        Field(
            default_factory=dict,
            description="Instance type per profile, overriding the stack's GPU and CPU tables",
        )
    )
    # baremetal
    bmc: Literal["redfish", "ipmi"] | None = None
    bmc_credentials_secret: str | None = Field(
        default=None,
        description="Name of the Pulumi secret holding BMC credentials; never the secret",
    )
    hosts: tuple[BareMetalHost, ...] = Field(default=(), max_length=MAX_NODES)
    baremetal: BareMetalOptions | None = None
    # aws and baremetal
    stack_per_island: bool = Field(
        default=False,
        description="One Pulumi stack per compute island plus one for the rest, not one in all",
    )

    @field_validator("availability_zone")
    @classmethod
    def _zone_by_id(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                f"availability_zone {value} names a zone by name, which means a different "
                "physical zone in each account; give availability_zone_id instead (for example "
                "use1-az4: `aws ec2 describe-availability-zones` lists both)"
            )
        return value

    @field_validator("capacity_reservation_id")
    @classmethod
    def _capacity_moved(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                "capacity_reservation_id is now capacity: {market: capacity-reservation "
                f"(or capacity-block), reservation_id: {value}}}"
            )
        return value

    @field_validator("admin_cidr")
    @classmethod
    def _not_the_world(cls, value: str | None) -> str | None:
        if value is not None and ipaddress.ip_network(value).prefixlen == 0:
            raise ValueError(f"admin_cidr {value} opens SSH to the world; name your admin network")
        return value

    @model_validator(mode="after")
    def _fields_match_kind(self) -> Provider:
        if self.kind == "aws":
            if self.region is None:
                raise ValueError("provider kind aws needs region (for example us-east-1)")
            if self.admin_cidr is None:
                raise ValueError(
                    "provider kind aws needs admin_cidr, the network SSH is allowed from"
                )
            if self.availability_zone_id is None:
                raise ValueError(
                    "provider kind aws needs availability_zone_id (for example use1-az4): "
                    "every node and any reservation must be in that one zone"
                )
        if self.kind == "baremetal" and self.bmc is None:
            raise ValueError("provider kind baremetal needs bmc: redfish or ipmi")
        if self.kind != "aws" and (self.region or self.availability_zone_id):
            raise ValueError(f"region and availability_zone_id apply to aws, not {self.kind}")
        if self.kind != "baremetal" and (self.bmc or self.hosts or self.baremetal):
            raise ValueError(f"bmc, hosts and baremetal apply to baremetal, not {self.kind}")
        aws_only = {
            "ssh_key_name",
            "root_volume_gib",
            "instance_types",
            "capacity_reservation_id",
            "capacity",
            "image",
        }
        if self.kind != "aws" and (given := sorted(aws_only & self.model_fields_set)):
            verb = "applies" if len(given) == 1 else "apply"
            raise ValueError(f"{', '.join(given)} {verb} to aws, not {self.kind}")
        if self.kind == "local" and self.stack_per_island:
            raise ValueError("stack_per_island applies to Pulumi stacks; kind local has none")
        self._hosts_distinct()
        return self

    def _hosts_distinct(self) -> None:
        for field in ("name", "mac", "address"):
            seen: set[str] = set()
            for host in self.hosts:
                value = getattr(host, field)
                if value in seen:
                    raise ValueError(f"two hosts share the {field} {value}; each must be unique")
                seen.add(value)
        systems: set[tuple[str, str | None]] = set()
        for host in self.hosts:
            system = (host.bmc_address, host.redfish_system)
            if system in systems:
                raise ValueError(
                    f"two hosts share BMC {host.bmc_address}; where one BMC serves several "
                    "servers, give each host its redfish_system"
                )
            systems.add(system)


class GpuSpec(_Model):
    model: str = Field(min_length=1, description="A GPU name from the catalog")
    count: PositiveInt = Field(le=72, description="GPUs in one server (at most 72)")


class CpuSpec(_Model):
    sockets: PositiveInt = Field(le=16)
    cores_per_socket: PositiveInt = Field(le=1024)
    threads_per_core: Annotated[Literal[1, 2], Whole] = 2

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket


class PcieSpec(_Model):
    gen: PcieGen = 4
    switches: int = Field(
        default=0, ge=0, le=64, description="PCIe switches between CPUs and devices"
    )


class NicGroup(_Model):
    model: str = Field(min_length=1, description="A NIC name from the catalog")
    count: PositiveInt = Field(
        le=32, description="Cards of this model (at most 32); every port of a card is used"
    )
    bond: Literal["802.3ad", "active-backup"] | None = None
    slot_gen: PcieGen | None = Field(
        default=None, description="PCIe generation of the NIC's slot; default: the profile's"
    )
    slot_lanes: Annotated[Literal[1, 2, 4, 8, 16], Whole] = 16
    devices: tuple[str, ...] = Field(
        default=(),
        description="RDMA device names, one per port in rail order (default mlx5_0, mlx5_1, ...)",
    )
    interfaces: tuple[str, ...] = Field(
        default=(),
        description="Network interface names, one per port in rail order (default: see docs)",
    )


class NicSet(_Model):
    compute: NicGroup | None = None
    storage: NicGroup | None = None
    management: NicGroup | None = None


class Profile(_Model):
    """One server shape. `server` names a catalog layout for power and rack-unit figures."""

    server: str | None = None
    gpu: GpuSpec | None = None
    cpu: CpuSpec
    memory_gib: PositiveInt = Field(le=1_048_576, description="Host memory, GiB (at most 1 PiB)")
    pcie: PcieSpec = PcieSpec()
    nvswitch: int = Field(default=0, ge=0, le=64)
    nics: NicSet = NicSet()
    power_kw: PositiveFloat | None = Field(
        default=None,
        le=1000,
        description="Maximum server power, kW; default: the layout's, else estimated",
    )
    rack_units: PositiveInt | None = Field(default=None, le=60)


def hostname(pool: str, count: int, index: int) -> str:
    """Host names are stable: the pool name and a 1-based index, zero-padded to the pool size."""
    return f"{pool}{index:0{max(2, len(str(count)))}d}"


class Pool(_Model):
    name: Name
    profile: str
    count: PositiveInt = Field(
        le=MAX_NODES, description=f"Nodes in the pool; a cluster holds at most {MAX_NODES:,}"
    )
    role: Role

    def hostname(self, index: int) -> str:
        return hostname(self.name, self.count, index)

    def hostnames(self) -> list[str]:
        return [self.hostname(i) for i in range(1, self.count + 1)]


class Topology(_Model):
    kind: Literal["fat-tree", "rail-optimized"]
    switch: str = Field(description="Leaf switch model from the catalog")
    spine_switch: str | None = Field(default=None, description="Default: the leaf model")
    island_nodes: PositiveInt | None = Field(
        default=None,
        le=MAX_NODES,
        description="Compute nodes per island; default: one island of all",
    )
    inter_island_oversubscription: float = Field(
        default=1.0, ge=1.0, le=16.0, description="Island bandwidth over core links (2: 2:1)"
    )
    island_oversubscription: float = Field(
        default=1.0,
        ge=1.0,
        le=16.0,
        description="Endpoints per leaf uplink inside an island (1: non-blocking)",
    )


class SwitchGroup(_Model):
    """Switches outside the compute fabric, counted for power and racks."""

    purpose: Literal["frontend", "storage", "management"]
    model: str = Field(min_length=1, description="A switch name from the catalog")
    count: PositiveInt = Field(le=100_000)


class RoceQos(_Model):
    dscp: int = Field(default=26, ge=0, le=63)
    pfc_priority: int = Field(default=3, ge=0, le=7)
    cnp_dscp: int = Field(default=48, ge=0, le=63)
    cnp_priority: int = Field(default=6, ge=0, le=7)
    ecn: bool = True
    mtu: int = Field(default=9000, ge=1500, le=9216)
    gid_index: int | None = Field(
        default=None,
        ge=0,
        le=255,
        description="NCCL_IB_GID_INDEX; unset: NCCL 2.21+ picks the RoCEv2 GID of the rail address",
    )

    @model_validator(mode="after")
    def _cnp_apart_from_data(self) -> RoceQos:
        if self.cnp_priority == self.pfc_priority:
            raise ValueError(
                "cnp_priority must differ from pfc_priority: congestion notifications must not "
                "queue behind the paused data they are meant to slow (commonly 6 vs 3)"
            )
        return self


class Infiniband(_Model):
    subnet_manager: Literal["opensm", "ufm", "switch"] = Field(
        default="opensm",
        description="opensm: OpenSM on sm_nodes (one port each); ufm: NVIDIA UFM; switch: the "
        "managed switches' embedded subnet manager. With ufm or switch no node runs OpenSM",
    )
    sm_nodes: tuple[str, ...] = Field(default=(), description="Host names that run OpenSM")
    sm_priority: int = Field(default=14, ge=0, le=15)
    routing_engine: Literal["ftree", "updn", "minhop", "dfsssp", "ar_updn"] = "ftree"
    partition_keys: tuple[Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{1,4}$")], ...] = ("0x7fff",)
    service_level: int = Field(default=0, ge=0, le=15)
    ipoib: bool = False

    @model_validator(mode="after")
    def _sm_nodes_only_with_opensm(self) -> Infiniband:
        if self.sm_nodes and self.subnet_manager != "opensm":
            raise ValueError(
                f"sm_nodes run OpenSM, but subnet_manager is {self.subnet_manager}: drop sm_nodes, "
                "or set subnet_manager: opensm"
            )
        return self


class Addressing(_Model):
    management: Cidr = "10.0.0.0/16"
    storage: Cidr | None = None
    compute: Cidr | None = None


class Network(_Model):
    # efa: AWS's Elastic Fabric Adapter (provider aws, EFA instance types); NCCL over libfabric.
    fabric: Literal["infiniband", "roce", "ethernet", "efa"]
    topology: Topology
    roce: RoceQos | None = None
    infiniband: Infiniband | None = None
    addressing: Addressing = Addressing()
    switches: tuple[SwitchGroup, ...] = Field(
        default=(),
        max_length=64,
        description="Front-end, storage and management switches, for power and racks",
    )

    @model_validator(mode="after")
    def _settings_match_fabric(self) -> Network:
        if self.roce is not None and self.fabric != "roce":
            raise ValueError(f"roce settings are given but the fabric is {self.fabric}")
        if self.infiniband is not None and self.fabric != "infiniband":
            raise ValueError(f"infiniband settings are given but the fabric is {self.fabric}")
        return self

    @property
    def roce_qos(self) -> RoceQos:
        return self.roce or RoceQos()

    @property
    def ib(self) -> Infiniband:
        return self.infiniband or Infiniband()


class Checkpoint(_Model):
    params_billion: PositiveFloat = Field(le=1_000_000)
    bytes_per_param: PositiveFloat = Field(
        default=14.0,
        le=64,
        description="bf16 weights (2) + fp32 master weights (4) + Adam moments (4 + 4)",
    )
    strategy: Literal["single-node", "bonded", "distributed", "distributed-async"] = (
        "distributed-async"
    )
    interval_minutes: PositiveFloat = Field(default=30.0, le=525_600)


class FsxLustre(_Model):
    """Amazon FSx for Lustre, made by the aws stack (FSx for Lustre User Guide: capacity 1.2 TiB
    or a multiple of 2.4 TiB; PERSISTENT_2 throughput 125, 250, 500 or 1000 MB/s per TiB)."""

    capacity_gib: int = Field(default=1200, ge=1200)
    deployment: Literal["PERSISTENT_2", "SCRATCH_2"] = "PERSISTENT_2"
    throughput_mbps_per_tib: Literal[125, 250, 500, 1000] = 250

    @field_validator("capacity_gib")
    @classmethod
    def _capacity_step(cls, value: int) -> int:
        if value != 1200 and value % 2400 != 0:
            raise ValueError(f"{value} GiB: FSx for Lustre takes 1200 or a multiple of 2400 GiB")
        return value


class StorageSystem(_Model):
    """Storage servers or enclosures of one kind, counted for power and racks."""

    name: Name
    count: PositiveInt = Field(le=100_000)
    power_kw: PositiveFloat = Field(le=1000, description="Maximum power of one unit, kW")
    rack_units: PositiveInt = Field(le=60, description="Rack units of one unit")


class Storage(_Model):
    kind: Literal["nfs", "lustre", "beegfs", "weka", "fsx-lustre", "none"]
    server: str | None = None
    export: str | None = None
    mount: str = Field(default="/data", pattern=r"^/\S*$")
    options: tuple[str, ...] = ()
    write_gbs: PositiveFloat | None = Field(
        default=None, le=1e6, description="Aggregate write bandwidth of the storage system, GB/s"
    )
    checkpoint: Checkpoint | None = None
    fsx: FsxLustre | None = None
    systems: tuple[StorageSystem, ...] = Field(
        default=(), max_length=64, description="Storage hardware, for power and racks"
    )

    @model_validator(mode="after")
    def _client_knows_where_to_mount(self) -> Storage:
        if self.fsx is not None and self.kind != "fsx-lustre":
            raise ValueError(f"fsx settings are given but the storage kind is {self.kind}")
        if self.kind == "fsx-lustre" and (self.server or self.export):
            raise ValueError(
                "fsx-lustre storage is made by the aws stack; its server and export come "
                "from the stack, not the spec"
            )
        if self.kind == "nfs" and (self.server is None or self.export is None):
            raise ValueError("nfs storage needs server and export (for example export: /srv/data)")
        if self.kind == "lustre" and (self.server is None or self.export is None):
            raise ValueError(
                "lustre storage needs server (the MGS NIDs, e.g. 10.32.0.2@tcp) and export "
                "(the file system name)"
            )
        if self.kind == "beegfs" and self.server is None:
            raise ValueError("beegfs storage needs server (the management host)")
        return self


Sha256 = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class SlurmContainers(_Model):
    """Enroot and Pyxis from NVIDIA's GitHub releases, installed only with checksums vouched for."""

    enroot_version: Version = "3.5.0"
    enroot_checksums: dict[str, Sha256] = Field(
        min_length=1,
        description="sha256 of each Enroot package file by name, e.g. enroot_3.5.0-1_amd64.deb",
    )
    pyxis_version: Version = "0.20.0"
    pyxis_checksum: Sha256 = Field(description="sha256 of the Pyxis source tarball of the version")


class Slurm(_Model):
    accounting: bool = False
    state_save_location: str | None = Field(
        default=None,
        pattern=r"^/\S*$",
        description="slurmctld's StateSaveLocation on storage every controller mounts; "
        "needed with more than one controller (default: a local directory)",
    )
    containers: SlurmContainers | None = Field(
        default=None,
        description="Enroot and Pyxis for `srun --container-image`; off without their checksums",
    )
    no_containers: bool = Field(
        default=False,
        description="true: GPU jobs run without Enroot and Pyxis on purpose (otherwise a GPU "
        "cluster without software.slurm.containers is a plan error)",
    )
    legacy_cgroup: bool = Field(
        default=False,
        description="true: boot the nodes with the legacy (v1) cgroup hierarchy, for an OS whose "
        "Slurm has no cgroup/v2 plugin (Ubuntu 22.04's 21.08); a warned, explicit choice",
    )

    @model_validator(mode="after")
    def _containers_or_not(self) -> Slurm:
        if self.no_containers and self.containers is not None:
            raise ValueError("no_containers is true but containers are given: choose one")
        return self


class Kubernetes(_Model):
    version: Version = "1.31"
    pod_cidr: Cidr = "10.244.0.0/16"
    service_cidr: Cidr = "10.96.0.0/12"
    cni: Literal["calico", "flannel", "cilium"] = "calico"
    gpu_operator: bool = False

    @model_validator(mode="after")
    def _cidrs_apart(self) -> Kubernetes:
        pods = ipaddress.ip_network(self.pod_cidr)
        services = ipaddress.ip_network(self.service_cidr)
        if pods.overlaps(services):
            raise ValueError(f"pod_cidr {pods} overlaps service_cidr {services}")
        return self


NcclKey = Annotated[str, Field(pattern=r"^NCCL_[A-Z0-9_]+$")]


class Software(_Model):
    os: Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12"]
    nvidia_driver: Version | None = Field(
        default=None, description='Driver branch ("550") or exact version ("550.127.05")'
    )
    cuda: Version | None = None
    ofed: Literal["inbox", "doca"] = "inbox"
    doca_version: Version | None = None
    container_runtime: Literal["docker", "containerd"] = "docker"
    orchestrator: Literal["slurm", "kubernetes"] = "slurm"
    slurm: Slurm = Slurm()
    kubernetes: Kubernetes | None = None
    gpudirect_rdma: bool = True
    nccl: dict[NcclKey, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Software:
        if self.ofed == "doca" and self.doca_version is None:
            raise ValueError('ofed doca needs doca_version (for example "2.9.1")')
        if self.kubernetes is not None and self.orchestrator != "kubernetes":
            raise ValueError("kubernetes settings are given but the orchestrator is slurm")
        return self

    @property
    def k8s(self) -> Kubernetes:
        return self.kubernetes or Kubernetes()


class Facility(_Model):
    pue: float = Field(default=1.3, ge=1.0, le=3.0)
    usd_per_kwh: float = Field(default=0.10, ge=0.0, le=5.0)
    rack_kw: PositiveFloat = Field(default=40.0, le=1000)
    rack_units: PositiveInt = Field(default=42, le=60, description="Usable rack units per rack")
    cooling: Literal["air", "liquid"] = "air"
    power_limit_mw: PositiveFloat | None = Field(
        default=None, le=100_000, description="Facility power available to this cluster, MW"
    )


class Workload(_Model):
    """A reference training run, for the 'how long would it take' estimate."""

    params_billion: PositiveFloat = Field(default=70.0, le=1_000_000)
    tokens_billion: PositiveFloat = Field(default=15000.0, le=1e9)
    mfu: float = Field(default=0.40, gt=0.0, le=1.0)
    precision: Literal["bf16", "fp8"] = "bf16"


class LintAcceptance(_Model):
    rule: str = Field(description="The lint's id (`myriad plan --explain RULE` says what it is)")
    reason: str = Field(
        min_length=10, max_length=500, description="Why this site accepts it; shown by the plan"
    )


class Lints(_Model):
    accept: tuple[LintAcceptance, ...] = Field(
        default=(),
        max_length=100,
        description="Warnings and notes this site accepts, each with its reason; errors cannot "
        "be accepted",
    )


class Cluster(_Model):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        populate_by_name=True,
        title="Myriad cluster spec",
    )

    api_version: Literal["myriad/v1"] = Field(alias="apiVersion")
    kind: Literal["Cluster"]
    metadata: Metadata
    provider: Provider
    profiles: dict[Name, Profile] = Field(min_length=1, max_length=MAX_POOLS)
    pools: tuple[Pool, ...] = Field(min_length=1, max_length=MAX_POOLS)
    network: Network
    storage: Storage = Storage(kind="none")
    software: Software
    facility: Facility = Facility()
    workload: Workload = Workload()
    monitoring: Monitoring = Field(
        default_factory=Monitoring,
        description="Prometheus, Alertmanager, exporters and alert rules from the spec and plan",
    )
    bringup: Bringup = Field(Bringup(), description="How long bring-up waits for a node (timeouts)")
    health: Health | None = Field(
        default=None, description="Node health on every node (myriad-health); absent: off"
    )
    catalog: Catalog = Field(
        default_factory=Catalog, description="Entries added to or replacing the shipped catalog"
    )
    lints: Lints = Field(
        default_factory=Lints, description="Plan findings the site accepts, with reasons"
    )

    def pools_with_role(self, role: Role) -> tuple[Pool, ...]:
        return tuple(pool for pool in self.pools if pool.role == role)
