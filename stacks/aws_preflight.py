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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.spec.models import Cluster
from stacks.instance_types import QUOTA_NAMES, InstanceType, instance_type
from stacks.interface import StackError
from stacks.sharding import StackScope

Market = Literal["on-demand", "capacity-reservation", "capacity-block"]
# The reservation states an instance can launch into; a capacity block is "scheduled" until
# its start time and refuses launches until then.
_LAUNCHABLE = {"active"}


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


class AwsLookups(Protocol):
    """What the preflight reads from the account; None where the thing does not exist."""

    def zone(self, zone_id: str) -> Zone | None: ...
    def offers(self, instance_type: str, zone_id: str) -> bool: ...
    def vcpu_quota(self, quota_code: str) -> float | None: ...
    def reservation(self, reservation_id: str, market: Market) -> Reservation | None: ...


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
    )


@dataclass(frozen=True, slots=True)
class Preflight:
    """What the preflight established: the zone, by ID and by this account's name for it."""

    zone: Zone
    reservation: Reservation | None


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

    for name in sorted({t.name for t in types.values()}):
        if not lookups.offers(name, zone_id):
            problems.append(
                f"{name} is not offered in {zone_id} ({zone.name}); pick a zone ID that offers "
                f"it (`aws ec2 describe-instance-type-offerings --location-type "
                f"availability-zone-id --filters Name=instance-type,Values={name}`)"
            )

    problems += _quota_problems(spec, types, lookups)

    reservation = None
    capacity = provider.capacity
    if capacity.market != "on-demand":
        assert capacity.reservation_id is not None  # the spec model requires it
        reservation = lookups.reservation(capacity.reservation_id, capacity.market)
        if reservation is None:
            problems.append(
                f"provider.capacity.reservation_id {capacity.reservation_id} does not exist in "
                f"{provider.region} (or has expired)"
            )
        else:
            problems += _reservation_problems(spec, scope, types, zone, reservation)

    if problems:
        raise StackError(
            "AWS preflight failed; nothing was created:\n" + "\n".join(f"- {p}" for p in problems)
        )
    return Preflight(zone, reservation)


def _quota_problems(
    spec: Cluster, types: Mapping[str, InstanceType], lookups: AwsLookups
) -> list[str]:
    """vCPUs the whole cluster runs per On-Demand quota, against the account's quota.

    The whole cluster, not this stack's share: every stack of a cluster runs in the one
    account and region. Capacity Block instances are left out: they are paid for in advance
    and EC2 does not count them against On-Demand vCPU quotas (confirm on a real account:
    stacks/README.md).
    """
    block = spec.provider.capacity.market == "capacity-block"
    need: Counter[str] = Counter()
    counts: dict[str, Counter[str]] = {}
    pools = {pool.name: pool for pool in spec.pools}
    for node in iter_nodes(spec):
        kind = _type_for(node, pools, spec, types)
        if kind is None or kind.quota_code is None or kind.vcpus == 0:
            continue
        if block and node.role == "compute":
            continue
        need[kind.quota_code] += kind.vcpus
        counts.setdefault(kind.quota_code, Counter())[kind.name] += 1
    problems = []
    for code, vcpus in sorted(need.items()):
        quota = lookups.vcpu_quota(code)
        if quota is not None and vcpus > quota:
            what = " + ".join(f"{n} x {t}" for t, n in sorted(counts[code].items()))
            problems.append(
                f"{what} need {vcpus:,} vCPUs of quota {code} ({QUOTA_NAMES[code]}), but the "
                f"account's quota in {spec.provider.region} is {quota:,.0f}; request an increase "
                f"in the Service Quotas console (quota code {code}) and run again"
            )
    return problems


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
    scope: StackScope,
    types: Mapping[str, InstanceType],
    zone: Zone,
    reservation: Reservation,
) -> list[str]:
    capacity = spec.provider.capacity
    rid = reservation.id
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
    if reservation.state not in _LAUNCHABLE:
        when = f" (starts {reservation.start})" if reservation.start else ""
        problems.append(
            f"{rid} is {reservation.state}{when}; instances launch into it only when active"
        )
    compute = [n for n in scope.nodes if n.role == "compute"]
    compute_types = sorted({types[n.pool].name for n in compute})
    for name in compute_types:
        if name != reservation.instance_type:
            problems.append(
                f"{rid} reserves {reservation.instance_type}, but compute nodes here are {name}"
            )
    if len(compute) > reservation.available:
        problems.append(
            f"{rid} has {reservation.available} of {reservation.total} instances free, but this "
            f"stack launches {len(compute)} compute nodes into it"
        )
    return problems
