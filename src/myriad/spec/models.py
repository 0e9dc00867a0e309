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
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from myriad.spec.accept import Accept
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
# A Debian/Ubuntu kernel release as `uname -r` prints it and its packages are named
# (linux-image-<release>): 6.8.0-51-generic, 6.1.0-27-amd64, 5.15.0-1063-nvidia.
KernelRelease = Annotated[str, Field(pattern=r"^\d+\.\d+(\.\d+)?-[0-9A-Za-z][0-9A-Za-z.+~-]*$")]
# A name or IPv4 address and a port, as kubeadm's controlPlaneEndpoint takes it.
HostPort = Annotated[str, Field(pattern=r"^[^:/\s]+:[0-9]{1,5}$")]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class Metadata(_Model):
    name: Name = Field(
        description="The cluster's name: lower-case letters, digits and hyphens, at most 32 "
        "characters, starting with a letter; it names the Slurm or Kubernetes cluster, the "
        "local containers and the Pulumi resources, so changing it makes a new cluster"
    )
    description: str = Field(
        default="", description="Free text about the cluster, shown at the top of `myriad report`"
    )


class BareMetalHost(_Model):
    """One server: the NIC it PXE-boots from, its BMC, and the address it is given."""

    name: str = Field(
        min_length=1,
        description="The node this server becomes: a host name the pools give (gpu01, ctl01)",
    )
    mac: str = Field(
        pattern=r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$",
        description="MAC address of the NIC the server PXE-boots from, lower-case, "
        "colon-separated (aa:bb:cc:dd:ee:ff)",
    )
    bmc_address: str = Field(
        min_length=1,
        description="The BMC: a host, host:port or http(s):// URL (a bare host means HTTPS); "
        "Myriad adds the Redfish paths",
    )
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

    os_disk: OsDisk = Field(
        default_factory=OsDisk,
        description="Which disk the OS is installed on; default: the smallest disk, no RAID",
    )
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

    market: Literal["on-demand", "capacity-reservation", "capacity-block"] = Field(
        default="on-demand",
        description="on-demand: compute instances launch without a reservation; "
        "capacity-reservation: into an On-Demand Capacity Reservation; capacity-block: into an "
        "EC2 Capacity Block for ML. Both reservation kinds need reservation_id or "
        "island_reservations",
    )
    reservation_id: str | None = Field(
        default=None,
        pattern=r"^cr-[0-9a-f]{8,17}$",
        description="The reservation (cr-...) compute nodes launch into, for every island "
        "island_reservations does not name; only with a reservation market",
    )
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

    kind: Literal["local", "aws", "baremetal"] = Field(
        description="local: Docker containers on this machine (CPU only, for trying Myriad "
        "out); aws: EC2 instances made by the aws Pulumi stack; baremetal: servers installed "
        "over PXE through their BMCs"
    )
    # aws
    region: str | None = Field(
        default=None, description="AWS region, e.g. us-east-1; required with kind aws"
    )
    availability_zone_id: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2,6}[0-9]+-(?:[a-z]+[0-9]+-)?az[0-9]+$",
        description="Zone by ID (use1-az4), the same physical zone in every account",
    )
    availability_zone: str | None = Field(
        default=None, description="Refused: a zone name maps to a different zone per account"
    )
    admin_cidr: Cidr | None = Field(
        default=None,
        description="IPv4 network (CIDR) SSH to the nodes is allowed from; required with kind "
        "aws, and never 0.0.0.0/0",
    )
    capacity: AwsCapacity = Field(
        default=AwsCapacity(),
        description="How compute instances get their capacity (aws); default: on demand",
    )
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
    bmc: Literal["redfish", "ipmi"] | None = Field(
        default=None,
        description="How the BMCs are driven; required with kind baremetal. The bare-metal "
        "stack drives Redfish only: ipmi is accepted by the spec and refused by the stack",
    )
    bmc_credentials_secret: str | None = Field(
        default=None,
        description="Name of the Pulumi secret holding BMC credentials; never the secret",
    )
    hosts: tuple[BareMetalHost, ...] = Field(
        default=(),
        max_length=MAX_NODES,
        description="One entry per server (baremetal): every node of the pools needs one, "
        "its address inside network.addressing.management",
    )
    baremetal: BareMetalOptions | None = Field(
        default=None,
        description="PXE install settings (baremetal); absent: the defaults of each field",
    )
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
    sockets: PositiveInt = Field(le=16, description="CPU sockets in one server")
    cores_per_socket: PositiveInt = Field(
        le=1024, description="Physical cores per socket (not hardware threads)"
    )
    threads_per_core: Annotated[Literal[1, 2], Whole] = Field(
        default=2,
        description="Hardware threads per core: 2 with SMT (Hyper-Threading) on, 1 with it "
        "off; Slurm's ThreadsPerCore",
    )

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket


class PcieSpec(_Model):
    gen: PcieGen = Field(
        default=4,
        description="PCIe generation of the server's slots; a GPU or NIC link runs at the "
        "lower of this and the device's own",
    )
    switches: int = Field(
        default=0, ge=0, le=64, description="PCIe switches between CPUs and devices"
    )


class NicGroup(_Model):
    model: str = Field(min_length=1, description="A NIC name from the catalog")
    count: PositiveInt = Field(
        le=32, description="Cards of this model (at most 32); every port of a card is used"
    )
    bond: Literal["802.3ad", "active-backup"] | None = Field(
        default=None,
        description="Bond the ports (storage NICs): 802.3ad is LACP, every link used at once "
        "(the switch ports need a port-channel); active-backup uses one link at a time. "
        "Unset: no bond",
    )
    slot_gen: PcieGen | None = Field(
        default=None, description="PCIe generation of the NIC's slot; default: the profile's"
    )
    slot_lanes: Annotated[Literal[1, 2, 4, 8, 16], Whole] = Field(
        default=16,
        description="PCIe lanes of the NIC's slot; the link runs at the lower of the slot's "
        "and the card's width",
    )
    devices: tuple[str, ...] = Field(
        default=(),
        description="RDMA device names, one per port in rail order; default: the layout's "
        "port_map, else mlx5 enumeration order (mlx5_0, mlx5_1, ...)",
    )
    interfaces: tuple[str, ...] = Field(
        default=(),
        description="Network interface names, one per port in rail order; default: ib0, "
        "ib1, ... on InfiniBand, else rail0, stor0, mgmt0, ... by purpose (named by Myriad)",
    )


class NicSet(_Model):
    compute: NicGroup | None = Field(
        default=None,
        description="NICs on the compute fabric (network.fabric): each port is one rail, "
        "rail i beside GPU i",
    )
    storage: NicGroup | None = Field(
        default=None,
        description="NICs on the storage network: they carry the storage address and the "
        "checkpoints; absent: checkpoints go over the management NICs",
    )
    management: NicGroup | None = Field(
        default=None,
        description="NICs on the management network, counted for power (and checkpoints when "
        "there are no storage NICs)",
    )

    @field_validator("compute")
    @classmethod
    def _compute_ports_unbonded(cls, value: NicGroup | None) -> NicGroup | None:
        # The fabric plans every compute port as a rail of its own, and NCCL drives each
        # port itself; a bond would be planned as if it were not there.
        if value is not None and value.bond is not None:
            raise ValueError(
                f"bond {value.bond} on compute NICs is not planned: every compute port is a "
                "rail of its own on the fabric; remove bond (to put a dual-port NIC's two "
                "ports on two ToRs, set network.topology.planes 2)"
            )
        return value


class Profile(_Model):
    """One server shape. `server` names a catalog layout for power and rack-unit figures."""

    server: str | None = Field(
        default=None,
        description="A server layout of the catalog (e.g. HGX-H100-8GPU): its power, rack "
        "units and published RDMA port names; unset: estimated, and ports discovered",
    )
    gpu: GpuSpec | None = Field(
        default=None, description="The GPUs of one server; absent: a CPU-only server"
    )
    cpu: CpuSpec = Field(description="CPU sockets and cores; Slurm's node definition uses them")
    memory_gib: PositiveInt = Field(le=1_048_576, description="Host memory, GiB (at most 1 PiB)")
    pcie: PcieSpec = Field(
        default=PcieSpec(), description="The server's PCIe generation and switches"
    )
    nvswitch: int = Field(
        default=0,
        ge=0,
        le=64,
        description="NVSwitch chips in the server (0: none); with any, NVIDIA Fabric Manager "
        "is installed and checked, and the plan counts the GPUs' all-reduce over NVLink",
    )
    nics: NicSet = Field(
        default=NicSet(), description="NICs by network: compute, storage and management"
    )
    power_kw: PositiveFloat | None = Field(
        default=None,
        le=1000,
        description="Maximum server power, kW; default: the layout's, else estimated",
    )
    rack_units: PositiveInt | None = Field(
        default=None,
        le=60,
        description="Height of one server, rack units; default: the layout's, else 2 for a "
        "CPU server and 4 per four GPUs",
    )


def hostname(pool: str, count: int, index: int) -> str:
    """Host names are stable: the pool name and a 1-based index, zero-padded to the pool size."""
    return f"{pool}{index:0{max(2, len(str(count)))}d}"


class Pool(_Model):
    name: Name = Field(
        description="The pool's name, the prefix of its host names: pool gpu of 8 nodes is "
        "gpu01 to gpu08 (the index zero-padded to the pool size, at least 2 digits)"
    )
    profile: str = Field(description="The profile (a key of profiles) of every node in the pool")
    count: PositiveInt = Field(
        le=MAX_NODES, description=f"Nodes in the pool; a cluster holds at most {MAX_NODES:,}"
    )
    role: Role = Field(
        description="controller: Slurm controllers or the Kubernetes control plane, and the "
        "cluster's time servers; login: login nodes; compute: the nodes that run jobs, the "
        "only ones on the compute fabric and in islands; storage: storage servers (no slurmd)"
    )

    def hostname(self, index: int) -> str:
        return hostname(self.name, self.count, index)

    def hostnames(self) -> list[str]:
        return [self.hostname(i) for i in range(1, self.count + 1)]


class Spares(_Model):
    """Spare switches kept on the shelf, by layer: a fraction of the layer's switches,
    rounded up, bought with the fabric but not powered."""

    leaf: float = Field(default=0.0, ge=0.0, le=1.0, description="Spare leaves per leaf")
    spine: float = Field(default=0.0, ge=0.0, le=1.0, description="Spare spines per spine")
    core: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Spare core switches per core switch"
    )


class Topology(_Model):
    kind: Literal["fat-tree", "rail-optimized"] = Field(
        description="fat-tree: a node's NIC ports share leaves; rail-optimized: port j of every "
        "node goes to rail j's leaves, so NCCL keeps each channel on its rail"
    )
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
        ge=0.25,
        le=16.0,
        description="Endpoints per leaf uplink inside an island (1: non-blocking; below 1: "
        "more uplinks than downlinks, the leaf keeping fewer ports for endpoints, as Meta "
        "under-subscribes its rack switches)",
    )
    planes: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Independent planes (rail-optimized only): NIC port p goes to plane p mod "
        "planes, each plane its own leaves and spines (Alibaba HPN: a dual-port NIC's ports "
        "to two ToRs in two planes); every compute NIC's ports must split evenly",
    )
    leaf_nodes: PositiveInt | None = Field(
        default=None,
        le=1024,
        description="Compute nodes under one leaf: a top-of-rack switch per rack of that many "
        "nodes (Meta's RTSW: 2), its other ports free for uplinks; default: as many as half "
        "the leaf's ports take",
    )
    rails_only: bool = Field(
        default=False,
        description="No spine across rails (rail-optimized only; Wang et al. 2023, "
        "'Rail-only'): every rail is a network of its own, one switch where it fits, else "
        "leaves under spines of that rail; GPUs of different rails meet over NVLink",
    )
    leaf_uplinks: Literal["used", "full"] = Field(
        default="used",
        description="used: a leaf's uplinks follow the endpoints plugged into it; full: every "
        "leaf cables all its uplinks, populated or not, and its uplinks split evenly over the "
        "spines (NVIDIA DGX SuperPOD: the fabric is built for the full scalable unit)",
    )
    management_ports: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Leaf ports of fabric-management appliances (NVIDIA UFM), cabled with the "
        "nodes; each needs a free leaf port (NVIDIA's SuperPOD leaves one DGX out of an SU "
        "for them)",
    )
    spares: Spares = Field(
        default=Spares(),
        description="Spare switches by layer (fractions of each layer, rounded up); none unless "
        "set",
    )
    island_spines: PositiveInt | None = Field(
        default=None,
        le=4096,
        description="Spines of each island (of each plane), as the design builds them (Meta: "
        "18 CTSW a zone, one per RTSW uplink); every leaf stripes its uplinks over them; "
        "default: as few as the island's links fill",
    )

    @model_validator(mode="after")
    def _planes_are_rails(self) -> Topology:
        if self.planes > 1 and self.kind != "rail-optimized":
            raise ValueError(
                "planes above 1 need kind rail-optimized: a plane is a set of rails, each on "
                "leaves of its own; a fat-tree's leaves mix a node's ports"
            )
        if self.rails_only and self.kind != "rail-optimized":
            raise ValueError(
                "rails_only needs kind rail-optimized: it keeps each rail on switches of its "
                "own; a fat-tree's leaves mix a node's ports"
            )
        if self.rails_only and self.planes > 1:
            raise ValueError(
                f"rails_only with planes {self.planes}: rails_only already makes every rail "
                "a plane of its own; leave planes at 1"
            )
        return self


class SwitchGroup(_Model):
    """Switches outside the compute fabric, counted for power and racks."""

    purpose: Literal["frontend", "storage", "management"] = Field(
        description="The network these switches carry: frontend (users and login), storage or "
        "management"
    )
    model: str = Field(min_length=1, description="A switch name from the catalog")
    count: PositiveInt = Field(le=100_000, description="Switches of this model")


class RoceQos(_Model):
    dscp: int = Field(
        default=26,
        ge=0,
        le=63,
        description="DSCP of RoCE data (NCCL_IB_TC and RDMA-CM ToS are dscp x 4); the "
        "switches must map it to pfc_priority",
    )
    pfc_priority: int = Field(
        default=3,
        ge=0,
        le=7,
        description="Priority (0-7) RoCE data travels in, the only one with PFC (lossless)",
    )
    cnp_dscp: int = Field(
        default=48, ge=0, le=63, description="DSCP of congestion notification packets (CNPs)"
    )
    cnp_priority: int = Field(
        default=6,
        ge=0,
        le=7,
        description="Priority CNPs travel in; must differ from pfc_priority",
    )
    ecn: bool = Field(
        default=True,
        description="ECN (DCQCN congestion control) on the RoCE priority of every compute NIC",
    )
    mtu: int = Field(
        default=9000,
        ge=1500,
        le=9216,
        description="MTU of the compute NICs, bytes; the switches must carry it end to end",
    )
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
    sm_priority: int = Field(
        default=14,
        ge=0,
        le=15,
        description="OpenSM's SM priority on every sm_nodes host (0-15): the highest becomes "
        "master, a tie goes to the lower port GUID",
    )
    routing_engine: Literal["ftree", "updn", "minhop", "dfsssp", "ar_updn"] = Field(
        default="ftree",
        description="OpenSM's routing engine: ftree for fat-trees; ar_updn (adaptive routing) "
        "exists only in NVIDIA's OpenSM, not the distributions'",
    )
    partition_keys: tuple[Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{1,4}$")], ...] = Field(
        default=("0x7fff",),
        description="P_Keys (hex) of the partitions OpenSM defines, every node a full member; "
        "0x7fff is the default partition",
    )
    service_level: int = Field(
        default=0,
        ge=0,
        le=15,
        description="InfiniBand service level of NCCL's traffic (NCCL_IB_SL)",
    )
    ipoib: bool = Field(
        default=False, description="IP over InfiniBand: ib_ipoib loaded and its interfaces up"
    )

    @model_validator(mode="after")
    def _sm_nodes_only_with_opensm(self) -> Infiniband:
        if self.sm_nodes and self.subnet_manager != "opensm":
            raise ValueError(
                f"sm_nodes run OpenSM, but subnet_manager is {self.subnet_manager}: drop sm_nodes, "
                "or set subnet_manager: opensm"
            )
        return self


class Addressing(_Model):
    management: Cidr = Field(
        default="10.0.0.0/16",
        description="IPv4 network of the management addresses: from its 10th address on, one "
        "per node in spec order (addresses a provider's stack reports win)",
    )
    storage: Cidr | None = Field(
        default=None,
        description="IPv4 network of the storage addresses, in the same order, on the nodes "
        "with storage NICs; unset: no storage addresses",
    )
    compute: Cidr | None = Field(
        default=None,
        description="IPv4 network cut into one network per rail for the compute NICs (RoCE "
        "needs it: a GID comes from the address), each cut per leaf as rail_subnets says; "
        "unset: no rail addresses",
    )
    rail_subnets: Literal["per-leaf", "stretched"] = Field(
        default="per-leaf",
        description="RoCE rails whose nodes sit under more than one leaf: per-leaf (a subnet "
        "per leaf and rail, the leaf routes it and is the hosts' gateway to the rail's other "
        "leaves: L3 to the leaf, as Spectrum-X) or stretched (one subnet per rail over every "
        "leaf: the switches must stretch L2, EVPN/VXLAN, or proxy-ARP); a rail on one leaf "
        "keeps its whole network either way",
    )


class Network(_Model):
    # efa: AWS's Elastic Fabric Adapter (provider aws, EFA instance types); NCCL over libfabric.
    fabric: Literal["infiniband", "roce", "ethernet", "efa"] = Field(
        description="The compute fabric: infiniband; roce (RoCEv2 on lossless Ethernet); "
        "ethernet (TCP sockets, no RDMA); efa (AWS's Elastic Fabric Adapter)"
    )
    topology: Topology = Field(description="Shape and switches of the compute fabric")
    roce: RoceQos | None = Field(
        default=None,
        description="RoCE QoS (DSCP, PFC, ECN, MTU); only with fabric roce; absent: the defaults",
    )
    infiniband: Infiniband | None = Field(
        default=None,
        description="Subnet manager, routing and partitions; only with fabric infiniband; "
        "absent: the defaults",
    )
    addressing: Addressing = Field(
        default=Addressing(),
        description="IPv4 networks of the management, storage and compute (rail) addresses",
    )
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
    params_billion: PositiveFloat = Field(
        le=1_000_000,
        description="Model parameters, billions; the checkpoint is params x bytes_per_param GB",
    )
    bytes_per_param: PositiveFloat = Field(
        default=14.0,
        le=64,
        description="bf16 weights (2) + fp32 master weights (4) + Adam moments (4 + 4)",
    )
    strategy: Literal["single-node", "bonded", "distributed", "distributed-async"] = Field(
        default="distributed-async",
        description="How it is written: single-node (one node, one link), bonded (one node "
        "over its storage bond), distributed (every compute node its share at once), "
        "distributed-async (copied to host memory, written while training goes on). The plan "
        "times all four and judges this one",
    )
    interval_minutes: PositiveFloat = Field(
        default=30.0,
        le=525_600,
        description="Minutes between checkpoints; the stall's share of it is the overhead",
    )


class FsxLustre(_Model):
    """Amazon FSx for Lustre, made by the aws stack (FSx for Lustre User Guide: capacity 1.2 TiB
    or a multiple of 2.4 TiB; PERSISTENT_2 throughput 125, 250, 500 or 1000 MB/s per TiB)."""

    capacity_gib: int = Field(
        default=1200, ge=1200, description="Storage capacity, GiB: 1200 or a multiple of 2400"
    )
    deployment: Literal["PERSISTENT_2", "SCRATCH_2"] = Field(
        default="PERSISTENT_2",
        description="PERSISTENT_2: replicated, long-lived; SCRATCH_2: not replicated, for "
        "temporary data",
    )
    throughput_mbps_per_tib: Literal[125, 250, 500, 1000] = Field(
        default=250, description="Throughput per TiB of capacity, MB/s (PERSISTENT_2)"
    )

    @field_validator("capacity_gib")
    @classmethod
    def _capacity_step(cls, value: int) -> int:
        if value != 1200 and value % 2400 != 0:
            raise ValueError(f"{value} GiB: FSx for Lustre takes 1200 or a multiple of 2400 GiB")
        return value


class StorageSystem(_Model):
    """Storage servers or enclosures of one kind, counted for power and racks."""

    name: Name = Field(description="A name for these units, shown in the plan")
    count: PositiveInt = Field(le=100_000, description="Units of this kind")
    power_kw: PositiveFloat = Field(le=1000, description="Maximum power of one unit, kW")
    rack_units: PositiveInt = Field(le=60, description="Rack units of one unit")


class Storage(_Model):
    kind: Literal["nfs", "lustre", "beegfs", "weka", "fsx-lustre", "none"] = Field(
        description="The shared file system every node mounts: nfs, lustre, beegfs, "
        "fsx-lustre (FSx for Lustre, made by the aws stack) or none; weka is planned and "
        "validated (a wekafs mount) but bring-up has no WEKA client to mount it"
    )
    server: str | None = Field(
        default=None,
        description="nfs: the NFS server (name or address); lustre: the MGS NIDs "
        "(10.32.0.2@tcp); beegfs: the management host; not given for fsx-lustre",
    )
    export: str | None = Field(
        default=None,
        description="nfs: the exported path (/srv/data); lustre: the file system name",
    )
    mount: str = Field(
        default="/data",
        pattern=r"^/\S*$",
        description="Mount point on every node, an absolute path",
    )
    options: tuple[str, ...] = Field(
        default=(), description="Mount options appended to Myriad's own (nfs: vers=4.2, ...)"
    )
    write_gbs: PositiveFloat | None = Field(
        default=None, le=1e6, description="Aggregate write bandwidth of the storage system, GB/s"
    )
    checkpoint: Checkpoint | None = Field(
        default=None,
        description="The training checkpoint the plan times against this storage; absent: "
        "no checkpoint figures",
    )
    fsx: FsxLustre | None = Field(
        default=None,
        description="FSx for Lustre settings; only with kind fsx-lustre; absent: the defaults",
    )
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

    enroot_version: Version = Field(
        default="3.5.0",
        description="Enroot release installed (NVIDIA/enroot on GitHub); enroot_checksums "
        "are of its files",
    )
    enroot_checksums: dict[str, Sha256] = Field(
        min_length=1,
        description="sha256 of each Enroot package file by name, e.g. enroot_3.5.0-1_amd64.deb",
    )
    pyxis_version: Version = Field(
        default="0.20.0", description="Pyxis release built as Slurm's SPANK plug-in (NVIDIA/pyxis)"
    )
    pyxis_checksum: Sha256 = Field(description="sha256 of the Pyxis source tarball of the version")


class Slurm(_Model):
    accounting: bool = Field(
        default=False,
        description="Job accounting: slurmdbd and MariaDB on the first controller (sacct, "
        "fair-share); off: none",
    )
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
    version: Version = Field(
        default="1.31",
        description="Kubernetes release, minor (1.31) or patch (1.31.4); kubelet, kubeadm and "
        "kubectl are held at it",
    )
    control_plane_endpoint: HostPort | None = Field(
        default=None,
        description="host:port of the address in front of the control-plane nodes (a VIP or "
        "load balancer for the API server); needed with more than one controller",
    )
    pod_cidr: Cidr = Field(
        default="10.244.0.0/16",
        description="Pod network (IPv4 CIDR); apart from service_cidr and the node networks",
    )
    service_cidr: Cidr = Field(
        default="10.96.0.0/12",
        description="Service network (IPv4 CIDR); apart from pod_cidr and the node networks",
    )
    cni: Literal["calico", "flannel", "cilium"] = Field(
        default="calico", description="The pod network plug-in"
    )
    gpu_operator: bool = Field(
        default=False,
        description="true: NVIDIA's GPU Operator (helm chart) instead of the device plug-in",
    )

    @model_validator(mode="after")
    def _cidrs_apart(self) -> Kubernetes:
        pods = ipaddress.ip_network(self.pod_cidr)
        services = ipaddress.ip_network(self.service_cidr)
        if pods.overlaps(services):
            raise ValueError(f"pod_cidr {pods} overlaps service_cidr {services}")
        return self


NcclKey = Annotated[str, Field(pattern=r"^NCCL_[A-Z0-9_]+$")]


class Software(_Model):
    os: Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12"] = Field(
        description="The operating system of every node"
    )
    nvidia_driver: Version | None = Field(
        default=None, description='Driver branch ("550") or exact version ("550.127.05")'
    )
    cuda: Version | None = Field(
        default=None,
        description="The CUDA version the site's software targets, for the record: Myriad "
        "installs no CUDA toolkit (containers bring their own) and checks nothing against it",
    )
    ofed: Literal["inbox", "doca"] = Field(
        default="inbox",
        description="The RDMA stack: inbox (the distribution's rdma-core and kernel drivers) "
        "or doca (NVIDIA DOCA-OFED, which needs doca_version)",
    )
    doca_version: Version | None = Field(
        default=None,
        description='DOCA release whose repository is configured ("2.9.1"); needed with ofed '
        "doca, and on RoCE for mlnx-tools",
    )
    kernel: KernelRelease | None = Field(
        default=None,
        description="Kernel release every node boots (`uname -r`, e.g. 6.8.0-51-generic): "
        "its image and headers are installed and held, DKMS must have built every module for "
        "it, and a node on another one reboots into it (bringup.reboot; `myriad roll` drains "
        "first). Absent: the installed kernel is held as found",
    )
    container_runtime: Literal["docker", "containerd"] = Field(
        default="docker",
        description="Container engine on every node, with the NVIDIA Container Toolkit on GPU "
        "nodes; Kubernetes needs containerd",
    )
    orchestrator: Literal["slurm", "kubernetes"] = Field(
        default="slurm", description="The workload manager: slurm or kubernetes"
    )
    slurm: Slurm = Field(default=Slurm(), description="Slurm settings (orchestrator slurm)")
    kubernetes: Kubernetes | None = Field(
        default=None,
        description="Kubernetes settings; only with orchestrator kubernetes; absent: the defaults",
    )
    gpudirect_rdma: bool = Field(
        default=True,
        description="GPUDirect RDMA, NICs reading GPU memory directly (DMA-BUF, else "
        "nvidia-peermem); on InfiniBand and RoCE only",
    )
    nccl: dict[NcclKey, str] = Field(
        default_factory=dict,
        description="NCCL_* settings written last to /etc/nccl.conf, over the ones Myriad "
        "derives; a job's own environment still wins",
    )

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
    pue: float = Field(
        default=1.3,
        ge=1.0,
        le=3.0,
        description="Power usage effectiveness: facility power over IT power (1.3: 30 % more "
        "for cooling and losses)",
    )
    usd_per_kwh: float = Field(
        default=0.10, ge=0.0, le=5.0, description="Electricity price, US dollars per kWh"
    )
    rack_kw: PositiveFloat = Field(
        default=40.0,
        le=1000,
        description="Power one rack may draw, kW; a rack is full when its power or its rack "
        "units run out",
    )
    rack_units: PositiveInt = Field(default=42, le=60, description="Usable rack units per rack")
    cooling: Literal["air", "liquid"] = Field(
        default="air",
        description="How racks are cooled; air above 40 kW per rack is a warning (rack-cooling)",
    )
    power_limit_mw: PositiveFloat | None = Field(
        default=None, le=100_000, description="Facility power available to this cluster, MW"
    )
    # Where racks stand, for cable lengths. No vendor publishes a hall's figures: these
    # defaults are Myriad's stated assumptions, printed with every length they produce.
    racks_per_row: PositiveInt = Field(
        default=16,
        le=1000,
        description="Racks in one row; server racks fill rows first, "
        "switch racks start a row of their own",
    )
    rack_width_mm: PositiveInt = Field(
        default=600, le=2000, description="Distance between neighbouring racks' centres, mm"
    )
    row_pitch_mm: PositiveInt = Field(
        default=2400,
        le=20_000,
        description="Distance between neighbouring rows, mm (default: 1,200 mm rack depth and "
        "a 1,200 mm aisle)",
    )
    tray_drop_mm: NonNegativeInt = Field(
        default=600,
        le=5000,
        description="Cable from a rack's top into the overhead tray and back, mm, once at each "
        "rack a run leaves or enters",
    )
    cable_slack_mm: NonNegativeInt = Field(
        default=300, le=5000, description="Service loop left at each end of a cable, mm"
    )


class Workload(_Model):
    """A reference training run, for the 'how long would it take' estimate."""

    params_billion: PositiveFloat = Field(
        default=70.0, le=1_000_000, description="Model parameters, billions"
    )
    tokens_billion: PositiveFloat = Field(
        default=15000.0,
        le=1e9,
        description="Training tokens, billions; the run costs 6 x parameters x tokens FLOPs",
    )
    mfu: float = Field(
        default=0.40,
        gt=0.0,
        le=1.0,
        description="Model FLOPs utilization, the share of peak the run sustains (0.40: 40 %)",
    )
    precision: Literal["bf16", "fp8", "fp4"] = Field(
        default="bf16",
        description="Precision the peak is taken at (dense); fp8 or fp4 on a GPU without it "
        "gives no estimate",
    )


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

    api_version: Literal["myriad/v1"] = Field(
        alias="apiVersion", description="The spec format's version: myriad/v1"
    )
    kind: Literal["Cluster"] = Field(description="What the document describes: Cluster")
    metadata: Metadata = Field(description="The cluster's name and description")
    provider: Provider = Field(
        description="Where the machines come from: local containers, AWS or bare metal"
    )
    profiles: dict[Name, Profile] = Field(
        min_length=1,
        max_length=MAX_POOLS,
        description="Server shapes by name (the name pools give as profile)",
    )
    pools: tuple[Pool, ...] = Field(
        min_length=1,
        max_length=MAX_POOLS,
        description="Groups of identical nodes, each with its profile, count and role; nodes "
        "are numbered in pool order",
    )
    network: Network = Field(
        description="The compute fabric and its topology, the addressing and the other switches"
    )
    storage: Storage = Field(
        default=Storage(kind="none"),
        description="The shared file system and the checkpoint it takes; default: none",
    )
    software: Software = Field(
        description="OS, NVIDIA driver, RDMA stack, container runtime and orchestrator"
    )
    facility: Facility = Field(
        default=Facility(),
        description="The site's power, cooling and electricity price, for racks, power and cost",
    )
    workload: Workload = Field(
        default=Workload(),
        description="The reference training run the plan estimates training time for",
    )
    monitoring: Monitoring = Field(
        default_factory=Monitoring,
        description="Prometheus, Alertmanager, exporters and alert rules from the spec and plan",
    )
    bringup: Bringup = Field(
        Bringup(), description="How nodes are brought up: push or image, timeouts, reboots"
    )
    health: Health | None = Field(
        default=None, description="Node health on every node (myriad-health); absent: off"
    )
    accept: Accept = Field(
        Accept(), description="How `myriad accept` judges nodes: margin, DCGM levels, burn-in"
    )
    catalog: Catalog = Field(
        default_factory=Catalog, description="Entries added to or replacing the shipped catalog"
    )
    lints: Lints = Field(
        default_factory=Lints, description="Plan findings the site accepts, with reasons"
    )

    def pools_with_role(self, role: Role) -> tuple[Pool, ...]:
        return tuple(pool for pool in self.pools if pool.role == role)
