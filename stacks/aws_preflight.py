"""The AWS preflight: the zone, the instance types it offers, the vCPU quotas and the capacity
reservation, read before the program registers a single resource.

A capacity, quota or zone problem found here stops `pulumi preview` and `pulumi up` before
anything exists, so no VPC or NAT gateway is left billing after it. Every problem is
reported at once. The reads go through `AwsLookups`, a small protocol: `PulumiLookups` is the
real one (pulumi_aws invoke functions, which `pulumi preview` runs too); tests pass their
own, or answer the invokes from Pulumi's mocks (`Mocks.call`).

Sources: Amazon EC2 User Guide, "Availability Zone IDs" (a zone name maps to a different
physical zone in each account, a zone ID does not), "Capacity Blocks for ML" and "On-Demand
Capacity Reservations" (an instance launches into a reservation only in the reservation's
zone, with its instance type); Service Quotas User Guide (EC2 On-Demand vCPU quotas by family,
see `stacks.instance_types`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.spec.models import Cluster
from stacks.instance_types import (
    QUOTA_NAMES,
    InstanceFacts,
    InstanceType,
    instance_type,
    with_facts,
)
from stacks.interface import StackError
from stacks.sharding import StackScope

Market = Literal["on-demand", "capacity-reservation", "capacity-block"]
# The reservation states an instance can launch into; a capacity block is "scheduled" until
# its start time and refuses launches until then.
_LAUNCHABLE = {"active"}
# The states of a reservation whose instances EC2 has terminated: "When a Capacity Block
# expires, all instances in the Capacity Block are terminated" (EC2 API Reference,
# "CapacityBlock", endDate).
_ENDED = {"expired", "cancelled", "failed"}
# "You can reserve up to 64 instances per Capacity Block" and a fleet request names one
# reservation (EC2 User Guide, "Capacity Blocks for ML", docs.aws.amazon.com/AWSEC2/latest/
# UserGuide/ec2-capacity-blocks.html; 256 instances across all blocks of an account).
CAPACITY_BLOCK_MAX_INSTANCES = 64
# The tags every instance of a cluster carries (the launch templates' tag specifications);
# the preflight finds the stack's own running nodes by them.
TAG_CLUSTER = "myriad:cluster"
TAG_POOL = "myriad:pool"
TAG_ROLE = "myriad:role"
TAG_ISLAND = "myriad:island"
# An instance in these states holds its place in a reservation and counts against quotas.
HOLDING_STATES = ("pending", "running")


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    zone_id: str
    state: str


@dataclass(frozen=True, slots=True)
class Reservation:
    id: str
    kind: str  # "default" (On-Demand Capacity Reservation) or "capacity-block"
    instance_type: str
    zone_id: str
    available: int
    total: int
    state: str
    start: str | None = None
    end: str | None = None
    arn: str = ""
    # A reservation made in a cluster placement group launches only into that group.
    placement_group_arn: str = ""

    @property
    def placement_group(self) -> str | None:
        """The group's name: the last part of its ARN (`...:placement-group/<name>`)."""
        return self.placement_group_arn.rsplit("/", 1)[-1] if self.placement_group_arn else None


class AwsLookups(Protocol):
    """What the preflight reads from the account; None where the thing does not exist."""

    def zone(self, zone_id: str) -> Zone | None: ...
    def offers(self, instance_type: str, zone_id: str) -> bool: ...
    def vcpu_quota(self, quota_code: str) -> float | None: ...
    def reservation(self, reservation_id: str, market: Market) -> Reservation | None: ...
    def running(self, cluster: str, tags: Mapping[str, str], reservation_id: str | None) -> int: ...
    def instance_type(self, name: str) -> InstanceFacts | None: ...
    def vcpu_usage(self, quota_code: str) -> float | None:
        """The quota's usage (vCPUs running now, every workload of the account); None: unread."""
        ...


class PulumiLookups:
    """The account, through pulumi_aws invoke functions, in the spec's region."""

    def __init__(self, region: str) -> None:
        self.region = region

    def zone(self, zone_id: str) -> Zone | None:
        import pulumi_aws as aws

        try:
            found = aws.get_availability_zone(
                zone_id=zone_id, all_availability_zones=True, region=self.region
            )
        except Exception as exc:  # the provider reports "no matching zone" as an invoke error
            if "no matching" in str(exc).lower():
                return None
            raise StackError(f"cannot read zone {zone_id} in {self.region}: {exc}") from None
        return Zone(found.name, found.zone_id, found.state)

    def offers(self, instance_type: str, zone_id: str) -> bool:
        import pulumi_aws as aws

        offerings = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone-id",
            filters=[
                {"name": "instance-type", "values": [instance_type]},
                {"name": "location", "values": [zone_id]},
            ],
            region=self.region,
        )
        return instance_type in (offerings.instance_types or [])

    def vcpu_quota(self, quota_code: str) -> float | None:
        import pulumi_aws as aws

        try:
            quota = aws.servicequotas.get_service_quota(
                service_code="ec2", quota_code=quota_code, region=self.region
            )
        except Exception as exc:
            # Reading quotas needs servicequotas:GetServiceQuota; without it, say so and stop.
            raise StackError(
                f"cannot read EC2 quota {quota_code} ({QUOTA_NAMES.get(quota_code, '?')}) in "
                f"{self.region}: {exc}; the stack's credentials need servicequotas:GetServiceQuota"
            ) from None
        return float(quota.value)

    def running(self, cluster: str, tags: Mapping[str, str], reservation_id: str | None) -> int:
        """This cluster's instances with `tags` that hold capacity (pending or running).

        DescribeInstances filters `tag:<key>`, `instance-state-name` and
        `capacity-reservation-id` (EC2 API Reference, "DescribeInstances").
        """
        import pulumi_aws as aws

        filters = (
            [
                aws.ec2.GetInstancesFilterArgs(
                    name="capacity-reservation-id", values=[reservation_id]
                )
            ]
            if reservation_id
            else []
        )
        found = aws.ec2.get_instances(
            instance_tags={TAG_CLUSTER: cluster, **tags},
            instance_state_names=list(HOLDING_STATES),
            filters=filters,
            region=self.region,
        )
        return len(found.ids or [])

    def instance_type(self, name: str) -> InstanceFacts | None:
        import pulumi_aws as aws

        try:
            found = aws.ec2.get_instance_type(instance_type=name, region=self.region)
        except Exception as exc:
            text = str(exc).lower()
            if "invalidinstancetype" in text or "not found" in text or "no matching" in text:
                return None
            raise StackError(f"cannot read instance type {name}: {exc}") from None
        gpus = list(found.gpuses or [])
        return InstanceFacts(
            name=name,
            vcpus=int(found.default_vcpus),
            memory_gib=int(found.memory_size) // 1024,
            efa_interfaces=int(found.efa_maximum_interfaces or 0),
            network_cards=int(found.maximum_network_cards or 0),
            gpu_count=sum(int(g.count) for g in gpus),
            gpu_name=str(gpus[0].name) if gpus else None,
        )

    def vcpu_usage(self, quota_code: str) -> float | None:
        # pulumi_aws has no data source for CloudWatch metric data, where the quota's usage
        # lives (AWS/Usage ResourceCount); `python -m stacks.aws_check` reads it before
        # `pulumi up`. Here the whole cluster is compared with the quota's value.
        return None

    def reservation(self, reservation_id: str, market: Market) -> Reservation | None:
        import pulumi_aws as aws

        try:
            if market == "capacity-block":
                block = aws.ec2.get_capacity_block_reservation(
                    id=reservation_id, region=self.region
                )
                return Reservation(
                    id=block.id,
                    kind=block.reservation_type,
                    instance_type=block.instance_type,
                    zone_id=block.availability_zone_id,
                    available=int(block.available_instance_count),
                    total=int(block.instance_count),
                    state=block.state,
                    start=block.start_date,
                    end=block.end_date,
                    arn=block.arn,
                    placement_group_arn=block.placement_group_arn or "",
                )
            # pulumi_aws has no data source for an On-Demand Capacity Reservation; Cloud
            # Control reads it as CloudFormation's AWS::EC2::CapacityReservation.
            found = aws.cloudcontrol.get_resource(
                type_name="AWS::EC2::CapacityReservation",
                identifier=reservation_id,
                region=self.region,
            )
        except Exception as exc:
            text = str(exc).lower()
            if "not found" in text or "notfound" in text or "no matching" in text:
                return None
            raise StackError(f"cannot read capacity reservation {reservation_id}: {exc}") from None
        found_reservation = reservation_from_cloud_control(
            reservation_id, json.loads(found.properties)
        )
        if found_reservation.arn:
            return found_reservation
        identity = aws.get_caller_identity()
        partition = identity.arn.split(":")[1]
        arn = (
            f"arn:{partition}:ec2:{self.region}:{identity.account_id}:"
            f"capacity-reservation/{found_reservation.id}"
        )
        return dataclasses.replace(found_reservation, arn=arn)


def reservation_from_cloud_control(reservation_id: str, props: Mapping[str, Any]) -> Reservation:
    """An AWS::EC2::CapacityReservation's properties (CloudFormation schema) as a Reservation."""
    return Reservation(
        id=str(props.get("Id", reservation_id)),
        kind="default",
        instance_type=str(props.get("InstanceType", "")),
        zone_id=str(props.get("AvailabilityZoneId", "")),
        available=int(props.get("AvailableInstanceCount", 0)),
        total=int(props.get("TotalInstanceCount", props.get("InstanceCount", 0))),
        # Cloud Control does not return the state; an expired or cancelled reservation is
        # not found at all.
        state=str(props.get("State", "active")),
        end=props.get("EndDate"),
        arn=str(props.get("CapacityReservationArn", "")),
        placement_group_arn=str(props.get("PlacementGroupArn", "")),
    )


@dataclass(frozen=True, slots=True)
class Preflight:
    """What the preflight established: the zone, and the reservation of each compute island."""

    zone: Zone
    reservations: Mapping[int, Reservation] = dataclasses.field(default_factory=dict)
    # Each pool's instance type with the instance-type API's figures (vCPUs, EFA interfaces).
    types: Mapping[str, InstanceType] = dataclasses.field(default_factory=dict)

    @property
    def reservation(self) -> Reservation | None:
        """The reservation of the lowest island (the one reservation when there is one)."""
        return self.reservations[min(self.reservations)] if self.reservations else None


def island_reservation(spec: Cluster, island: int) -> str | None:
    """The reservation compute island `island` launches into: its own, else the cluster's."""
    capacity = spec.provider.capacity
    if capacity.market == "on-demand":
        return None
    return capacity.island_reservations.get(f"island-{island}", capacity.reservation_id)


def _islands(scope: StackScope) -> dict[int, list[NodeRecord]]:
    islands: dict[int, list[NodeRecord]] = {}
    for node in scope.nodes:
        if node.role == "compute" and node.island is not None:
            islands.setdefault(node.island, []).append(node)
    return islands


def preflight(
    spec: Cluster,
    scope: StackScope,
    types: Mapping[str, InstanceType],
    lookups: AwsLookups,
) -> Preflight:
    """Every account-side check, before any resource; StackError lists every problem."""
    provider = spec.provider
    zone_id = provider.availability_zone_id
    assert zone_id is not None  # the spec model requires it for kind aws
    problems: list[str] = []

    zone = lookups.zone(zone_id)
    if zone is None:
        raise StackError(
            f"provider.availability_zone_id {zone_id} is not a zone of {provider.region} "
            f"(`aws ec2 describe-availability-zones --region {provider.region}` lists the IDs)"
        )
    if zone.state != "available":
        problems.append(f"zone {zone_id} ({zone.name}) is {zone.state}, not available")

    types, type_problems = describe_types(spec, types, lookups)
    problems += type_problems
    for name in sorted({t.name for t in types.values()}):
        if not lookups.offers(name, zone_id):
            problems.append(
                f"{name} is not offered in {zone_id} ({zone.name}); pick a zone ID that offers "
                f"it (`aws ec2 describe-instance-type-offerings --location-type "
                f"availability-zone-id --filters Name=instance-type,Values={name}`)"
            )

    problems += _quota_problems(spec, types, lookups)

    found: dict[int, Reservation] = {}
    if provider.capacity.market != "on-demand":
        by_reservation: dict[str, dict[int, list[NodeRecord]]] = {}
        for island, nodes in sorted(_islands(scope).items()):
            rid = island_reservation(spec, island)
            assert rid is not None  # the spec model requires one for this market
            by_reservation.setdefault(rid, {})[island] = nodes
        for rid, islands in by_reservation.items():
            reservation = lookups.reservation(rid, provider.capacity.market)
            new = _not_launched(spec.metadata.name, rid, islands, lookups)
            if reservation is None:
                # An expired On-Demand Capacity Reservation is not found at all; it only
                # matters to a stack that still has nodes to launch into it.
                if sum(new.values()):
                    problems.append(
                        f"capacity reservation {rid} ({_names(islands)}) does not exist in "
                        f"{provider.region} (or has expired); point "
                        f"provider.capacity.reservation_id (or island_reservations) at one "
                        "that does"
                    )
                continue
            found.update(dict.fromkeys(islands, reservation))
            problems += _reservation_problems(spec, types, zone, reservation, islands, new)

    if problems:
        raise StackError(
            "AWS preflight failed; nothing was created:\n" + "\n".join(f"- {p}" for p in problems)
        )
    return Preflight(zone, found, types)


def describe_types(
    spec: Cluster, types: Mapping[str, InstanceType], lookups: AwsLookups
) -> tuple[dict[str, InstanceType], list[str]]:
    """Each pool's type with the API's figures; a type the API does not know is a problem,
    and so is EFA fabric on a compute type without EFA interfaces."""
    pools = {pool.name: pool for pool in spec.pools}
    names = sorted({t.name for t in types.values()})
    facts = {name: lookups.instance_type(name) for name in names}
    problems: list[str] = []
    described: dict[str, InstanceType] = {}
    for pool_name, kind in types.items():
        found = facts[kind.name]
        where = f"pool {pool_name} (profile {pools[pool_name].profile})"
        if found is None:
            problems.append(
                f"{where}: {kind.name} is not an instance type in {spec.provider.region} "
                f"(`aws ec2 describe-instance-types --instance-types {kind.name}`)"
            )
            described[pool_name] = kind
            continue
        described[pool_name], mismatch = with_facts(kind, found, where)
        problems += mismatch
    if spec.network.fabric == "efa":
        for pool_name, kind in described.items():
            if pools[pool_name].role == "compute" and facts[kind.name] and not kind.efa_interfaces:
                problems.append(
                    f"network.fabric is efa, but pool {pool_name} runs on {kind.name}, which has "
                    f"no EFA interfaces (DescribeInstanceTypes); pick an EFA type for profile "
                    f"{pools[pool_name].profile} with provider.instance_types"
                )
    return described, list(dict.fromkeys(problems))


def _names(islands: Mapping[int, Sequence[NodeRecord]]) -> str:
    return ", ".join(f"island-{i}" for i in sorted(islands))


def _not_launched(
    cluster: str,
    reservation_id: str,
    islands: Mapping[int, Sequence[NodeRecord]],
    lookups: AwsLookups,
) -> dict[int, int]:
    """Per island: its nodes that are not running in the reservation yet.

    The stack's own running nodes already hold their place in the reservation: counting them
    as consumers would refuse every `pulumi up` after the first once the reservation is full.
    A replaced island frees its place before relaunching (delete before replace).
    """
    new = {}
    for island, nodes in islands.items():
        running = lookups.running(cluster, {TAG_ISLAND: str(island)}, reservation_id)
        new[island] = max(len(nodes) - running, 0)
    return new


def _quota_problems(
    spec: Cluster, types: Mapping[str, InstanceType], lookups: AwsLookups
) -> list[str]:
    """vCPUs per On-Demand quota, against the account's quota.

    With the quota's usage known (the account's running vCPUs, this cluster's included): the
    usage plus the vCPUs of this cluster's nodes not running yet must fit. Without it: the
    whole cluster must fit the quota's value. The whole cluster, not this stack's share:
    every stack of a cluster runs in the one account and region. Capacity Block instances
    are left out: they are paid for in advance and EC2 does not count them against
    On-Demand vCPU quotas (confirm on a real account: stacks/README.md).
    """
    block = spec.provider.capacity.market == "capacity-block"
    need: Counter[str] = Counter()
    counts: dict[str, Counter[str]] = {}
    # Per quota, per group of nodes found running by the same tags: (vCPUs per node, nodes).
    groups: dict[str, dict[tuple[str, str], tuple[int, int]]] = {}
    pools = {pool.name: pool for pool in spec.pools}
    for node in iter_nodes(spec):
        kind = _type_for(node, pools, spec, types)
        if kind is None or kind.quota_code is None or kind.vcpus == 0:
            continue
        if block and node.role == "compute":
            continue
        need[kind.quota_code] += kind.vcpus
        counts.setdefault(kind.quota_code, Counter())[kind.name] += 1
        # How the nodes are found running: by island (compute) or by pool (the others).
        where = (TAG_ISLAND, str(node.island)) if node.island is not None else (TAG_POOL, node.pool)
        group = groups.setdefault(kind.quota_code, {})
        group[where] = (kind.vcpus, group.get(where, (0, 0))[1] + 1)
    problems = []
    for code, vcpus in sorted(need.items()):
        quota = lookups.vcpu_quota(code)
        if quota is None:
            continue
        what = " + ".join(f"{n} x {t}" for t, n in sorted(counts[code].items()))
        usage = lookups.vcpu_usage(code)
        if usage is None:
            if vcpus > quota:
                problems.append(
                    f"{what} need {vcpus:,} vCPUs of quota {code} ({QUOTA_NAMES[code]}), but "
                    f"the account's quota in {spec.provider.region} is {quota:,.0f}; request an "
                    f"increase in the Service Quotas console (quota code {code}) and run again"
                )
            continue
        new = _new_vcpus(spec.metadata.name, groups[code], lookups)
        if usage + new > quota:
            problems.append(
                f"{what} still to launch need {new:,} vCPUs of quota {code} "
                f"({QUOTA_NAMES[code]}); {usage:,.0f} of the account's {quota:,.0f} in "
                f"{spec.provider.region} are in use; free some or request an increase in "
                f"the Service Quotas console (quota code {code})"
            )
    return problems


def _new_vcpus(
    cluster: str, groups: Mapping[tuple[str, str], tuple[int, int]], lookups: AwsLookups
) -> int:
    """vCPUs of the cluster's nodes not running yet, group by group (an island or a pool)."""
    total = 0
    for (key, value), (per_node, nodes) in groups.items():
        running = lookups.running(cluster, {key: value}, None)
        total += max(nodes - running, 0) * per_node
    return total


def _type_for(
    node: NodeRecord,
    pools: Mapping[str, Any],
    spec: Cluster,
    types: Mapping[str, InstanceType],
) -> InstanceType | None:
    if node.pool in types:
        return types[node.pool]
    # A pool held by another stack of this cluster (per-island stacks): same table.
    return instance_type(spec, pools[node.pool].profile)


def _reservation_problems(
    spec: Cluster,
    types: Mapping[str, InstanceType],
    zone: Zone,
    reservation: Reservation,
    islands: Mapping[int, Sequence[NodeRecord]],
    new: Mapping[int, int],
) -> list[str]:
    capacity = spec.provider.capacity
    rid = reservation.id
    names = _names(islands)
    problems = []
    want_kind = "capacity-block" if capacity.market == "capacity-block" else "default"
    if reservation.kind != want_kind:
        block = reservation.kind == "capacity-block"
        problems.append(
            f"{rid} is a {'Capacity Block' if block else 'Capacity Reservation'}, but "
            f"provider.capacity.market is {capacity.market}; set market: "
            f"{'capacity-block' if block else 'capacity-reservation'}"
        )
    if reservation.zone_id != zone.zone_id:
        problems.append(
            f"{rid} is in zone {reservation.zone_id}, but the subnets go to "
            f"provider.availability_zone_id {zone.zone_id}; instances launch into a "
            f"reservation only in its zone: set availability_zone_id: {reservation.zone_id}"
        )
    compute = [n for nodes in islands.values() for n in nodes]
    for name in sorted({types[n.pool].name for n in compute}):
        if name != reservation.instance_type:
            problems.append(
                f"{rid} reserves {reservation.instance_type}, but compute nodes here are {name}"
            )
    to_launch = sum(new.values())
    if to_launch == 0:
        # Every node is running in it already: its state and free count do not matter to
        # this run (a full reservation is what a running cluster looks like).
        return problems
    if reservation.state in _ENDED:
        when = f" at {reservation.end}" if reservation.end else ""
        problems.append(
            f"{rid} ({names}) ended{when} ({reservation.state}) and EC2 terminated its "
            f"instances; {to_launch} nodes have no capacity to launch into: name an active "
            "reservation (provider.capacity.island_reservations.<island> or reservation_id) "
            "and relaunch the island with a new myriad:replace.island-<n> token"
        )
        return problems
    if reservation.state not in _LAUNCHABLE:
        when = f" (starts {reservation.start})" if reservation.start else ""
        problems.append(
            f"{rid} is {reservation.state}{when}; instances launch into it only when active"
        )
    if to_launch > reservation.available:
        running = len(compute) - to_launch
        problems.append(
            f"{rid} has {reservation.available} of {reservation.total} instances free, but this "
            f"stack launches {to_launch} compute nodes into it ({names}; {running} run in it "
            "already)"
        )
    return problems
