"""Policy tests of the aws provider, one or more per rule of issue 20, under Pulumi mocks.

Exercised: the resource graph and resource options the engine would receive (EFA interfaces
and the security group, market options per capacity kind, lifecycle options, the order of
billing resources after the compute fleets) and the preflight, whose reads are pulumi_aws
invokes answered by the mocks (`FakeCloud.call`) or by a `Lookups` object of the test's.
Not exercised: the AWS API itself; stacks/README.md lists what needs a real account.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pytest

from myriad.plan.nodes import iter_nodes
from myriad.spec.models import Cluster
from stacks.aws import FLEET_REPLACE_ON_CHANGES, NODE_REPLACE_ON_CHANGES, fleet_instance_ids
from stacks.aws import build as aws_build
from stacks.aws_preflight import Market, Reservation, Zone, preflight
from stacks.instance_types import INSTANCE_TYPES, QUOTA_P, InstanceFacts, instance_type
from stacks.interface import StackError
from stacks.program import build
from stacks.settings import read_settings
from stacks.sharding import scope_for

from stack_harness import REPO, Built, RecordingMonitor, run_program, spec_with, stack_config

AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"
BLOCK = "cr-0b10c4000000000aa"
ODCR = "cr-0123456789abcdef0"
QUOTA_TOKEN = "aws:servicequotas/getServiceQuota:getServiceQuota"
BLOCK_TOKEN = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
CLOUD_CONTROL_TOKEN = "aws:cloudcontrol/getResource:getResource"


def build_stack(
    spec: Cluster, *, extra: dict[str, Any] | None = None, calls: dict[str, Any] | None = None
) -> Built:
    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        result = build(spec, settings)
        return {"nodes": result.nodes, **result.outputs}

    return run_program(body, config={**stack_config("aws-dev"), **(extra or {})}, calls=calls)


def refused(
    spec: Cluster, *, calls: dict[str, Any] | None = None, extra: dict[str, Any] | None = None
) -> tuple[str, RecordingMonitor]:
    """Run the stack expecting a refusal: its message, and the monitor that saw the run."""
    monitors: list[RecordingMonitor] = []

    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        build(spec, settings)
        return {}

    with pytest.raises(StackError) as caught:
        run_program(
            body,
            config={**stack_config("aws-dev"), **(extra or {})},
            calls=calls,
            monitor_out=monitors,
        )
    return str(caught.value), monitors[0]


def with_gpus(count: int, **provider: Any) -> Cluster:
    def edit(data: dict[str, Any]) -> None:
        data["pools"][2]["count"] = count
        data["provider"].update(provider)

    return spec_with(AWS_DEV, edit=edit)


def block_answer(**overrides: Any) -> dict[str, Any]:
    answer = {
        "id": BLOCK,
        "arn": f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{BLOCK}",
        "reservationType": "capacity-block",
        "instanceType": "p5.48xlarge",
        "availabilityZone": "us-east-1d",
        "availabilityZoneId": "use1-az4",
        "availableInstanceCount": 2,
        "instanceCount": 2,
        "state": "active",
        "startDate": "2026-12-01T11:30:00Z",
        "endDate": "2026-12-15T11:30:00Z",
    }
    return {**answer, **overrides}


def odcr_answer(**overrides: Any) -> dict[str, Any]:
    props = {
        "Id": ODCR,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1d",
        "AvailabilityZoneId": "use1-az4",
        "AvailableInstanceCount": 2,
        "TotalInstanceCount": 2,
        **overrides,
    }
    return {"id": ODCR, "identifier": ODCR, "typeName": "x", "properties": json.dumps(props)}


def fleets(built: Built) -> list[Any]:
    return built.of_type("ec2/fleet:Fleet")


def template(built: Built, pool: str) -> dict[str, Any]:
    (found,) = [
        t.inputs
        for t in built.of_type("launchTemplate:LaunchTemplate")
        if t.inputs["tags"]["myriad:pool"] == pool
    ]
    return found


# --- EFA --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def aws_dev() -> Built:
    return build_stack(spec_with(AWS_DEV))


def test_efa_interfaces_one_per_network_card_and_the_group_open_to_itself(aws_dev: Built) -> None:
    interfaces = template(aws_dev, "gpu")["networkInterfaces"]
    efa = [i for i in interfaces if i.get("interfaceType") == "efa-only"]
    assert sorted((i["networkCardIndex"], i["deviceIndex"]) for i in efa) == [(0, 1)] + [
        (card, 0) for card in range(1, 32)
    ]
    (group,) = aws_dev.of_type("ec2/securityGroup:SecurityGroup")
    every = {"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True}
    for direction in ("ingress", "egress"):
        assert any(every.items() <= rule.items() for rule in group.inputs[direction])
    # Every interface, EFA included, is in that group.
    assert all(i["securityGroups"] == [group.name + "-id"] for i in interfaces)


def test_the_example_runs_nccl_over_efa() -> None:
    assert spec_with(AWS_DEV).network.fabric == "efa"


def test_efa_fabric_on_a_type_without_efa_is_refused_before_any_resource() -> None:
    def cpu_compute(data: dict[str, Any]) -> None:
        data["pools"][2]["profile"] = "head"
        data["profiles"]["head"]["nics"] = {"compute": {"model": "AWS-EFA", "count": 1}}

    message, monitor = refused(spec_with(AWS_DEV, edit=cpu_compute))
    assert "network.fabric is efa, but pool gpu runs on m7i.2xlarge" in message
    assert monitor.registered == []


def test_dlami_is_chosen_by_ssm_parameter_for_gpu_pools_only() -> None:
    built = build_stack(with_gpus(2, image="dlami"))
    gpu = template(built, "gpu")["imageId"]
    assert gpu == (
        "resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
        "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
    )
    assert template(built, "ctl")["imageId"].startswith("resolve:ssm:/aws/service/canonical/")


# --- Capacity -----------------------------------------------------------------------------


def test_subnets_are_placed_by_zone_id(aws_dev: Built) -> None:
    for subnet in aws_dev.of_type("ec2/subnet:Subnet"):
        assert subnet.inputs["availabilityZoneId"] == "use1-az4"
        assert "availabilityZone" not in subnet.inputs


def test_on_demand_fleet_is_all_or_nothing_in_one_zone(aws_dev: Built) -> None:
    (fleet,) = fleets(aws_dev)
    assert fleet.inputs["targetCapacitySpecification"] == {
        "defaultTargetCapacityType": "on-demand",
        "totalTargetCapacity": 2,
    }
    assert fleet.inputs["onDemandOptions"] == {
        "minTargetCapacity": 2,
        "singleAvailabilityZone": True,
        "singleInstanceType": True,
    }
    assert fleet.inputs["terminateInstances"] is True
    gpu = template(aws_dev, "gpu")
    assert "capacityReservationSpecification" not in gpu
    assert "instanceMarketOptions" not in gpu


def test_capacity_block_market_and_reservation_target() -> None:
    spec = with_gpus(2, capacity={"market": "capacity-block", "reservation_id": BLOCK})
    built = build_stack(spec, calls={BLOCK_TOKEN: block_answer()})
    gpu = template(built, "gpu")
    assert gpu["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert gpu["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": BLOCK}
    }
    (fleet,) = fleets(built)
    assert fleet.inputs["targetCapacitySpecification"]["defaultTargetCapacityType"] == (
        "capacity-block"
    )
    # Only compute pools launch into the block.
    assert "capacityReservationSpecification" not in template(built, "ctl")


def test_capacity_reservation_is_targeted_through_a_resource_group() -> None:
    spec = with_gpus(2, capacity={"market": "capacity-reservation", "reservation_id": ODCR})
    built = build_stack(spec, calls={CLOUD_CONTROL_TOKEN: odcr_answer()})
    (group,) = built.of_type("resourcegroups/group:Group")
    assert [c["type"] for c in group.inputs["configurations"]] == [
        "AWS::EC2::CapacityReservationPool",
        "AWS::ResourceGroups::Generic",
    ]
    (member,) = built.of_type("resourcegroups/resource:Resource")
    assert member.inputs["resourceArn"] == (
        f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{ODCR}"
    )
    target = template(built, "gpu")["capacityReservationSpecification"]
    assert target["capacityReservationTarget"] == {
        "capacityReservationResourceGroupArn": (
            "arn:aws:resource-groups:us-east-1:123456789012:group/aws-dev-capacity"
        )
    }
    (fleet,) = fleets(built)
    assert fleet.inputs["onDemandOptions"]["capacityReservationOptions"] == {
        "usageStrategy": "use-capacity-reservations-first"
    }
    assert fleet.inputs["targetCapacitySpecification"]["defaultTargetCapacityType"] == "on-demand"


def test_a_reservation_in_another_zone_is_refused_before_any_resource() -> None:
    spec = with_gpus(2, capacity={"market": "capacity-block", "reservation_id": BLOCK})
    answer = block_answer(availabilityZoneId="use1-az6", availabilityZone="us-east-1a")
    message, monitor = refused(spec, calls={BLOCK_TOKEN: answer})
    assert f"{BLOCK} is in zone use1-az6, but the subnets go to" in message
    assert "set availability_zone_id: use1-az6" in message
    assert monitor.registered == []


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (block_answer(availableInstanceCount=1), "has 1 of 2 instances free, but this stack"),
        (block_answer(instanceType="p5e.48xlarge"), "reserves p5e.48xlarge, but compute nodes"),
        (
            block_answer(state="scheduled"),
            "is scheduled (starts 2026-12-01T11:30:00Z); instances launch into it only when",
        ),
        (block_answer(reservationType="default"), "is a Capacity Reservation, but provider"),
    ],
)
def test_capacity_block_problems_are_named(answer: dict[str, Any], message: str) -> None:
    spec = with_gpus(2, capacity={"market": "capacity-block", "reservation_id": BLOCK})
    text, monitor = refused(spec, calls={BLOCK_TOKEN: answer})
    assert message in text
    assert monitor.registered == []


def test_a_missing_reservation_is_named() -> None:
    def missing(_args: Any) -> dict[str, Any]:
        raise Exception("ResourceNotFoundException: not found")

    spec = with_gpus(2, capacity={"market": "capacity-reservation", "reservation_id": ODCR})
    text, monitor = refused(spec, calls={CLOUD_CONTROL_TOKEN: missing})
    assert f"capacity reservation {ODCR} (island-0) does not exist in us-east-1" in text
    assert monitor.registered == []


# --- Lifecycle ----------------------------------------------------------------------------


def test_instances_and_fleets_are_guarded(aws_dev: Built) -> None:
    machines = aws_dev.of_type("ec2/instance:Instance") + fleets(aws_dev)
    assert len(machines) == 3
    for machine in machines:
        assert machine.protect, machine.name
        assert machine.delete_before_replace, machine.name
        assert machine.replacement_trigger is None, machine.name
    # Nothing ignored (Pulumi rebuilds ignored inputs from the old state, a replacement
    # included); the template version and a fleet's size replace instead of updating.
    for machine in machines:
        assert machine.ignore_changes == (), machine.name
    for instance in aws_dev.of_type("ec2/instance:Instance"):
        assert (
            set(instance.replace_on_changes) == set(NODE_REPLACE_ON_CHANGES) == {"launchTemplate"}
        )
        assert "userData" not in instance.inputs  # the node's cloud-init is in its template
    for fleet in fleets(aws_dev):
        assert set(fleet.replace_on_changes) == set(FLEET_REPLACE_ON_CHANGES)
        assert {"launchTemplateConfigs", "targetCapacitySpecification"} <= set(
            fleet.replace_on_changes
        )


def test_templates_are_pinned_by_version_number_never_latest(aws_dev: Built) -> None:
    for found in aws_dev.of_type("launchTemplate:LaunchTemplate"):
        assert found.inputs["updateDefaultVersion"] is False
    for instance in aws_dev.of_type("ec2/instance:Instance"):
        assert instance.inputs["launchTemplate"]["version"] == "1"
    (fleet,) = fleets(aws_dev)
    (config,) = fleet.inputs["launchTemplateConfigs"]
    assert config["launchTemplateSpecification"]["version"] == "1"
    for text in (json.dumps(r.inputs) for r in aws_dev.resources):
        assert "$Latest" not in text and "$Default" not in text


def test_replacement_is_an_explicit_token_per_node_or_island() -> None:
    built = build_stack(
        spec_with(AWS_DEV), extra={"myriad:replace": {"ctl01": "2026-12-01", "island-0": "r2"}}
    )
    triggers = {
        r.name: r.replacement_trigger
        for r in built.of_type("ec2/instance:Instance") + fleets(built)
    }
    assert triggers == {
        "aws-dev-ctl01": "2026-12-01",
        "aws-dev-login01": None,
        "aws-dev-gpu-island-0": "r2",
    }


def test_a_replace_token_for_an_unknown_node_is_refused() -> None:
    message, monitor = refused(spec_with(AWS_DEV), extra={"myriad:replace": {"gpu99": "x"}})
    assert "myriad:replace names gpu99, which this stack does not hold" in message
    assert monitor.registered == []


def test_protection_follows_the_stack_config() -> None:
    built = build_stack(spec_with(AWS_DEV), extra={"myriad:protectNodes": False})
    assert not any(m.protect for m in built.of_type("ec2/instance:Instance") + fleets(built))


# --- Preflight ----------------------------------------------------------------------------


def test_quota_for_eight_p5_is_1536_vcpus_and_refused_before_any_resource() -> None:
    quotas = {QUOTA_P: 1024.0}

    def quota(args: Any) -> dict[str, Any]:
        return {"value": quotas.get(args["quotaCode"], 4096.0), "id": args["quotaCode"]}

    message, monitor = refused(with_gpus(8), calls={QUOTA_TOKEN: quota})
    assert "8 x p5.48xlarge need 1,536 vCPUs of quota L-417A185B" in message
    assert "Running On-Demand P instances" in message and "is 1,024" in message
    assert "nothing was created" in message
    assert monitor.registered == []


def test_quota_that_fits_passes_and_is_read_per_family(aws_dev: Built) -> None:
    codes = sorted(a["quotaCode"] for t, a in aws_dev.invoked if t == QUOTA_TOKEN)
    assert codes == ["L-1216C47A", "L-417A185B"]
    assert all(a["serviceCode"] == "ec2" for t, a in aws_dev.invoked if t == QUOTA_TOKEN)


def test_capacity_block_nodes_do_not_count_against_on_demand_quota() -> None:
    spec = with_gpus(2, capacity={"market": "capacity-block", "reservation_id": BLOCK})

    def quota(args: Any) -> dict[str, Any]:
        return {"value": 8.0 if args["quotaCode"] == QUOTA_P else 64.0, "id": "q"}

    built = build_stack(spec, calls={BLOCK_TOKEN: block_answer(), QUOTA_TOKEN: quota})
    codes = [a["quotaCode"] for t, a in built.invoked if t == QUOTA_TOKEN]
    assert codes == ["L-1216C47A"]


def test_an_unknown_zone_and_a_type_not_offered_are_refused() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["provider"]["availability_zone_id"] = "use1-az9"

    message, monitor = refused(spec_with(AWS_DEV, edit=edit))
    assert "availability_zone_id use1-az9 is not a zone of us-east-1" in message
    assert monitor.registered == []

    def nothing_offered(_args: Any) -> dict[str, Any]:
        return {"instanceTypes": [], "id": "us-east-1"}

    token = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
    message, monitor = refused(spec_with(AWS_DEV), calls={token: nothing_offered})
    assert "p5.48xlarge is not offered in use1-az4 (us-east-1d)" in message
    assert "m7i.2xlarge is not offered" in message  # every problem at once
    assert monitor.registered == []


class Lookups:
    """An account for the preflight alone, without Pulumi: the protocol's other side."""

    def __init__(self, reservation: Reservation | None = None, quota: float = 4096.0) -> None:
        self.found = reservation
        self.quota = quota
        self.reads: list[str] = []

    def zone(self, zone_id: str) -> Zone | None:
        self.reads.append(f"zone {zone_id}")
        return Zone("us-east-1d", zone_id, "available") if zone_id == "use1-az4" else None

    def offers(self, instance_type: str, zone_id: str) -> bool:
        return True

    def vcpu_quota(self, quota_code: str) -> float | None:
        self.reads.append(f"quota {quota_code}")
        return self.quota

    def reservation(self, reservation_id: str, market: Market) -> Reservation | None:
        self.reads.append(f"reservation {reservation_id} {market}")
        return self.found

    def running(self, cluster: str, tags: Mapping[str, str], reservation_id: str | None) -> int:
        self.reads.append(f"running {cluster} {dict(tags)} {reservation_id}")
        return 0

    def vcpu_usage(self, quota_code: str) -> float | None:
        return None

    def instance_type(self, name: str) -> InstanceFacts | None:
        known = INSTANCE_TYPES[name]
        gpu = (known.gpu_model or "").split("-")[0] or None
        cards = max(known.efa_interfaces, 1)
        return InstanceFacts(
            name, known.vcpus, known.memory_gib, known.efa_interfaces, cards, known.gpu_count, gpu
        )


def _types(spec: Cluster) -> dict[str, Any]:
    return {p.name: instance_type(spec, p.profile) for p in spec.pools}


def test_preflight_through_an_injected_lookups_object() -> None:
    spec = with_gpus(8, capacity={"market": "capacity-reservation", "reservation_id": ODCR})
    scope = scope_for(spec, None)
    reservation = Reservation(ODCR, "default", "p5.48xlarge", "use1-az4", 8, 8, "active")
    lookups = Lookups(reservation)
    checked = preflight(spec, scope, _types(spec), lookups)
    assert checked.zone.name == "us-east-1d" and checked.reservation == reservation
    assert lookups.reads[0] == "zone use1-az4"
    assert f"reservation {ODCR} capacity-reservation" in lookups.reads

    with pytest.raises(StackError, match=r"need 1,536 vCPUs of quota L-417A185B.*is 1,000"):
        preflight(spec, scope, _types(spec), Lookups(reservation, quota=1000.0))


def test_build_with_injected_lookups_refuses_before_the_provider_exists() -> None:
    spec = with_gpus(8)
    monitors: list[RecordingMonitor] = []

    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        aws_build(spec, scope_for(spec, None), settings, Lookups(quota=64.0))
        return {}

    with pytest.raises(StackError, match="1,536 vCPUs"):
        run_program(body, config=stack_config("aws-dev"), monitor_out=monitors)
    assert monitors[0].registered == []


def test_billing_resources_wait_for_the_compute_fleets(aws_dev: Built) -> None:
    assert len(fleets(aws_dev)) == 1
    urn = next(
        d for r in aws_dev.resources for d in r.dependencies if "$aws:ec2/fleet:Fleet::" in d
    )
    nat_ip = aws_dev.named("aws-dev-nat", "ec2/eip:Eip")
    assert urn in nat_ip.dependencies
    for instance in aws_dev.of_type("ec2/instance:Instance"):
        assert urn in instance.dependencies, instance.name
    # The private default route is its own resource, made with the NAT gateway, not inline.
    (private,) = [
        r for r in aws_dev.of_type("ec2/routeTable:RouteTable") if r.name == "aws-dev-private"
    ]
    assert not private.inputs.get("routes")
    (route,) = aws_dev.of_type("ec2/route:Route")
    assert route.inputs["destinationCidrBlock"] == "0.0.0.0/0"
    order = [r.type for r in aws_dev.resources]
    assert order.index("aws:ec2/fleet:Fleet") < order.index("aws:ec2/natGateway:NatGateway")


# --- Fleet, instance profile, S3 endpoint, FSx ---------------------------------------------


def test_fleet_nodes_are_named_in_instance_id_order(aws_dev: Built) -> None:
    nodes = {n["name"]: n for n in aws_dev.outputs["nodes"]}
    gpu = [nodes["gpu01"], nodes["gpu02"]]
    ids = [n["ids"]["instance_id"] for n in gpu]
    assert ids == sorted(ids)
    assert all(n["ids"]["fleet_id"].startswith("fleet-") for n in gpu)
    assert all(n["address"].startswith("10.42.") for n in gpu)
    got = [a["instanceId"] for t, a in aws_dev.invoked if t == "aws:ec2/getInstance:getInstance"]
    assert sorted(got) == ids
    assert [n["name"] for n in aws_dev.outputs["nodes"]] == [
        n.name for n in iter_nodes(spec_with(AWS_DEV))
    ]


def test_a_fleet_of_another_size_than_its_island_is_named() -> None:
    nodes = tuple(n for n in iter_nodes(spec_with(AWS_DEV)) if n.role == "compute")
    assert fleet_instance_ids([{"instanceIds": ["i-2", "i-1"]}], nodes, "x (island-0)") == [
        "i-1",
        "i-2",
    ]
    with pytest.raises(StackError, match=r"launched 1 instances, but the spec gives it 2"):
        fleet_instance_ids([{"instanceIds": ["i-1"]}], nodes, "aws-dev island 0 (island-0)")


def test_every_node_gets_the_instance_profile(aws_dev: Built) -> None:
    (profile,) = aws_dev.of_type("iam/instanceProfile:InstanceProfile")
    (role,) = aws_dev.of_type("iam/role:Role")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    for found in aws_dev.of_type("launchTemplate:LaunchTemplate"):
        assert found.inputs["iamInstanceProfile"] == {"name": "aws-dev-node-profile"}
    assert profile.name == "aws-dev-node"


def test_s3_gateway_endpoint_serves_both_route_tables(aws_dev: Built) -> None:
    (endpoint,) = aws_dev.of_type("ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert sorted(endpoint.inputs["routeTableIds"]) == ["aws-dev-private-id", "aws-dev-public-id"]


def test_fsx_for_lustre_storage() -> None:
    def fsx(data: dict[str, Any]) -> None:
        data["storage"] = {
            "kind": "fsx-lustre",
            "mount": "/fsx",
            "fsx": {"capacity_gib": 4800, "throughput_mbps_per_tib": 500},
        }

    built = build_stack(spec_with(AWS_DEV, edit=fsx))
    (lustre,) = built.of_type("fsx/lustreFileSystem:LustreFileSystem")
    assert lustre.inputs["storageCapacity"] == 4800
    assert lustre.inputs["deploymentType"] == "PERSISTENT_2"
    assert lustre.inputs["perUnitStorageThroughput"] == 500
    assert lustre.inputs["subnetIds"] == "aws-dev-private-id"
    assert lustre.protect
    assert built.outputs["storage"] == {
        "kind": "fsx-lustre",
        "dns_name": "fs-aws-dev-lustre.fsx.us-east-1.amazonaws.com",
        "mount_name": "abcdef01",
        "mount": "/fsx",
    }


def test_instance_types_name_their_quota() -> None:
    assert INSTANCE_TYPES["p5.48xlarge"].quota_code == QUOTA_P
    assert INSTANCE_TYPES["g6e.48xlarge"].quota_code == "L-DB2E81BA"
    assert INSTANCE_TYPES["m7i.large"].quota_code == "L-1216C47A"
    assert 8 * INSTANCE_TYPES["p5.48xlarge"].vcpus == 1536
