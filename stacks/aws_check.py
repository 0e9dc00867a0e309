"""The AWS preflight a user runs before `pulumi up`, on the AWS API itself (boto3).

    python -m stacks.aws_check inventories/aws-dev/cluster.yaml [--island N]

The same checks as the stack's preflight (`stacks.aws_preflight.preflight`: zone, instance
types and their EFA interfaces, offerings, vCPU quotas, each island's reservation) through
`Boto3Lookups`, with what the Pulumi invokes cannot read: each quota's *usage*, the
CloudWatch metric Service Quotas names for it (`UsageMetric` of GetServiceQuota: namespace
AWS/Usage, ResourceCount; Service Quotas User Guide, "Amazon CloudWatch metrics"). Every
problem is printed at once. Exit 0: ready; 1: the account is not (the list says why); 2: the
spec or this command's arguments are wrong. Credentials and profile are boto3's (AWS_PROFILE,
the environment, instance role); the region is always the spec's.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from myriad.errors import MyriadError
from myriad.spec import SpecError, load_spec
from stacks.aws_preflight import (
    HOLDING_STATES,
    TAG_CLUSTER,
    Market,
    Preflight,
    Reservation,
    Zone,
    preflight,
)
from stacks.instance_types import QUOTA_NAMES, InstanceFacts
from stacks.interface import StackError
from stacks.settings import StackSettings
from stacks.sharding import scope_for

# How far back the usage metric is read; Service Quotas publishes it every minute.
_USAGE_WINDOW = datetime.timedelta(minutes=15)


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class Boto3Lookups:
    """`stacks.aws_preflight.AwsLookups` on boto3 clients (EC2, Service Quotas, CloudWatch)."""

    def __init__(self, region: str, clients: Mapping[str, Any] | None = None) -> None:
        self.region = region
        self._clients = dict(clients or {})
        self._quotas: dict[str, Mapping[str, Any]] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            import boto3  # type: ignore[import-untyped]

            self._clients[service] = boto3.client(service, region_name=self.region)
        return self._clients[service]

    def zone(self, zone_id: str) -> Zone | None:
        try:
            answer = self.client("ec2").describe_availability_zones(
                ZoneIds=[zone_id], AllAvailabilityZones=True
            )
        except Exception as exc:
            if _code(exc) in ("InvalidParameterValue", "InvalidAvailabilityZone"):
                return None
            raise StackError(f"cannot read zone {zone_id} in {self.region}: {exc}") from None
        zones = answer.get("AvailabilityZones", [])
        if not zones:
            return None
        found = zones[0]
        return Zone(str(found["ZoneName"]), str(found["ZoneId"]), str(found["State"]))

    def offers(self, instance_type: str, zone_id: str) -> bool:
        answer = self.client("ec2").describe_instance_type_offerings(
            LocationType="availability-zone-id",
            Filters=[
                {"Name": "instance-type", "Values": [instance_type]},
                {"Name": "location", "Values": [zone_id]},
            ],
        )
        return any(o["InstanceType"] == instance_type for o in answer["InstanceTypeOfferings"])

    def _quota(self, quota_code: str) -> Mapping[str, Any]:
        if quota_code not in self._quotas:
            try:
                answer = self.client("service-quotas").get_service_quota(
                    ServiceCode="ec2", QuotaCode=quota_code
                )
            except Exception as exc:
                raise StackError(
                    f"cannot read EC2 quota {quota_code} ({QUOTA_NAMES.get(quota_code, '?')}) "
                    f"in {self.region}: {exc}; the credentials need servicequotas:GetServiceQuota"
                ) from None
            self._quotas[quota_code] = answer["Quota"]
        return self._quotas[quota_code]

    def vcpu_quota(self, quota_code: str) -> float | None:
        return float(self._quota(quota_code)["Value"])

    def vcpu_usage(self, quota_code: str) -> float | None:
        metric = self._quota(quota_code).get("UsageMetric")
        if not metric:
            return None
        now = datetime.datetime.now(datetime.UTC)
        answer = self.client("cloudwatch").get_metric_statistics(
            Namespace=metric["MetricNamespace"],
            MetricName=metric["MetricName"],
            Dimensions=[
                {"Name": k, "Value": v} for k, v in sorted(metric["MetricDimensions"].items())
            ],
            StartTime=now - _USAGE_WINDOW,
            # A minute ahead: the request's times go out in whole seconds, and the current
            # minute's data point must stay inside the window.
            EndTime=now + datetime.timedelta(minutes=1),
            Period=60,
            Statistics=["Maximum"],
        )
        points = answer.get("Datapoints", [])
        # No data point in the window: nothing of that family ran in it.
        return max((float(p["Maximum"]) for p in points), default=0.0)

    def reservation(self, reservation_id: str, market: Market) -> Reservation | None:
        try:
            answer = self.client("ec2").describe_capacity_reservations(
                CapacityReservationIds=[reservation_id]
            )
        except Exception as exc:
            if "NotFound" in _code(exc) or "Malformed" in _code(exc):
                return None
            raise StackError(f"cannot read capacity reservation {reservation_id}: {exc}") from None
        found = answer.get("CapacityReservations", [])
        if not found:
            return None
        r = found[0]
        return Reservation(
            id=str(r["CapacityReservationId"]),
            kind=str(r.get("ReservationType", "default")),
            instance_type=str(r["InstanceType"]),
            zone_id=str(r["AvailabilityZoneId"]),
            available=int(r["AvailableInstanceCount"]),
            total=int(r["TotalInstanceCount"]),
            state=str(r["State"]),
            start=_text(r.get("StartDate")),
            end=_text(r.get("EndDate")),
            arn=str(r.get("CapacityReservationArn", "")),
            placement_group_arn=str(r.get("PlacementGroupArn", "")),
        )

    def running(self, cluster: str, tags: Mapping[str, str], reservation_id: str | None) -> int:
        filters = [{"Name": "instance-state-name", "Values": list(HOLDING_STATES)}]
        filters += [
            {"Name": f"tag:{k}", "Values": [v]} for k, v in {TAG_CLUSTER: cluster, **tags}.items()
        ]
        count = 0
        pages = self.client("ec2").get_paginator("describe_instances").paginate(Filters=filters)
        for page in pages:
            for group in page.get("Reservations", []):
                for instance in group.get("Instances", []):
                    # The instance says which reservation it launched into.
                    if reservation_id is None or (
                        instance.get("CapacityReservationId") == reservation_id
                    ):
                        count += 1
        return count

    def instance_type(self, name: str) -> InstanceFacts | None:
        try:
            answer = self.client("ec2").describe_instance_types(InstanceTypes=[name])
        except Exception as exc:
            if _code(exc) == "InvalidInstanceType":
                return None
            raise StackError(f"cannot read instance type {name}: {exc}") from None
        found = answer.get("InstanceTypes", [])
        if not found:
            return None
        info = found[0]
        network = info.get("NetworkInfo", {})
        gpus = (info.get("GpuInfo") or {}).get("Gpus", [])
        return InstanceFacts(
            name=name,
            vcpus=int(info["VCpuInfo"]["DefaultVCpus"]),
            memory_gib=int(info["MemoryInfo"]["SizeInMiB"]) // 1024,
            efa_interfaces=int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)),
            network_cards=int(network.get("MaximumNetworkCards", 0)),
            gpu_count=sum(int(g["Count"]) for g in gpus),
            gpu_name=str(gpus[0]["Name"]) if gpus else None,
        )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def check(path: Path, island: int | None, lookups: Boto3Lookups | None = None) -> Preflight:
    """The spec's checks, then the account's; StackError lists what is wrong."""
    from stacks.aws import AwsClusterArgs

    spec = load_spec(path).spec
    if spec.provider.kind != "aws":
        raise StackError(f"{path}: provider.kind is {spec.provider.kind}, not aws")
    assert spec.provider.region is not None  # the spec model requires it for kind aws
    scope = scope_for(spec, island)
    # An island stack's shared stack is not read here: only its name is required.
    settings = StackSettings(spec_path=path, island=island, shared_stack="(not read)")
    args = AwsClusterArgs.checked(spec, scope, settings)
    return preflight(spec, scope, args.types, lookups or Boto3Lookups(spec.provider.region))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stacks.aws_check",
        description="Check the AWS account for a cluster spec before `pulumi up`.",
    )
    parser.add_argument("spec", type=Path, help="the environment's cluster.yaml")
    parser.add_argument("--island", type=int, help="an island stack's island (per-island specs)")
    options = parser.parse_args(argv)
    try:
        checked = check(options.spec, options.island)
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    except StackError as exc:
        text = str(exc)
        print(text, file=sys.stderr)
        return 1 if text.startswith("AWS preflight failed") else 2
    except MyriadError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    zone = checked.zone
    print(f"AWS preflight passed: zone {zone.zone_id} ({zone.name}), ", end="")
    print(f"{len(checked.types)} pools, {len(set(checked.reservations.values()))} reservations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
