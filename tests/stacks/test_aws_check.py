"""`python -m stacks.aws_check`: the preflight on the AWS API, against moto's EC2 and
CloudWatch (moto from PyPI, no network), with Service Quotas and DescribeCapacityReservations
answered by botocore's Stubber on real clients (moto implements neither for EC2).

Exercised: stacks.aws_check.Boto3Lookups on boto3's request and response shapes, the shared
preflight logic, every problem reported at once, the exit codes. Not exercised: a real
account (stacks/README.md, first real run).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

boto3 = pytest.importorskip("boto3", reason="the AWS-API preflight needs boto3 (aws extra)")
moto = pytest.importorskip("moto", reason="moto is in the test extra")
from botocore.stub import Stubber  # noqa: E402

from stacks.aws_check import Boto3Lookups, check, main  # noqa: E402
from stacks.interface import StackError  # noqa: E402

from stack_harness import REPO  # noqa: E402

REGION = "us-east-1"
AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"
BLOCK = "cr-0b10c4000000000aa"
USAGE = {
    "MetricNamespace": "AWS/Usage",
    "MetricName": "ResourceCount",
    "MetricDimensions": {"Class": "P/OnDemand", "Resource": "vCPU", "Service": "EC2"},
    "MetricStatisticRecommendation": "Maximum",
}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with moto.mock_aws():
        yield


def quotas(values: dict[str, float]) -> Any:
    """A Service Quotas client answering GetServiceQuota once per code, P with its metric."""
    client = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(client)
    for code in sorted(values):
        quota: dict[str, Any] = {"QuotaCode": code, "ServiceCode": "ec2", "Value": values[code]}
        if code == "L-417A185B":
            quota["UsageMetric"] = USAGE
        stub.add_response(
            "get_service_quota", {"Quota": quota}, {"ServiceCode": "ec2", "QuotaCode": code}
        )
    stub.activate()
    return client


def lookups(quota: dict[str, float], ec2: Any | None = None) -> Boto3Lookups:
    return Boto3Lookups(
        REGION,
        {
            "ec2": ec2 or boto3.client("ec2", region_name=REGION),
            "service-quotas": quotas(quota),
            "cloudwatch": boto3.client("cloudwatch", region_name=REGION),
        },
    )


def p_usage(vcpus: float) -> None:
    boto3.client("cloudwatch", region_name=REGION).put_metric_data(
        Namespace="AWS/Usage",
        MetricData=[
            {
                "MetricName": "ResourceCount",
                "Dimensions": [
                    {"Name": k, "Value": v} for k, v in sorted(USAGE["MetricDimensions"].items())
                ],
                "Timestamp": datetime.datetime.now(datetime.UTC),
                "Value": vcpus,
            }
        ],
    )


def test_the_aws_dev_example_passes_on_an_account_with_room(aws: None) -> None:
    checked = check(AWS_DEV, None, lookups({"L-417A185B": 4096, "L-1216C47A": 640}))
    assert checked.zone.zone_id == "use1-az4"
    # EFA interfaces from DescribeInstanceTypes (moto carries the API's data): 32 on a p5.
    assert checked.types["gpu"].efa_interfaces == 32
    assert checked.types["ctl"].vcpus == 8


def test_usage_counts_against_the_quota(aws: None) -> None:
    # 1,024 P vCPUs of other work run in the account; 2 x p5 need 384 more of a 1,280 quota.
    p_usage(1024)
    with pytest.raises(StackError) as caught:
        check(AWS_DEV, None, lookups({"L-417A185B": 1280, "L-1216C47A": 640}))
    message = str(caught.value)
    assert "2 x p5.48xlarge still to launch need 384 vCPUs of quota L-417A185B" in message
    assert "1,024 of the account's 1,280 in us-east-1 are in use" in message


def test_the_clusters_own_running_nodes_are_not_counted_twice(aws: None) -> None:
    # The island runs (moto's instances, tagged as the templates tag them); the usage metric
    # counts them, so they are not "still to launch".
    ec2 = boto3.client("ec2", region_name=REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = {"myriad:cluster": "aws-dev", "myriad:island": "0", "myriad:pool": "gpu"}
    ec2.run_instances(
        ImageId=image,
        InstanceType="p5.48xlarge",
        MinCount=2,
        MaxCount=2,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    p_usage(384)
    check(AWS_DEV, None, lookups({"L-417A185B": 400, "L-1216C47A": 640}, ec2))


def spec_file(tmp_path: Path, **capacity: Any) -> Path:
    data = yaml.safe_load(AWS_DEV.read_text())
    data["provider"]["capacity"] = capacity
    data["provider"]["availability_zone_id"] = "use1-az6"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_every_problem_is_reported_at_once(aws: None, tmp_path: Path) -> None:
    path = spec_file(tmp_path, market="capacity-block", reservation_id=BLOCK)
    ec2 = boto3.client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_response(
        "describe_capacity_reservations",
        {
            "CapacityReservations": [
                {
                    "CapacityReservationId": BLOCK,
                    "ReservationType": "capacity-block",
                    "InstanceType": "p5.48xlarge",
                    "AvailabilityZoneId": "use1-az4",
                    "AvailableInstanceCount": 1,
                    "TotalInstanceCount": 2,
                    "State": "scheduled",
                    "StartDate": datetime.datetime(2026, 12, 20, tzinfo=datetime.UTC),
                }
            ]
        },
        {"CapacityReservationIds": [BLOCK]},
    )
    real = ec2.describe_capacity_reservations

    class Ec2:
        """moto's EC2, with the stubbed DescribeCapacityReservations."""

        def __getattr__(self, name: str) -> Any:
            return getattr(boto3.client("ec2", region_name=REGION), name)

        describe_capacity_reservations = staticmethod(real)

    stub.activate()
    with pytest.raises(StackError) as caught:
        check(path, None, lookups({"L-1216C47A": 640}, Ec2()))
    message = str(caught.value)
    assert f"{BLOCK} is in zone use1-az4, but the subnets go to" in message
    assert f"{BLOCK} is scheduled (starts 2026-12-20T00:00:00+00:00)" in message
    assert f"{BLOCK} has 1 of 2 instances free, but this stack launches 2" in message


def test_exit_codes(aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: myriad/v1\nkind: Cluster\nmetadata: {name: x}\n")
    assert main([str(bad)]) == 2
    assert f"{bad}:" in capsys.readouterr().err
    # No Service Quotas answer in moto: the read's failure names the permission, exit 2.
    assert main([str(AWS_DEV)]) == 2
    assert "servicequotas:GetServiceQuota" in capsys.readouterr().err
