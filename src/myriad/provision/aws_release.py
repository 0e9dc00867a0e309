"""An AWS compute island's release: its instances terminated and its reservation's places back,
before a replacement island is launched.

A fleet is replaced delete-before-create (a reservation sized to the cluster has no room for
a second copy), but deleting an instant fleet does not wait for its instances: they are
`shutting-down` for minutes, and "it takes several minutes to clean up your instance before
you can launch another instance to replace it ... Then, the available capacity in your
Capacity Block will update" (EC2 User Guide, "Launch instances using Capacity Blocks",
docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html). A new fleet created
in that window comes back short. `IslandRelease` is a dynamic resource that depends on the
fleet; its `delete` (which the engine runs before deleting the fleet it depends on, and so
before the new fleet is created) terminates the island's instances, waits until
DescribeInstances reports every one `terminated`, then until the reservation's
`AvailableInstanceCount` has grown by the places they held (DescribeCapacityReservations).

The provider class lives in this installed package because Pulumi pickles a dynamic provider
by reference (see `myriad.provision.redfish`). The AWS calls go through an EC2 client object
(boto3's, made in `delete`), so the waiting is tested with a stand-in client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

from myriad.errors import MyriadError

# The states in which an instance still holds its place in a reservation.
_HOLDING = {"pending", "running", "stopping", "shutting-down"}
# DescribeInstances and TerminateInstances take at most 1,000 IDs a call (EC2 API Reference).
_BATCH = 1000
DEFAULT_TIMEOUT_S = 1800.0
DEFAULT_POLL_S = 15.0


class ReleaseError(MyriadError):
    """An island's instances or reservation places did not come back in time."""


class Ec2Client(Protocol):
    """The three EC2 calls the release makes (boto3's client has them)."""

    def describe_instances(self, **kwargs: Any) -> Mapping[str, Any]: ...
    def terminate_instances(self, **kwargs: Any) -> Mapping[str, Any]: ...
    def describe_capacity_reservations(self, **kwargs: Any) -> Mapping[str, Any]: ...


def _states(ec2: Ec2Client, instance_ids: Sequence[str]) -> dict[str, str]:
    states: dict[str, str] = {}
    for start in range(0, len(instance_ids), _BATCH):
        batch = list(instance_ids[start : start + _BATCH])
        answer = ec2.describe_instances(InstanceIds=batch)
        for reservation in answer.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                states[str(instance["InstanceId"])] = str(instance["State"]["Name"])
    return states


def _available(ec2: Ec2Client, reservation_id: str) -> int:
    answer = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    (found,) = answer["CapacityReservations"]
    return int(found["AvailableInstanceCount"])


def release_island(
    ec2: Ec2Client,
    instance_ids: Sequence[str],
    reservation_id: str | None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = DEFAULT_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Terminate `instance_ids`, wait for them and for their places; the places freed."""
    deadline = clock() + timeout_s
    states = _states(ec2, instance_ids)
    holding = sorted(i for i, state in states.items() if state in _HOLDING)
    baseline = _available(ec2, reservation_id) if reservation_id and holding else 0
    for start in range(0, len(holding), _BATCH):
        ec2.terminate_instances(InstanceIds=holding[start : start + _BATCH])
    while holding:
        left = sorted(i for i, state in _states(ec2, holding).items() if state != "terminated")
        if not left:
            break
        if clock() >= deadline:
            raise ReleaseError(
                f"{len(left)} instances of the island are not terminated after {timeout_s:.0f} s "
                f"({', '.join(left[:5])}{', ...' if len(left) > 5 else ''}); the replacement "
                "was not launched: run `pulumi up` again once they are"
            )
        sleep(poll_s)
    if reservation_id and holding:
        want = baseline + len(holding)
        while (free := _available(ec2, reservation_id)) < want:
            if clock() >= deadline:
                raise ReleaseError(
                    f"{reservation_id} shows {free} free instances, {want} expected once the "
                    f"island's {len(holding)} places return, after {timeout_s:.0f} s; the "
                    "replacement was not launched: run `pulumi up` again later"
                )
            sleep(poll_s)
    return len(holding)


def _client(region: str) -> Ec2Client:
    try:
        import boto3  # type: ignore[import-untyped]
    except ModuleNotFoundError as exc:
        raise ReleaseError(
            "releasing an AWS island needs boto3; install Myriad's aws extra "
            "(pip install 'myriad-cluster[aws]')"
        ) from exc
    client: Ec2Client = boto3.client("ec2", region_name=region)
    return client


class IslandReleaseProvider(ResourceProvider):
    """create: records the island's instances; delete: releases them (`release_island`)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=str(props["fleet_id"]), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Another fleet or other instances: a new release, the old one runs (deletes) first.
        replaces = [k for k in ("fleet_id", "instance_ids") if olds.get(k) != news.get(k)]
        changed = replaces or [k for k in news if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed), replaces=replaces, delete_before_replace=bool(replaces)
        )

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        release_island(
            _client(str(props["region"])),
            [str(i) for i in props.get("instance_ids") or []],
            props.get("reservation_id") or None,
            timeout_s=float(props.get("timeout_s") or DEFAULT_TIMEOUT_S),
        )


class IslandRelease(Resource):
    """The release of one island's instances; make it depend on the island's fleet."""

    def __init__(
        self,
        name: str,
        *,
        region: str,
        fleet_id: pulumi.Input[str],
        instance_ids: pulumi.Input[Sequence[str]],
        reservation_id: str | None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "region": region,
            "fleet_id": fleet_id,
            "instance_ids": instance_ids,
            "reservation_id": reservation_id or "",
            "timeout_s": timeout_s,
        }
        super().__init__(IslandReleaseProvider(), name, props, opts)
