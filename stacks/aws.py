"""AWS: a VPC for the cluster, instances per pool with their EFA interfaces, and one cluster
placement group per compute island.

Login nodes sit in a public subnet behind an Elastic IP and are the way in; every other node
is in a private subnet that reaches package mirrors through a NAT gateway. One security group
holds them all: all traffic between its members (EFA requires it), SSH from the spec's admin
network only. The network belongs to the cluster-wide stack; island stacks (see
`stacks.sharding`) find it through a StackReference to that stack.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

from myriad.plan.nodes import NodeRecord
from myriad.spec.models import Cluster, Pool
from stacks.instance_types import InstanceType, check_overrides, instance_type
from stacks.interface import ProviderResult, StackError, all_records, node_record
from stacks.settings import NAMESPACE, StackSettings
from stacks.sharding import StackScope

TAG_CLUSTER = "myriad:cluster"
TAG_POOL = "myriad:pool"
TAG_ROLE = "myriad:role"
TAG_ISLAND = "myriad:island"

# The AMI is resolved at launch from the distribution's own SSM parameter, so a newer image
# does not churn the stack; the root device name is the one those images use.
IMAGES: Mapping[str, tuple[str, str]] = {
    "ubuntu-22.04": (
        "resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/"
        "ebs-gp2/ami-id",
        "/dev/sda1",
    ),
    "ubuntu-24.04": (
        "resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/"
        "ebs-gp3/ami-id",
        "/dev/sda1",
    ),
    "debian-12": ("resolve:ssm:/aws/service/debian/release/12/latest/amd64", "/dev/xvda"),
}
_AWS_RESERVED_PER_SUBNET = 5


@dataclass(frozen=True, slots=True)
class NetworkPlan:
    """The VPC is the spec's management network: its first quarter public, second half private."""

    vpc: str
    public: str
    private: str

    @classmethod
    def for_spec(cls, spec: Cluster) -> NetworkPlan:
        vpc = ipaddress.IPv4Network(spec.network.addressing.management)
        if not 16 <= vpc.prefixlen <= 24:
            raise StackError(
                f"network.addressing.management {vpc} must be a /16 to /24 to hold an AWS VPC "
                "with a public and a private subnet"
            )
        halves = list(vpc.subnets(prefixlen_diff=1))
        private, public = halves[1], next(halves[0].subnets(prefixlen_diff=1))
        private_nodes = sum(p.count for p in spec.pools if p.role != "login")
        room = private.num_addresses - _AWS_RESERVED_PER_SUBNET - 1  # and the NAT gateway
        if private_nodes > room:
            raise StackError(
                f"the private subnet {private} of {vpc} holds {room} nodes, but the spec has "
                f"{private_nodes} that are not login nodes; widen network.addressing.management"
            )
        return cls(str(vpc), str(public), str(private))


def cluster_tags(cluster: str, **extra: str) -> dict[str, str]:
    return {TAG_CLUSTER: cluster, **extra}


@dataclass(frozen=True)
class AwsNetworkArgs:
    cluster: str
    plan: NetworkPlan
    admin_cidr: str
    availability_zone: str | None


class AwsNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    public_subnet_id: pulumi.Output[str]
    private_subnet_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        c = args.cluster

        def tags(name: str) -> dict[str, str]:
            return cluster_tags(c, Name=f"{c}-{name}")

        vpc = aws.ec2.Vpc(
            f"{c}-vpc",
            cidr_block=args.plan.vpc,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=tags("vpc"),
            opts=child,
        )
        self.internet_gateway = aws.ec2.InternetGateway(
            f"{c}-igw", vpc_id=vpc.id, tags=tags("igw"), opts=child
        )
        public = aws.ec2.Subnet(
            f"{c}-public",
            vpc_id=vpc.id,
            cidr_block=args.plan.public,
            availability_zone=args.availability_zone,
            tags=tags("public"),
            opts=child,
        )
        private = aws.ec2.Subnet(
            f"{c}-private",
            vpc_id=vpc.id,
            cidr_block=args.plan.private,
            availability_zone=args.availability_zone,
            tags=tags("private"),
            opts=child,
        )
        nat_ip = aws.ec2.Eip(
            f"{c}-nat",
            domain="vpc",
            tags=tags("nat"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.internet_gateway]),
        )
        nat = aws.ec2.NatGateway(
            f"{c}-nat",
            allocation_id=nat_ip.id,
            subnet_id=public.id,
            tags=tags("nat"),
            opts=child,
        )
        public_routes = aws.ec2.RouteTable(
            f"{c}-public",
            vpc_id=vpc.id,
            routes=[
                aws.ec2.RouteTableRouteArgs(
                    cidr_block="0.0.0.0/0", gateway_id=self.internet_gateway.id
                )
            ],
            tags=tags("public"),
            opts=child,
        )
        private_routes = aws.ec2.RouteTable(
            f"{c}-private",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=tags("private"),
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{c}-public", subnet_id=public.id, route_table_id=public_routes.id, opts=child
        )
        aws.ec2.RouteTableAssociation(
            f"{c}-private", subnet_id=private.id, route_table_id=private_routes.id, opts=child
        )
        group = aws.ec2.SecurityGroup(
            f"{c}-nodes",
            vpc_id=vpc.id,
            description=f"Myriad cluster {c}: every node",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="-1",
                    from_port=0,
                    to_port=0,
                    self=True,
                    description="all traffic between cluster nodes (EFA requires it)",
                ),
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=22,
                    to_port=22,
                    cidr_blocks=[args.admin_cidr],
                    description="SSH from the admin network",
                ),
            ],
            egress=[
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1",
                    from_port=0,
                    to_port=0,
                    self=True,
                    description="all traffic between cluster nodes (EFA requires it)",
                ),
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1",
                    from_port=0,
                    to_port=0,
                    cidr_blocks=["0.0.0.0/0"],
                    description="outbound: package mirrors and registries",
                ),
            ],
            tags=tags("nodes"),
            opts=child,
        )
        self.vpc_id = vpc.id
        self.public_subnet_id = public.id
        self.private_subnet_id = private.id
        self.security_group_id = group.id
        self.register_outputs(self.refs().as_output())

    def refs(self) -> NetworkRefs:
        return NetworkRefs(
            self.vpc_id, self.public_subnet_id, self.private_subnet_id, self.security_group_id
        )


@dataclass(frozen=True)
class NetworkRefs:
    """The network's ids, from this stack's AwsNetwork or the shared stack's `network` output."""

    vpc_id: pulumi.Input[str]
    public_subnet_id: pulumi.Input[str]
    private_subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]

    def as_output(self) -> dict[str, pulumi.Input[str]]:
        return {
            "vpc_id": self.vpc_id,
            "public_subnet_id": self.public_subnet_id,
            "private_subnet_id": self.private_subnet_id,
            "security_group_id": self.security_group_id,
        }

    @classmethod
    def from_stack(cls, stack: str) -> NetworkRefs:
        network = pulumi.StackReference(stack).require_output("network")

        def field(key: str) -> pulumi.Output[str]:
            def pick(value: Any) -> str:
                if not isinstance(value, Mapping) or not isinstance(value.get(key), str):
                    raise StackError(f"stack {stack} exports no network.{key}; run it first")
                return value[key]

            return network.apply(pick)

        return cls(
            field("vpc_id"),
            field("public_subnet_id"),
            field("private_subnet_id"),
            field("security_group_id"),
        )


def user_data(cluster: str, node: NodeRecord, ssh_keys: Sequence[str]) -> str:
    """cloud-init for one node: its name, keys and identity. Public facts only, never secrets."""
    identity = {
        "cluster": cluster,
        "name": node.name,
        "pool": node.pool,
        "role": node.role,
        "island": node.island,
    }
    document: dict[str, Any] = {
        "hostname": node.name,
        "preserve_hostname": False,
        "write_files": [
            {
                "path": "/etc/myriad/node.json",
                "permissions": "0644",
                "content": json.dumps(identity, sort_keys=True) + "\n",
            }
        ],
    }
    if ssh_keys:
        document["ssh_authorized_keys"] = list(ssh_keys)
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=True)


@dataclass(frozen=True)
class AwsNodePoolArgs:
    cluster: str
    pool: Pool
    nodes: tuple[NodeRecord, ...]
    instance: InstanceType
    os: str
    root_volume_gib: int
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    placement_groups: Mapping[int, pulumi.Input[str]]
    public: bool = False
    key_name: str | None = None
    capacity_reservation_id: str | None = None
    ssh_authorized_keys: tuple[str, ...] = ()
    public_depends_on: tuple[pulumi.Resource, ...] = ()


def network_interfaces(
    efa: int, subnet_id: pulumi.Input[str], security_group_id: pulumi.Input[str]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """An ENA primary interface plus one EFA-only interface per network card.

    The layout the EC2 guide recommends: primary ENA at card 0 / device 0, EFA-only at card 0 /
    device 1, then EFA-only at device 0 of each further card. EFA-only interfaces take no IP
    address, so a p5 uses one address of the subnet, not 33.
    """
    common: dict[str, Any] = {
        "subnet_id": subnet_id,
        "security_groups": [security_group_id],
        "delete_on_termination": "true",
    }
    interfaces = [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(network_card_index=0, device_index=0, **common)
    ]
    interfaces += [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=1 if card == 0 else 0,
            interface_type="efa-only",
            **common,
        )
        for card in range(efa)
    ]
    return interfaces


class AwsNodePool(pulumi.ComponentResource):
    """One pool's launch template and its instances (and Elastic IPs, for a public pool)."""

    records: list[dict[str, pulumi.Input[Any]]]

    def __init__(
        self, name: str, args: AwsNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:aws:NodePool", name, None, opts)
        c, pool = args.cluster, args.pool
        pool_tags = cluster_tags(c, **{TAG_POOL: pool.name, TAG_ROLE: pool.role})
        image, root_device = IMAGES[args.os]
        reservation = None
        if args.capacity_reservation_id and pool.role == "compute":
            reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=args.capacity_reservation_id
                )
            )
        template = aws.ec2.LaunchTemplate(
            f"{c}-{pool.name}",
            image_id=image,
            instance_type=args.instance.name,
            key_name=args.key_name,
            ebs_optimized="true",
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=root_device,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            network_interfaces=network_interfaces(
                args.instance.efa_interfaces, args.subnet_id, args.security_group_id
            ),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            capacity_reservation_specification=reservation,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=pool_tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            update_default_version=True,
            tags=pool_tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.records = []
        for node in args.nodes:
            tags = {**pool_tags, "Name": node.name}
            if node.island is not None:
                tags[TAG_ISLAND] = str(node.island)
            instance = aws.ec2.Instance(
                f"{c}-{node.name}",
                launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                    id=template.id, version=template.latest_version.apply(str)
                ),
                placement_group=(
                    args.placement_groups[node.island] if node.island is not None else None
                ),
                user_data=user_data(c, node, args.ssh_authorized_keys),
                tags=tags,
                volume_tags=tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            public_address: pulumi.Input[str] | None = None
            if args.public:
                address = aws.ec2.Eip(
                    f"{c}-{node.name}",
                    domain="vpc",
                    network_interface=instance.primary_network_interface_id,
                    tags=tags,
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=list(args.public_depends_on)
                    ),
                )
                public_address = address.public_ip
            self.records.append(
                node_record(
                    node,
                    provider="aws",
                    address=instance.private_ip,
                    ids={"instance_id": instance.id, "instance_type": args.instance.name},
                    public_address=public_address,
                )
            )
        self.register_outputs({"instances": len(self.records)})


@dataclass(frozen=True)
class AwsClusterArgs:
    spec: Cluster
    scope: StackScope
    settings: StackSettings
    network: NetworkPlan
    types: Mapping[str, InstanceType]

    @classmethod
    def checked(cls, spec: Cluster, scope: StackScope, settings: StackSettings) -> AwsClusterArgs:
        """Every check of the spec and config, before anything is created."""
        if spec.software.os not in IMAGES:
            raise StackError(f"no AWS image for software.os {spec.software.os}")
        if not scope.holds_shared and not settings.shared_stack:
            raise StackError(
                f"{NAMESPACE}:sharedStack is not set: an island stack uses the network of the "
                f"stack without {NAMESPACE}:island (set it with `pulumi config set "
                f"{NAMESPACE}:sharedStack <org>/myriad/<env>`)"
            )
        check_overrides(spec)
        pools = {pool.name: pool for pool in spec.pools}
        types = {name: instance_type(spec, pools[name].profile) for name in _pool_names(scope)}
        return cls(spec, scope, settings, NetworkPlan.for_spec(spec), types)


class AwsCluster(pulumi.ComponentResource):
    """Everything one stack holds of an AWS cluster."""

    records: list[dict[str, pulumi.Input[Any]]]
    network: NetworkRefs

    def __init__(
        self, name: str, args: AwsClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:aws:Cluster", name, None, opts)
        spec, scope, settings = args.spec, args.scope, args.settings
        c = spec.metadata.name
        provider = spec.provider
        pools = {pool.name: pool for pool in spec.pools}
        assert provider.admin_cidr is not None  # the spec model requires it for kind aws

        public_depends_on: tuple[pulumi.Resource, ...] = ()
        if scope.holds_shared:
            network = AwsNetwork(
                f"{c}-network",
                AwsNetworkArgs(c, args.network, provider.admin_cidr, provider.availability_zone),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.network = network.refs()
            public_depends_on = (network.internet_gateway,)
        else:
            assert settings.shared_stack is not None  # AwsClusterArgs.checked requires it
            self.network = NetworkRefs.from_stack(settings.shared_stack)

        island_numbers = sorted({n.island for n in scope.nodes if n.island is not None})
        placement = {
            island: aws.ec2.PlacementGroup(
                f"{c}-island-{island}",
                strategy="cluster",
                tags=cluster_tags(c, **{TAG_ISLAND: str(island)}),
                opts=pulumi.ResourceOptions(parent=self),
            ).name
            for island in island_numbers
        }

        self.records = []
        for pool_name, nodes in _nodes_by_pool(scope).items():
            pool = pools[pool_name]
            public = pool.role == "login"
            node_pool = AwsNodePool(
                f"{c}-{pool_name}",
                AwsNodePoolArgs(
                    cluster=c,
                    pool=pool,
                    nodes=nodes,
                    instance=args.types[pool_name],
                    os=spec.software.os,
                    root_volume_gib=provider.root_volume_gib,
                    subnet_id=(
                        self.network.public_subnet_id if public else self.network.private_subnet_id
                    ),
                    security_group_id=self.network.security_group_id,
                    placement_groups=placement,
                    public=public,
                    key_name=provider.ssh_key_name,
                    capacity_reservation_id=provider.capacity_reservation_id,
                    ssh_authorized_keys=settings.ssh_authorized_keys,
                    public_depends_on=public_depends_on,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.records.extend(node_pool.records)
        self.register_outputs({"nodes": len(self.records)})


def _nodes_by_pool(scope: StackScope) -> dict[str, tuple[NodeRecord, ...]]:
    grouped: dict[str, list[NodeRecord]] = {}
    for node in scope.nodes:
        grouped.setdefault(node.pool, []).append(node)
    return {pool: tuple(nodes) for pool, nodes in grouped.items()}


def _pool_names(scope: StackScope) -> list[str]:
    return list(dict.fromkeys(node.pool for node in scope.nodes))


def build(spec: Cluster, scope: StackScope, settings: StackSettings) -> ProviderResult:
    assert spec.provider.region is not None  # the spec model requires it for kind aws
    args = AwsClusterArgs.checked(spec, scope, settings)
    # An explicit provider: the region is the spec's, never whatever the shell has configured.
    region = aws.Provider("aws", region=spec.provider.region)
    cluster = AwsCluster(
        spec.metadata.name,
        args,
        opts=pulumi.ResourceOptions(providers=[region]),
    )
    outputs: dict[str, pulumi.Input[Any]] = {}
    if scope.holds_shared:
        outputs["network"] = cluster.network.as_output()
    return ProviderResult(nodes=all_records(cluster.records), outputs=outputs)
