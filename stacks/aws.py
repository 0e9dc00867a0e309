"""AWS: a VPC for the cluster in one zone (by zone ID), compute islands launched as one EC2
Fleet request each into a cluster placement group, the other nodes one instance each.

Order of events in `build`:
1. every check of the spec and config (`AwsClusterArgs.checked`), then the account-side
   preflight (`stacks.aws_preflight`: zone, instance type offerings, vCPU quotas, the capacity
   reservation) — a failure here stops the run before any resource exists;
2. the free parts of the network (VPC, subnets, route tables, security group, S3 gateway
   endpoint, instance role and profile) and one launch template per pool (per pool and
   island for compute);
3. the compute fleets, all-or-nothing (`min_target_capacity` = the island's size: EC2 launches
   the whole island or nothing), and each fleet's instance set checked against its island;
4. only then what bills by the hour without compute: the NAT gateway and its Elastic IP, the
   private subnet's default route, FSx for Lustre, and the controller, login and storage
   instances. They depend on the *checked* instance sets, not only on the fleets: the
   provider does not read CreateFleet's errors, and a Capacity Block fleet "will fulfill as
   much capacity as it can" (EC2 User Guide, "Use EC2 Fleet with Capacity Blocks"), so a
   short or empty fleet is a created resource; its check fails and nothing that bills is
   registered after it. A capacity error at step 3 therefore leaves only free resources
   behind (VPC, subnets, route tables, security group, endpoint, IAM, templates, placement
   groups); `pulumi destroy` or a later `pulumi up` deals with them.

Lifecycle: instances and fleets are `protect`ed (stack config `protectNodes`) and replaced
delete-before-create (a reservation sized to the cluster has no room for a second copy).
Nothing is in `ignore_changes`: Pulumi rebuilds an ignored property from the old state, also
for a replacement, so a relaunch would keep the old template version and island size. What
keeps a running node from following every template edit instead is the version it names:
each machine launches with the version `myriad:templateVersions.<node or island-n>` pins (1
unless set), never the template's latest. A template edit is then one diff (the template's
new version); setting the pin is the second, intended one: the machine's replacement with the
new inputs (`replace_on_changes`, since EC2 modifies only fleets of type maintain). An
island's size is an input too: a resized island is replaced whole. A new value under
`myriad:replace.<node>` (or `.island-<n>`) relaunches with the same inputs
(`replacement_trigger`); a token naming a single compute node is refused (an island is one
fleet request).
"""

from __future__ import annotations

import base64
import ipaddress
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.provision.aws_release import IslandRelease
from myriad.spec.models import Cluster, Pool
from stacks.aws_images import (
    AwsImages,
    AwsImagesArgs,
    SeedSource,
    image_refs_from_stack,
    instance_arn_prefix,
    load_kits,
    seed_cloud_config,
    upload_seed,
)
from stacks.aws_preflight import (
    CAPACITY_BLOCK_MAX_INSTANCES,
    TAG_CLUSTER,
    TAG_ISLAND,
    TAG_POOL,
    TAG_ROLE,
    AwsLookups,
    Preflight,
    PulumiLookups,
    Reservation,
    island_reservation,
    preflight,
)
from stacks.instance_types import InstanceType, check_overrides, instance_type
from stacks.interface import ProviderResult, StackError, all_records, node_record
from stacks.settings import NAMESPACE, StackSettings
from stacks.sharding import StackScope

# The AMI is resolved at launch from an SSM parameter, so a newer image does not churn the
# stack; the root device name is the one those images use.
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
# AWS Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu): NVIDIA driver, CUDA, the EFA
# installer, libfabric and aws-ofi-nccl preinstalled (AWS Deep Learning AMI Developer Guide,
# "DLAMI release notes", the SSM parameter of each base AMI). Only for GPU pools.
DLAMI_IMAGES: Mapping[str, tuple[str, str]] = {
    "ubuntu-22.04": (
        "resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
        "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
        "/dev/sda1",
    ),
    "ubuntu-24.04": (
        "resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
        "base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
        "/dev/sda1",
    ),
}
_AWS_RESERVED_PER_SUBNET = 5
# What replaces a machine rather than updating it: its template (id and pinned version) and,
# for a fleet, its size and options. The provider would send a fleet's changes to
# ModifyFleet, which takes only fleets of type maintain (EC2 API Reference, "ModifyFleet"),
# and an instance launched from another template version is another instance.
NODE_REPLACE_ON_CHANGES = ["launchTemplate"]
FLEET_REPLACE_ON_CHANGES = [
    "launchTemplateConfigs",
    "targetCapacitySpecification",
    "onDemandOptions",
]


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
    region: str
    plan: NetworkPlan
    admin_cidr: str
    zone_id: str


class AwsNetwork(pulumi.ComponentResource):
    """The cluster-wide, free parts: VPC, subnets, routes, security group, S3 endpoint, IAM.

    The NAT gateway is added by `add_nat` once the compute fleets exist (see the module doc).
    """

    vpc_id: pulumi.Output[str]
    public_subnet_id: pulumi.Output[str]
    private_subnet_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    instance_profile: pulumi.Output[str]

    def __init__(
        self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:aws:Network", name, None, opts)
        self.args = args
        child = pulumi.ResourceOptions(parent=self)
        c = args.cluster

        vpc = aws.ec2.Vpc(
            f"{c}-vpc",
            cidr_block=args.plan.vpc,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self.tags("vpc"),
            opts=child,
        )
        self.internet_gateway = aws.ec2.InternetGateway(
            f"{c}-igw", vpc_id=vpc.id, tags=self.tags("igw"), opts=child
        )
        # By zone ID: a zone name means a different physical zone in each account, and a
        # capacity reservation lives in one physical zone.
        public = aws.ec2.Subnet(
            f"{c}-public",
            vpc_id=vpc.id,
            cidr_block=args.plan.public,
            availability_zone_id=args.zone_id,
            tags=self.tags("public"),
            opts=child,
        )
        private = aws.ec2.Subnet(
            f"{c}-private",
            vpc_id=vpc.id,
            cidr_block=args.plan.private,
            availability_zone_id=args.zone_id,
            tags=self.tags("private"),
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
            tags=self.tags("public"),
            opts=child,
        )
        # No inline routes: the default route through the NAT gateway is its own resource,
        # created after the compute fleets (`add_nat`).
        self.private_routes = aws.ec2.RouteTable(
            f"{c}-private", vpc_id=vpc.id, tags=self.tags("private"), opts=child
        )
        aws.ec2.RouteTableAssociation(
            f"{c}-public", subnet_id=public.id, route_table_id=public_routes.id, opts=child
        )
        aws.ec2.RouteTableAssociation(
            f"{c}-private", subnet_id=private.id, route_table_id=self.private_routes.id, opts=child
        )
        # S3 through a gateway endpoint: free, and checkpoints and datasets do not pay NAT
        # gateway processing per GB (Amazon VPC User Guide, "Gateway endpoints for Amazon S3").
        aws.ec2.VpcEndpoint(
            f"{c}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[public_routes.id, self.private_routes.id],
            tags=self.tags("s3"),
            opts=child,
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
            tags=self.tags("nodes"),
            opts=child,
        )
        # The nodes' identity: Systems Manager (Session Manager, patching) and nothing else;
        # a site adds S3 access for its buckets to this role.
        role = aws.iam.Role(
            f"{c}-node",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "ec2.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
            tags=self.tags("node"),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{c}-node-ssm",
            role=role.name,
            policy_arn="arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
            opts=child,
        )
        profile = aws.iam.InstanceProfile(
            f"{c}-node", role=role.name, tags=self.tags("node"), opts=child
        )
        self.vpc_id = vpc.id
        self.public_subnet_id = public.id
        self.private_subnet_id = private.id
        self.security_group_id = group.id
        self.instance_profile = profile.name
        self.node_role = role.name
        self.register_outputs(self.refs().as_output())

    def tags(self, name: str) -> dict[str, str]:
        return cluster_tags(self.args.cluster, Name=f"{self.args.cluster}-{name}")

    def add_nat(self, after: Sequence[pulumi.Input[pulumi.Resource]]) -> aws.ec2.Route:
        """The NAT gateway, its address and the private default route, after `after`."""
        c = self.args.cluster
        nat_ip = aws.ec2.Eip(
            f"{c}-nat",
            domain="vpc",
            tags=self.tags("nat"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.internet_gateway, *after]),
        )
        nat = aws.ec2.NatGateway(
            f"{c}-nat",
            allocation_id=nat_ip.id,
            subnet_id=self.public_subnet_id,
            tags=self.tags("nat"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.ec2.Route(
            f"{c}-private-default",
            route_table_id=self.private_routes.id,
            destination_cidr_block="0.0.0.0/0",
            nat_gateway_id=nat.id,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def refs(self) -> NetworkRefs:
        return NetworkRefs(
            self.vpc_id,
            self.public_subnet_id,
            self.private_subnet_id,
            self.security_group_id,
            self.instance_profile,
        )


@dataclass(frozen=True)
class NetworkRefs:
    """The network's ids, from this stack's AwsNetwork or the shared stack's `network` output."""

    vpc_id: pulumi.Input[str]
    public_subnet_id: pulumi.Input[str]
    private_subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    instance_profile: pulumi.Input[str]

    def as_output(self) -> dict[str, pulumi.Input[str]]:
        return {
            "vpc_id": self.vpc_id,
            "public_subnet_id": self.public_subnet_id,
            "private_subnet_id": self.private_subnet_id,
            "security_group_id": self.security_group_id,
            "instance_profile": self.instance_profile,
        }

    @classmethod
    def from_stack(cls, stack: str) -> NetworkRefs:
        network = pulumi.StackReference(stack).require_output("network")

        def field(key: str) -> pulumi.Output[str]:
            def pick(value: Any) -> str:
                if not isinstance(value, Mapping) or not isinstance(value.get(key), str):
                    raise StackError(f"stack {stack} exports no network.{key}; run it first")
                return str(value[key])

            return network.apply(pick)

        return cls(
            field("vpc_id"),
            field("public_subnet_id"),
            field("private_subnet_id"),
            field("security_group_id"),
            field("instance_profile"),
        )


def user_data(
    cluster: str,
    ssh_keys: Sequence[str],
    node: NodeRecord | None = None,
    pool: str = "",
    seed: tuple[str, str, str] | None = None,
    imds_root_only: bool = False,
) -> str:
    """cloud-init: the node's (or, for a fleet, the pool's) identity and keys; never secrets.

    A fleet launches identical instances, so island nodes carry no host name here: the stack
    names them (by instance ID order, see `fleet_records`) and the bring-up sets the name.
    `seed` (image mode: the bucket, region and instance ARN prefix) adds the unit that fetches
    the node's seed and starts myriad-converge (stacks/aws_images.py). `imds_root_only`
    (login nodes, where users have shells) lets only root reach instance metadata, at every
    boot: the node role's credentials come from there, and with them the node's own seed in
    S3 (the role reads no other node's; `IMDS_ROOT_ONLY`).
    """
    identity: dict[str, Any] = {"cluster": cluster}
    document: dict[str, Any] = {}
    if node is not None:
        identity.update(name=node.name, pool=node.pool, role=node.role, island=node.island)
        document.update(hostname=node.name, preserve_hostname=False)
    else:
        identity["pool"] = pool
    document["write_files"] = [
        {
            "path": "/etc/myriad/node.json",
            "permissions": "0644",
            "content": json.dumps(identity, sort_keys=True) + "\n",
        }
    ]
    if ssh_keys:
        document["ssh_authorized_keys"] = list(ssh_keys)
    if seed is not None:
        fetch = seed_cloud_config(*seed)
        document["write_files"] += fetch["write_files"]
        document["runcmd"] = fetch["runcmd"]
    if imds_root_only:
        # bootcmd runs early at every boot, before users can log in and before runcmd.
        document["bootcmd"] = [IMDS_ROOT_ONLY]
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=True)


# The EC2 User Guide's way to limit the instance metadata service to some users ("Limit
# access to the instance metadata service": an iptables OUTPUT rule on 169.254.169.254
# rejecting every owner but root), added once (-C checks first), nft where iptables is absent.
IMDS_ROOT_ONLY = (
    "if command -v iptables >/dev/null; then "
    "iptables -w -C OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT 2>/dev/null "
    "|| iptables -w -A OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT; "
    "else nft add table inet myriad_imds && nft add chain inet myriad_imds out "
    "'{ type filter hook output priority 0; }' && nft add rule inet myriad_imds out "
    "ip daddr 169.254.169.254 meta skuid != 0 reject; fi"
)


def network_interfaces(
    efa: int, subnet_id: pulumi.Input[str], security_group_id: pulumi.Input[str]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """An ENA primary interface plus one EFA-only interface per network card.

    The layout the EC2 guide recommends ("Maximize network bandwidth on Amazon EC2 instances
    with multiple network cards"): primary ENA at card 0 / device 0, EFA-only at card 0 /
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


@dataclass(frozen=True)
class Capacity:
    """How compute nodes get their capacity: the spec's market and, for reservations, where."""

    market: str = "on-demand"
    reservation_id: str | None = None
    # A targeted On-Demand Capacity Reservation reaches EC2 Fleet through a resource group
    # (EC2 User Guide, "Use EC2 Fleet with targeted On-Demand Capacity Reservations").
    resource_group_arn: pulumi.Input[str] | None = None

    def template_options(self) -> dict[str, Any]:
        if self.market == "on-demand":
            return {}
        if self.market == "capacity-reservation" and self.resource_group_arn is None:
            # The reservation is gone (its nodes run on as On-Demand instances): nothing to
            # target; the fleet keeps its options (`fleet_options` depends on the market only).
            return {}
        target_args = (
            aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs
        )
        target = (
            target_args(capacity_reservation_resource_group_arn=self.resource_group_arn)
            if self.market == "capacity-reservation"
            else target_args(capacity_reservation_id=self.reservation_id)
        )
        options: dict[str, Any] = {
            "capacity_reservation_specification": (
                aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                    capacity_reservation_target=target
                )
            )
        }
        if self.market == "capacity-block":
            # EC2 User Guide, "Launch instances into Capacity Blocks": market type
            # capacity-block plus the block as the reservation target.
            options["instance_market_options"] = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
                market_type="capacity-block"
            )
        return options

    def fleet_options(self, count: int) -> dict[str, Any]:
        on_demand: dict[str, Any] = {
            # All or nothing: EC2 launches the island whole or not at all.
            "min_target_capacity": count,
            "single_availability_zone": True,
            "single_instance_type": True,
        }
        if self.market == "capacity-reservation":
            on_demand["capacity_reservation_options"] = (
                aws.ec2.FleetOnDemandOptionsCapacityReservationOptionsArgs(
                    usage_strategy="use-capacity-reservations-first"
                )
            )
        return {
            "target_capacity_specification": aws.ec2.FleetTargetCapacitySpecificationArgs(
                default_target_capacity_type=(
                    "capacity-block" if self.market == "capacity-block" else "on-demand"
                ),
                total_target_capacity=count,
            ),
            "on_demand_options": aws.ec2.FleetOnDemandOptionsArgs(**on_demand),
        }


@dataclass(frozen=True)
class AwsNodePoolArgs:
    cluster: str
    region: str
    pool: Pool
    nodes: tuple[NodeRecord, ...]
    instance: InstanceType
    # The AMI (an SSM reference, or image mode's built AMI ID) and its root device.
    image: tuple[pulumi.Input[str], str]
    root_volume_gib: int
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    instance_profile: pulumi.Input[str]
    placement_groups: Mapping[int, pulumi.Input[str]]
    # Each compute island's capacity (its market and reservation).
    capacity: Mapping[int, Capacity] = field(default_factory=dict)
    public: bool = False
    key_name: str | None = None
    ssh_authorized_keys: tuple[str, ...] = ()
    replace: Mapping[str, str] = field(default_factory=dict)
    # node name or island-<n> -> the launch template version it launches with (default 1).
    template_versions: Mapping[str, int] = field(default_factory=dict)
    protect: bool = True
    # What the machines wait for: the compute fleets' checked instance sets (an Output of a
    # resource that resolves only when the fleet launched its whole island).
    depends_on: tuple[pulumi.Input[pulumi.Resource], ...] = ()
    public_depends_on: tuple[pulumi.Resource, ...] = ()
    # Image mode: where the pool's nodes fetch their seeds.
    seed: SeedSource | None = None


class AwsNodePool(pulumi.ComponentResource):
    """One pool: compute islands as one instant EC2 Fleet each, other nodes one instance each.

    `checked` holds each fleet once its instance set is checked (an Output that fails when
    the fleet launched fewer instances than its island has), for billing resources to wait on.
    """

    records: list[dict[str, pulumi.Input[Any]]]
    fleets: list[aws.ec2.Fleet]
    checked: list[pulumi.Output[pulumi.Resource]]

    def __init__(
        self, name: str, args: AwsNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:aws:NodePool", name, None, opts)
        self.args = args
        self.records = []
        self.fleets = []
        self.checked = []
        c, pool = args.cluster, args.pool
        self.pool_tags = cluster_tags(c, **{TAG_POOL: pool.name, TAG_ROLE: pool.role})
        if pool.role == "compute":
            islands: dict[int, list[NodeRecord]] = {}
            for node in args.nodes:
                assert node.island is not None  # iter_nodes numbers every compute node
                islands.setdefault(node.island, []).append(node)
            for island, nodes in islands.items():
                self._island(island, tuple(nodes))
        else:
            # One template per node: its cloud-init (host name, identity) is in the template,
            # so the instance names a template version and nothing else that can drift.
            for node in args.nodes:
                tags = {**self.pool_tags, "Name": node.name}
                self._instance(node, self._template(f"{c}-{node.name}", tags, None, node))
        self.register_outputs({"instances": len(self.records)})

    def _template(
        self, name: str, tags: dict[str, str], island: int | None, node: NodeRecord | None = None
    ) -> aws.ec2.LaunchTemplate:
        args = self.args
        image, root_device = args.image
        capacity = args.capacity[island].template_options() if island is not None else {}
        placement = (
            aws.ec2.LaunchTemplatePlacementArgs(group_name=args.placement_groups[island])
            if island is not None
            else None
        )
        # A fleet cannot pass per-instance user data, so an island's template carries the
        # pool's; a node's template carries the node's.
        data = self._user_data(node).apply(lambda text: base64.b64encode(text.encode()).decode())
        return aws.ec2.LaunchTemplate(
            name,
            image_id=image,
            instance_type=args.instance.name,
            key_name=args.key_name,
            ebs_optimized="true",
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(
                name=args.instance_profile
            ),
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
            placement=placement,
            user_data=data,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            # Each change is a new version; nothing follows $Latest or $Default. Instances and
            # fleets name the version myriad:templateVersions pins (see the module doc).
            update_default_version=False,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
            **capacity,
        )

    def _user_data(self, node: NodeRecord | None) -> pulumi.Output[str]:
        args = self.args
        keys, pool = args.ssh_authorized_keys, args.pool.name
        root_only = args.pool.role == "login"
        if args.seed is None:
            return pulumi.Output.from_input(
                user_data(args.cluster, keys, node, pool=pool, imds_root_only=root_only)
            )
        region = args.seed.region
        return pulumi.Output.all(args.seed.bucket, args.seed.arn_prefix).apply(
            lambda found: user_data(
                args.cluster,
                keys,
                node,
                pool=pool,
                seed=(found[0], region, found[1]),
                imds_root_only=root_only,
            )
        )

    def _seed(self, node: NodeRecord, instance_id: pulumi.Input[str]) -> None:
        if self.args.seed is not None:
            name = f"{self.args.cluster}-{node.name}"
            upload_seed(name, node.name, instance_id, self.args.seed, parent=self)

    def _guarded(
        self, key: str, depends_on: Sequence[pulumi.Input[pulumi.Resource]]
    ) -> dict[str, Any]:
        return {
            "parent": self,
            "protect": self.args.protect,
            "delete_before_replace": True,
            "replacement_trigger": self.args.replace.get(key),
            "depends_on": list(depends_on),
        }

    def _template_version(self, key: str, template: aws.ec2.LaunchTemplate) -> pulumi.Output[str]:
        """The template version `key` launches with: the pinned one, once the template has it."""
        pinned = self.args.template_versions.get(key, 1)
        what = f"{NAMESPACE}:templateVersions.{key}"

        def check(latest: int) -> str:
            if pinned > latest:
                raise StackError(
                    f"{what} is {pinned}, but the launch template of {key} has versions 1 to "
                    f"{latest}; pin one of them"
                )
            return str(pinned)

        return template.latest_version.apply(check)

    def _island(self, island: int, nodes: tuple[NodeRecord, ...]) -> None:
        args = self.args
        c, pool = args.cluster, args.pool
        tags = {**self.pool_tags, TAG_ISLAND: str(island), "Name": f"{c}-{pool.name}-{island}"}
        template = self._template(f"{c}-{pool.name}-island-{island}", tags, island)
        key = f"island-{island}"
        fleet = aws.ec2.Fleet(
            f"{c}-{pool.name}-island-{island}",
            type="instant",
            launch_template_configs=[
                aws.ec2.FleetLaunchTemplateConfigArgs(
                    launch_template_specification=(
                        aws.ec2.FleetLaunchTemplateConfigLaunchTemplateSpecificationArgs(
                            launch_template_id=template.id,
                            version=self._template_version(key, template),
                        )
                    ),
                    overrides=[
                        aws.ec2.FleetLaunchTemplateConfigOverrideArgs(
                            subnet_id=args.subnet_id, instance_type=args.instance.name
                        )
                    ],
                )
            ],
            terminate_instances=True,
            tags=tags,
            opts=pulumi.ResourceOptions(
                replace_on_changes=FLEET_REPLACE_ON_CHANGES, **self._guarded(key, args.depends_on)
            ),
            **args.capacity[island].fleet_options(len(nodes)),
        )
        self.fleets.append(fleet)
        what = f"{c} island {island} ({key})"
        ids: pulumi.Output[list[str]] = fleet.fleet_instance_sets.apply(
            lambda sets: fleet_instance_ids(sets, nodes, what)
        )
        self.checked.append(ids.apply(lambda _: fleet))
        # Before a replacement fleet is created, the old island's instances must be gone and
        # their reservation places back (myriad.provision.aws_release); the release depends
        # on the fleet, so the engine deletes it, and waits, before deleting the fleet.
        IslandRelease(
            f"{c}-{pool.name}-island-{island}-release",
            region=args.region,
            fleet_id=fleet.id,
            instance_ids=ids,
            reservation_id=args.capacity[island].reservation_id,
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect,
                delete_before_replace=True,
                replacement_trigger=args.replace.get(key),
                depends_on=[fleet],
            ),
        )
        for index, node in enumerate(nodes):
            instance_id: pulumi.Output[str] = ids.apply(_pick(index))
            self._seed(node, instance_id)
            address: pulumi.Output[str] = instance_id.apply(_private_ip_in(args.region))
            self.records.append(
                node_record(
                    node,
                    provider="aws",
                    address=address,
                    ids={
                        "instance_id": instance_id,
                        "instance_type": args.instance.name,
                        "fleet_id": fleet.id,
                    },
                )
            )

    def _instance(self, node: NodeRecord, template: aws.ec2.LaunchTemplate) -> None:
        args = self.args
        c = args.cluster
        tags = {**self.pool_tags, "Name": node.name}
        instance = aws.ec2.Instance(
            f"{c}-{node.name}",
            launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                id=template.id, version=self._template_version(node.name, template)
            ),
            iam_instance_profile=args.instance_profile,
            tags=tags,
            volume_tags=tags,
            opts=pulumi.ResourceOptions(
                replace_on_changes=NODE_REPLACE_ON_CHANGES,
                **self._guarded(node.name, args.depends_on),
            ),
        )
        self._seed(node, instance.id)
        public_address: pulumi.Input[str] | None = None
        if args.public:
            address = aws.ec2.Eip(
                f"{c}-{node.name}",
                domain="vpc",
                network_interface=instance.primary_network_interface_id,
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.public_depends_on)),
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


def fleet_instance_ids(sets: Any, nodes: Sequence[NodeRecord], what: str) -> list[str]:
    """The fleet's instance IDs in the order that names them: sorted, first ID -> first node.

    An instant fleet's instance set is recorded once, at launch, so the names stay put.
    """
    found = sorted(
        instance_id
        for instance_set in sets or []
        for instance_id in (_get(instance_set, "instance_ids") or [])
    )
    if len(found) != len(nodes):
        key = what.split("(")[-1].rstrip(")")
        raise StackError(
            f"{what} launched {len(found)} instances, but the spec gives it {len(nodes)} nodes "
            f"(the reservation or the zone had no more); nothing that bills was created after "
            f"it. An island is launched whole: once there is capacity (`python -m "
            f"stacks.aws_check`), relaunch it with `pulumi config set --path "
            f"'{NAMESPACE}:replace.{key}' <new token>`, or give it fewer nodes"
        )
    return found


def _get(value: Any, key: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(key, value.get("instanceIds"))
    return getattr(value, key, None)


def _pick(index: int) -> Callable[[list[str]], str]:
    return lambda found: found[index]


def _private_ip_in(region: str) -> Callable[[str], pulumi.Output[str]]:
    """The private address of a fleet's instance, read once the instance exists."""

    def read(instance_id: str) -> pulumi.Output[str]:
        return aws.ec2.get_instance_output(instance_id=instance_id, region=region).private_ip

    return read


@dataclass(frozen=True)
class AwsClusterArgs:
    spec: Cluster
    scope: StackScope
    settings: StackSettings
    network: NetworkPlan
    types: Mapping[str, InstanceType]

    @classmethod
    def checked(cls, spec: Cluster, scope: StackScope, settings: StackSettings) -> AwsClusterArgs:
        """Every check of the spec and config, before anything is created or read."""
        if spec.software.os not in IMAGES:
            raise StackError(f"no AWS image for software.os {spec.software.os}")
        if spec.provider.image == "dlami" and spec.software.os not in DLAMI_IMAGES:
            raise StackError(
                f"provider.image dlami: AWS's GPU base AMI comes with "
                f"{' or '.join(DLAMI_IMAGES)}, not {spec.software.os}"
            )
        if not scope.holds_shared and not settings.shared_stack:
            raise StackError(
                f"{NAMESPACE}:sharedStack is not set: an island stack uses the network of the "
                f"stack without {NAMESPACE}:island (set it with `pulumi config set "
                f"{NAMESPACE}:sharedStack <org>/myriad/<env>`)"
            )
        check_overrides(spec)
        pools = {pool.name: pool for pool in spec.pools}
        types = {name: instance_type(spec, pools[name].profile) for name in _pool_names(scope)}
        compute_types = {types[n].name for n in types if pools[n].role == "compute"}
        if spec.provider.capacity.market != "on-demand" and len(compute_types) > 1:
            raise StackError(
                f"one capacity reservation holds one instance type, but the compute pools "
                f"run {', '.join(sorted(compute_types))}"
            )
        _check_machine_keys(scope, settings)
        _check_island_capacity(spec, scope)
        return cls(spec, scope, settings, NetworkPlan.for_spec(spec), types)


def _check_machine_keys(scope: StackScope, settings: StackSettings) -> None:
    """`replace` and `templateVersions` name machines: non-compute nodes, or whole islands."""
    islands: dict[str, str] = {}
    for node in scope.nodes:
        if node.island is not None:
            islands[node.name] = f"island-{node.island}"
    known = {n.name for n in scope.nodes if n.island is None} | set(islands.values())
    for key, names in (
        ("replace", settings.replace),
        ("templateVersions", settings.template_versions),
    ):
        compute = sorted(set(names) & set(islands))
        if compute:
            raise StackError(
                f"{NAMESPACE}:{key} names compute node {', '.join(compute)}; a compute island "
                f"is launched as one fleet request and relaunched whole: use "
                f"{', '.join(sorted({islands[n] for n in compute}))} instead (all of its nodes)"
            )
        unknown = sorted(set(names) - known)
        if unknown:
            raise StackError(
                f"{NAMESPACE}:{key} names {', '.join(unknown)}, which this stack does not "
                f"hold (nodes of other pools by name, compute islands as island-<n>)"
            )


def _check_island_capacity(spec: Cluster, scope: StackScope) -> None:
    """Each island has a reservation of its own market and, in a Capacity Block, fits one."""
    capacity = spec.provider.capacity
    if capacity.market == "on-demand":
        return
    all_islands = {f"island-{n.island}" for n in iter_nodes(spec) if n.island is not None}
    stray = sorted(set(capacity.island_reservations) - all_islands)
    if stray:
        raise StackError(
            f"provider.capacity.island_reservations names {', '.join(stray)}, but the spec's "
            f"compute islands are {', '.join(sorted(all_islands)) or 'none'}"
        )
    sizes: dict[int, int] = {}
    for node in scope.nodes:
        if node.island is not None:
            sizes[node.island] = sizes.get(node.island, 0) + 1
    problems = []
    for island, size in sorted(sizes.items()):
        if island_reservation(spec, island) is None:
            problems.append(
                f"island-{island} has no reservation: set provider.capacity.reservation_id or "
                f"island_reservations.island-{island}"
            )
        if capacity.market == "capacity-block" and size > CAPACITY_BLOCK_MAX_INSTANCES:
            problems.append(
                f"island-{island} has {size} nodes, but a Capacity Block holds at most "
                f"{CAPACITY_BLOCK_MAX_INSTANCES} instances and one fleet launches into one "
                f"block: set network.topology.island_nodes to {CAPACITY_BLOCK_MAX_INSTANCES} or "
                "less and give each island its block (island_reservations)"
            )
    if problems:
        raise StackError("\n".join(problems))


class AwsCluster(pulumi.ComponentResource):
    """Everything one stack holds of an AWS cluster."""

    records: list[dict[str, pulumi.Input[Any]]]
    network: NetworkRefs
    storage: dict[str, pulumi.Input[Any]] | None

    def __init__(
        self,
        name: str,
        args: AwsClusterArgs,
        checked: Preflight,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("myriad:aws:Cluster", name, None, opts)
        spec, scope, settings = args.spec, args.scope, args.settings
        c = spec.metadata.name
        provider = spec.provider
        pools = {pool.name: pool for pool in spec.pools}
        assert provider.admin_cidr is not None and provider.region is not None
        region = provider.region

        network: AwsNetwork | None = None
        public_depends_on: tuple[pulumi.Resource, ...] = ()
        if scope.holds_shared:
            network = AwsNetwork(
                f"{c}-network",
                AwsNetworkArgs(
                    c, provider.region, args.network, provider.admin_cidr, checked.zone.zone_id
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.network = network.refs()
            public_depends_on = (network.internet_gateway,)
        else:
            assert settings.shared_stack is not None  # AwsClusterArgs.checked requires it
            self.network = NetworkRefs.from_stack(settings.shared_stack)

        island_numbers = sorted({n.island for n in scope.nodes if n.island is not None})
        placement: dict[int, pulumi.Input[str]] = {}
        for island in island_numbers:
            reserved = checked.reservations.get(island)
            if reserved is not None and reserved.placement_group is not None:
                # A reservation made in a cluster placement group launches only into it.
                placement[island] = reserved.placement_group
                continue
            placement[island] = aws.ec2.PlacementGroup(
                f"{c}-island-{island}",
                strategy="cluster",
                tags=cluster_tags(c, **{TAG_ISLAND: str(island)}),
                opts=pulumi.ResourceOptions(parent=self),
            ).name
        groups: dict[str, Capacity] = {}
        capacity = {
            island: self._capacity(c, spec, island, checked.reservations.get(island), groups)
            for island in island_numbers
        }

        def base_image(profile: str) -> tuple[str, str]:
            gpu = spec.profiles[profile].gpu is not None
            images = DLAMI_IMAGES if provider.image == "dlami" and gpu else IMAGES
            return images[spec.software.os]

        # Image mode: the profiles with a build kit start from their own AMI
        # (stacks/aws_images.py). The build needs the NAT gateway, so it comes first then.
        kits = load_kits(spec, settings.state_dir / "images") if settings.state_dir else {}
        amis: Mapping[str, pulumi.Input[str]] = {}
        seed_bucket: pulumi.Input[str] | None = None
        nat_done = False
        self.images: dict[str, pulumi.Input[Any]] | None = None
        if kits and network is not None:
            route = network.add_nat(after=[])
            nat_done = True
            images = AwsImages(
                f"{c}-images",
                AwsImagesArgs(
                    cluster=c,
                    region=region,
                    kits=kits,
                    images_dir=settings.state_dir / "images" if settings.state_dir else Path(),
                    bases={profile: base_image(profile) for profile in kits},
                    root_volume_gib=provider.root_volume_gib,
                    subnet_id=self.network.private_subnet_id,
                    security_group_id=self.network.security_group_id,
                    node_role=network.node_role,
                    depends_on=(route,),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            amis, seed_bucket = images.amis, images.bucket
            self.images = {"amis": images.amis, "bucket": images.bucket}
        elif kits:
            assert settings.shared_stack is not None  # AwsClusterArgs.checked requires it
            shared_amis, seed_bucket = image_refs_from_stack(settings.shared_stack)
            amis = {profile: shared_amis.apply(_ami_of(profile)) for profile in kits}
        seeds_dir = settings.state_dir / "seeds" if settings.state_dir else None
        # Seeds are keyed by instance ARN, the name the node role's policy reads them by
        # (stacks/aws_images.py); the account and partition are the deploying identity's.
        arn_prefix: pulumi.Output[str] | None = None
        if kits:
            arn_prefix = aws.get_caller_identity_output().apply(
                lambda me: instance_arn_prefix(me.arn.split(":")[1], region, me.account_id)
            )

        def pool_args(
            pool_name: str, nodes: tuple[NodeRecord, ...], **extra: Any
        ) -> AwsNodePoolArgs:
            pool = pools[pool_name]
            public = pool.role == "login"
            image: tuple[pulumi.Input[str], str] = base_image(pool.profile)
            seed = None
            if pool.profile in amis and seed_bucket is not None and arn_prefix is not None:
                image = (amis[pool.profile], image[1])
                seed = SeedSource(seed_bucket, region, seeds_dir, arn_prefix)
            return AwsNodePoolArgs(
                cluster=c,
                region=region,
                pool=pool,
                nodes=nodes,
                instance=checked.types.get(pool_name, args.types[pool_name]),
                image=image,
                seed=seed,
                root_volume_gib=provider.root_volume_gib,
                subnet_id=(
                    self.network.public_subnet_id if public else self.network.private_subnet_id
                ),
                security_group_id=self.network.security_group_id,
                instance_profile=self.network.instance_profile,
                placement_groups=placement,
                capacity=capacity,
                public=public,
                key_name=provider.ssh_key_name,
                ssh_authorized_keys=settings.ssh_authorized_keys,
                replace=settings.replace,
                template_versions=settings.template_versions,
                protect=settings.protect_nodes,
                public_depends_on=public_depends_on,
                **extra,
            )

        by_pool = _nodes_by_pool(scope)
        self.records = []
        # The fleets once checked: each resolves only when its island launched whole.
        fleets: list[pulumi.Input[pulumi.Resource]] = []
        # Compute first: the scarce capacity. Everything that bills without it waits.
        for pool_name, nodes in by_pool.items():
            if pools[pool_name].role == "compute":
                node_pool = AwsNodePool(
                    f"{c}-{pool_name}",
                    pool_args(pool_name, nodes),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                fleets.extend(node_pool.checked)
                self.records.extend(node_pool.records)
        self.storage = None
        if network is not None and not nat_done:
            network.add_nat(after=fleets)
            if spec.storage.kind == "fsx-lustre":
                self.storage = self._fsx(c, spec, after=fleets, protect=settings.protect_storage)
        for pool_name, nodes in by_pool.items():
            if pools[pool_name].role != "compute":
                node_pool = AwsNodePool(
                    f"{c}-{pool_name}",
                    pool_args(pool_name, nodes, depends_on=tuple(fleets)),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                self.records.extend(node_pool.records)
        # Records in the spec's node order, whatever order the pools were built in.
        order = {n.name: i for i, n in enumerate(scope.nodes)}
        self.records.sort(key=lambda record: order[str(record["name"])])
        self.register_outputs({"nodes": len(self.records)})

    def _capacity(
        self,
        c: str,
        spec: Cluster,
        island: int,
        reservation: Reservation | None,
        groups: dict[str, Capacity],
    ) -> Capacity:
        """An island's capacity; one resource group per On-Demand Capacity Reservation."""
        market = spec.provider.capacity.market
        if market == "capacity-block":
            # By the spec's id, found or not: a block the preflight did not need to read (its
            # island runs) keeps the island's inputs as they were.
            return Capacity(market, island_reservation(spec, island))
        if market == "on-demand":
            return Capacity()
        if reservation is None:
            # Not found, and the preflight found every node of the island running: the
            # island's fleet keeps its inputs (a changed market would replace it).
            return Capacity(market, island_reservation(spec, island))
        if reservation.id in groups:
            return groups[reservation.id]
        # The cluster-wide reservation keeps the name it always had; an island's own gets its id.
        name = (
            f"{c}-capacity"
            if reservation.id == spec.provider.capacity.reservation_id
            else f"{c}-capacity-{reservation.id}"
        )
        group = aws.resourcegroups.Group(
            name,
            configurations=[
                aws.resourcegroups.GroupConfigurationArgs(type="AWS::EC2::CapacityReservationPool"),
                aws.resourcegroups.GroupConfigurationArgs(
                    type="AWS::ResourceGroups::Generic",
                    parameters=[
                        aws.resourcegroups.GroupConfigurationParameterArgs(
                            name="allowed-resource-types",
                            values=["AWS::EC2::CapacityReservation"],
                        )
                    ],
                ),
            ],
            tags=cluster_tags(c),
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.resourcegroups.Resource(
            name,
            group_arn=group.arn,
            resource_arn=reservation.arn,
            opts=pulumi.ResourceOptions(parent=self),
        )
        groups[reservation.id] = Capacity(market, reservation.id, group.arn)
        return groups[reservation.id]

    def _fsx(
        self,
        c: str,
        spec: Cluster,
        after: Sequence[pulumi.Input[pulumi.Resource]],
        protect: bool,
    ) -> dict[str, pulumi.Input[Any]]:
        fsx = spec.storage.fsx
        assert fsx is not None  # the spec model fills it for kind fsx-lustre
        persistent = fsx.deployment.startswith("PERSISTENT")
        lustre = aws.fsx.LustreFileSystem(
            f"{c}-lustre",
            storage_capacity=fsx.capacity_gib,
            deployment_type=fsx.deployment,
            per_unit_storage_throughput=fsx.throughput_mbps_per_tib if persistent else None,
            subnet_ids=self.network.private_subnet_id,
            security_group_ids=[self.network.security_group_id],
            file_system_type_version="2.15",
            tags=cluster_tags(c, Name=f"{c}-lustre"),
            # The file system holds data: never removed or replaced by a routine `up`, unless
            # the stack says so (myriad:protectStorage false, for a teardown).
            opts=pulumi.ResourceOptions(parent=self, protect=protect, depends_on=list(after)),
        )
        return {
            "kind": "fsx-lustre",
            "dns_name": lustre.dns_name,
            "mount_name": lustre.mount_name,
            "mount": spec.storage.mount,
        }


def _ami_of(profile: str) -> Callable[[Mapping[str, str]], str]:
    def pick(amis: Mapping[str, str]) -> str:
        if profile not in amis:
            raise StackError(f"the shared stack built no image of profile {profile}; run it first")
        return amis[profile]

    return pick


def _nodes_by_pool(scope: StackScope) -> dict[str, tuple[NodeRecord, ...]]:
    grouped: dict[str, list[NodeRecord]] = {}
    for node in scope.nodes:
        grouped.setdefault(node.pool, []).append(node)
    return {pool: tuple(nodes) for pool, nodes in grouped.items()}


def _pool_names(scope: StackScope) -> list[str]:
    return list(dict.fromkeys(node.pool for node in scope.nodes))


def build(
    spec: Cluster,
    scope: StackScope,
    settings: StackSettings,
    lookups: AwsLookups | None = None,
) -> ProviderResult:
    assert spec.provider.region is not None  # the spec model requires it for kind aws
    args = AwsClusterArgs.checked(spec, scope, settings)
    # Before any resource, including the provider: a refusal leaves nothing behind.
    checked = preflight(spec, scope, args.types, lookups or PulumiLookups(spec.provider.region))
    # An explicit provider: the region is the spec's, never whatever the shell has configured.
    region = aws.Provider("aws", region=spec.provider.region)
    cluster = AwsCluster(
        spec.metadata.name,
        args,
        checked,
        opts=pulumi.ResourceOptions(providers=[region]),
    )
    outputs: dict[str, pulumi.Input[Any]] = {}
    if scope.holds_shared:
        outputs["network"] = cluster.network.as_output()
    if cluster.storage is not None:
        outputs["storage"] = cluster.storage
    if cluster.images is not None:
        outputs["images"] = cluster.images
    return ProviderResult(nodes=all_records(cluster.records), outputs=outputs)
