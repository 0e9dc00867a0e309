"""The aws stack on day 2 (issue 26), under Pulumi mocks: a second `pulumi up` on a full
reservation, a short fleet, replacements with new inputs, a reservation per island.

Exercised: stacks.aws and stacks.aws_preflight through `build`, with the preflight's reads
answered by the mocks' invokes (`FakeCloud.call`) and fleets that launch what a test says
(`launched`). Not exercised: the Pulumi engine's diff (the tests assert the options it would
receive: `replace_on_changes`, `replacement_trigger`, dependencies) and the AWS API.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from myriad.spec.models import Cluster
from stacks.interface import StackError
from stacks.program import build
from stacks.settings import read_settings

from stack_harness import REPO, Built, RecordingMonitor, run_program, spec_with, stack_config

AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"
BLOCK = "cr-0b10c4000000000aa"
BLOCK_2 = "cr-0b10c4000000000bb"
BLOCK_TOKEN = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
INSTANCES_TOKEN = "aws:ec2/getInstances:getInstances"
BILLING = (
    "ec2/natGateway:NatGateway",
    "ec2/eip:Eip",
    "ec2/instance:Instance",
    "fsx/lustreFileSystem:LustreFileSystem",
)


def run(
    spec: Cluster,
    *,
    extra: dict[str, Any] | None = None,
    calls: dict[str, Any] | None = None,
    launched: dict[str, int] | None = None,
    template_versions: dict[str, int] | None = None,
    monitors: list[RecordingMonitor] | None = None,
) -> Built:
    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        result = build(spec, settings)
        return {"nodes": result.nodes, **result.outputs}

    return run_program(
        body,
        config={**stack_config("aws-dev"), **(extra or {})},
        calls=calls,
        launched=launched,
        template_versions=template_versions,
        monitor_out=monitors,
    )


def refused(spec: Cluster, **kwargs: Any) -> tuple[str, RecordingMonitor]:
    monitors: list[RecordingMonitor] = []
    with pytest.raises(StackError) as caught:
        run(spec, monitors=monitors, **kwargs)
    return str(caught.value), monitors[0]


def gpus(count: int, island_nodes: int | None = None, **capacity: Any) -> Cluster:
    def edit(data: dict[str, Any]) -> None:
        data["pools"][2]["count"] = count
        if island_nodes is not None:
            data["network"]["topology"]["island_nodes"] = island_nodes
        if capacity:
            data["provider"]["capacity"] = capacity

    return spec_with(AWS_DEV, edit=edit)


def block(**overrides: Any) -> dict[str, Any]:
    rid = overrides.pop("id", BLOCK)
    answer = {
        "id": rid,
        "arn": f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{rid}",
        "reservationType": "capacity-block",
        "instanceType": "p5.48xlarge",
        "availabilityZone": "us-east-1d",
        "availabilityZoneId": "use1-az4",
        "availableInstanceCount": 2,
        "instanceCount": 2,
        "state": "active",
        "startDate": "2026-12-01T11:30:00Z",
        "endDate": "2026-12-15T11:30:00Z",
        "placementGroupArn": "",
    }
    return {**answer, **overrides}


def running_in(counts: dict[tuple[str, str | None], int]) -> Any:
    """get_instances: `counts[(island, reservation)]` of the cluster's instances run there."""

    def answer(args: dict[str, Any]) -> dict[str, Any]:
        tags = args.get("instanceTags", {})
        assert tags.get("myriad:cluster") == "aws-dev"
        assert set(args["instanceStateNames"]) == {"pending", "running"}
        filters = {f["name"]: f["values"] for f in args.get("filters") or []}
        reservation = filters.get("capacity-reservation-id", [None])[0]
        n = counts.get((tags.get("myriad:island", ""), reservation), 0)
        ids = [f"i-{n:04d}{k:013x}" for k in range(n)]
        return {"ids": ids, "privateIps": [], "publicIps": [], "id": "x"}

    return answer


# --- 1. a second `pulumi up` on a full reservation ------------------------------------------


def test_a_full_block_holding_the_stacks_own_nodes_passes_the_preflight() -> None:
    # The island launched on the first `up`: both nodes run in the block, none is free.
    spec = gpus(2, market="capacity-block", reservation_id=BLOCK)
    full = block(availableInstanceCount=0)
    built = run(spec, calls={BLOCK_TOKEN: full, INSTANCES_TOKEN: running_in({("0", BLOCK): 2})})
    assert len(built.of_type("ec2/fleet:Fleet")) == 1
    reads = [a for t, a in built.invoked if t == INSTANCES_TOKEN]
    assert reads[0]["instanceTags"] == {"myriad:cluster": "aws-dev", "myriad:island": "0"}


def test_a_full_block_without_the_stacks_nodes_is_still_refused() -> None:
    spec = gpus(2, market="capacity-block", reservation_id=BLOCK)
    message, monitor = refused(spec, calls={BLOCK_TOKEN: block(availableInstanceCount=0)})
    assert f"{BLOCK} has 0 of 2 instances free, but this stack launches 2" in message
    assert monitor.registered == []


def test_only_the_nodes_not_yet_running_need_free_places() -> None:
    # Island grown from 2 to 3 nodes: 2 run in the block, 1 more place is needed.
    spec = gpus(3, market="capacity-block", reservation_id=BLOCK)
    answer = block(availableInstanceCount=0, instanceCount=3)
    message, _ = refused(
        spec, calls={BLOCK_TOKEN: answer, INSTANCES_TOKEN: running_in({("0", BLOCK): 2})}
    )
    assert "has 0 of 3 instances free, but this stack launches 1 compute nodes" in message
    assert "2 run in it already" in message
    run(
        spec,
        calls={
            BLOCK_TOKEN: block(availableInstanceCount=1, instanceCount=3),
            INSTANCES_TOKEN: running_in({("0", BLOCK): 2}),
        },
    )


def test_an_ended_block_is_named_with_the_way_out() -> None:
    spec = gpus(2, market="capacity-block", reservation_id=BLOCK)
    ended = block(state="expired", availableInstanceCount=0)
    message, monitor = refused(spec, calls={BLOCK_TOKEN: ended})
    assert f"{BLOCK} (island-0) ended at 2026-12-15T11:30:00Z (expired)" in message
    assert "island_reservations" in message and "myriad:replace.island-<n>" in message
    assert "only when active" not in message  # not mistaken for a block that has not started
    assert monitor.registered == []


# --- 2. a short or empty fleet leaves nothing billing ---------------------------------------


@pytest.mark.parametrize("launched", [1, 0])
def test_a_short_fleet_stops_everything_that_bills(launched: int) -> None:
    def fsx(data: dict[str, Any]) -> None:
        data["storage"] = {"kind": "fsx-lustre", "mount": "/fsx", "fsx": {"capacity_gib": 1200}}

    monitors: list[RecordingMonitor] = []
    with pytest.raises(Exception, match=f"launched {launched} instances, but the spec gives it 2"):
        run(
            spec_with(AWS_DEV, edit=fsx),
            launched={"aws-dev-gpu-island-0": launched},
            monitors=monitors,
        )
    registered = monitors[0].registered
    assert [r.name for r in registered if r.type == "aws:ec2/fleet:Fleet"] == [
        "aws-dev-gpu-island-0"
    ]
    billing = [r.name for r in registered if r.type.endswith(BILLING)]
    assert billing == []


def test_billing_resources_depend_on_the_checked_fleet() -> None:
    def fsx(data: dict[str, Any]) -> None:
        data["storage"] = {"kind": "fsx-lustre", "mount": "/fsx", "fsx": {"capacity_gib": 1200}}

    built = run(spec_with(AWS_DEV, edit=fsx))
    (fleet,) = built.of_type("ec2/fleet:Fleet")
    urn = next(d for r in built.resources for d in r.dependencies if "fleet:Fleet::" in d)
    assert urn.endswith(fleet.name)
    for resource in (
        built.named("aws-dev-nat", "ec2/eip:Eip"),
        built.named("aws-dev-lustre", "fsx/lustreFileSystem:LustreFileSystem"),
        *built.of_type("ec2/instance:Instance"),
    ):
        assert urn in resource.dependencies, resource.name


# --- 3. replacements come back with the new inputs ------------------------------------------


def test_machines_launch_the_pinned_template_version_and_replace_when_it_changes() -> None:
    built = run(spec_with(AWS_DEV), template_versions={"aws-dev-gpu-island-0": 3})
    (fleet,) = built.of_type("ec2/fleet:Fleet")
    (config,) = fleet.inputs["launchTemplateConfigs"]
    # A template at version 3 after two edits: the island still names version 1.
    assert config["launchTemplateSpecification"]["version"] == "1"
    assert "launchTemplateConfigs" in fleet.replace_on_changes

    pinned = run(
        spec_with(AWS_DEV),
        extra={"myriad:templateVersions": {"island-0": 3, "ctl01": "1"}},
        template_versions={"aws-dev-gpu-island-0": 3},
    )
    (fleet,) = pinned.of_type("ec2/fleet:Fleet")
    (config,) = fleet.inputs["launchTemplateConfigs"]
    assert config["launchTemplateSpecification"]["version"] == "3"
    assert not fleet.ignore_changes
    ctl = pinned.named("aws-dev-ctl01", "ec2/instance:Instance")
    assert ctl.inputs["launchTemplate"]["version"] == "1"
    assert "launchTemplate" in ctl.replace_on_changes


def test_a_version_the_template_does_not_have_is_refused_before_the_machine() -> None:
    monitors: list[RecordingMonitor] = []
    with pytest.raises(Exception, match=r"templateVersions.island-0 is 4, but the launch"):
        run(
            spec_with(AWS_DEV),
            extra={"myriad:templateVersions": {"island-0": 4}},
            template_versions={"aws-dev-gpu-island-0": 3},
            monitors=monitors,
        )
    assert not [r for r in monitors[0].registered if r.type == "aws:ec2/fleet:Fleet"]


def test_a_resized_island_replaces_its_fleet_at_the_new_size() -> None:
    (fleet,) = run(gpus(3)).of_type("ec2/fleet:Fleet")
    assert fleet.inputs["targetCapacitySpecification"]["totalTargetCapacity"] == 3
    assert fleet.inputs["onDemandOptions"]["minTargetCapacity"] == 3
    assert "targetCapacitySpecification" in fleet.replace_on_changes
    assert fleet.delete_before_replace


@pytest.mark.parametrize("key", ["replace", "templateVersions"])
def test_a_single_compute_node_cannot_be_replaced_alone(key: str) -> None:
    message, monitor = refused(spec_with(AWS_DEV), extra={f"myriad:{key}": {"gpu02": "2"}})
    assert f"myriad:{key} names compute node gpu02" in message
    assert "use island-0 instead" in message
    assert monitor.registered == []


def test_template_versions_must_be_numbers() -> None:
    with pytest.raises(StackError, match="templateVersions must map node names"):
        run(spec_with(AWS_DEV), extra={"myriad:templateVersions": {"ctl01": "latest"}})


# --- 5. a reservation per island, Capacity Blocks of at most 64 -------------------------------


def two_blocks() -> dict[str, Any]:
    def answer(args: dict[str, Any]) -> dict[str, Any]:
        return block(id=args["id"])

    return {BLOCK_TOKEN: answer}


def test_each_island_launches_into_its_own_block() -> None:
    spec = gpus(
        4,
        island_nodes=2,
        market="capacity-block",
        reservation_id=BLOCK,
        island_reservations={"island-1": BLOCK_2},
    )
    built = run(spec, calls=two_blocks())
    targets = {
        t.inputs["tags"]["myriad:island"]: t.inputs["capacityReservationSpecification"]
        for t in built.of_type("launchTemplate:LaunchTemplate")
        if "myriad:island" in t.inputs["tags"]
    }
    assert targets == {
        "0": {"capacityReservationTarget": {"capacityReservationId": BLOCK}},
        "1": {"capacityReservationTarget": {"capacityReservationId": BLOCK_2}},
    }
    read = sorted(a["id"] for t, a in built.invoked if t == BLOCK_TOKEN)
    assert read == [BLOCK, BLOCK_2]


def test_each_block_is_checked_for_its_own_islands() -> None:
    spec = gpus(
        4,
        island_nodes=2,
        market="capacity-block",
        reservation_id=BLOCK,
        island_reservations={"island-1": BLOCK_2},
    )

    def answer(args: dict[str, Any]) -> dict[str, Any]:
        free = 1 if args["id"] == BLOCK_2 else 2
        return block(id=args["id"], availableInstanceCount=free)

    message, _ = refused(spec, calls={BLOCK_TOKEN: answer})
    assert f"{BLOCK_2} has 1 of 2 instances free, but this stack launches 2 compute nodes" in (
        message
    )
    assert "(island-1;" in message and f"{BLOCK} has" not in message


def test_an_island_larger_than_a_capacity_block_is_refused() -> None:
    spec = gpus(70, island_nodes=70, market="capacity-block", reservation_id=BLOCK)
    message, monitor = refused(spec, calls={BLOCK_TOKEN: block(instanceCount=70)})
    assert "island-0 has 70 nodes, but a Capacity Block holds at most 64 instances" in message
    assert monitor.registered == []


def test_a_reservation_for_an_island_the_spec_lacks_is_refused() -> None:
    spec = gpus(
        2, market="capacity-block", reservation_id=BLOCK, island_reservations={"island-4": BLOCK_2}
    )
    message, _ = refused(spec, calls=two_blocks())
    assert "island_reservations names island-4, but the spec's compute islands are island-0" in (
        message
    )


def test_a_block_in_a_placement_group_launches_into_that_group() -> None:
    spec = gpus(2, market="capacity-block", reservation_id=BLOCK)
    arn = "arn:aws:ec2:us-east-1:123456789012:placement-group/ultracluster-7"
    built = run(spec, calls={BLOCK_TOKEN: block(placementGroupArn=arn)})
    assert not built.of_type("placementGroup:PlacementGroup")
    (island,) = [
        t
        for t in built.of_type("launchTemplate:LaunchTemplate")
        if "myriad:island" in t.inputs["tags"]
    ]
    assert island.inputs["placement"] == {"groupName": "ultracluster-7"}


# --- instance types from the API (DescribeInstanceTypes) ------------------------------------

TYPE_TOKEN = "aws:ec2/getInstanceType:getInstanceType"


def blackwell(override: str) -> Cluster:
    def edit(data: dict[str, Any]) -> None:
        data["profiles"]["p5-node"]["gpu"] = {"model": "B200-SXM-180GB", "count": 8}
        data["profiles"]["p5-node"]["nics"] = {"compute": {"model": "AWS-EFA", "count": 8}}
        data["provider"]["instance_types"] = {"p5-node": override}

    return spec_with(AWS_DEV, edit=edit)


def test_a_type_the_table_lacks_takes_its_efa_interfaces_from_the_api() -> None:
    built = run(blackwell("p6-b200.48xlarge"))
    (island,) = [
        t
        for t in built.of_type("launchTemplate:LaunchTemplate")
        if "myriad:island" in t.inputs["tags"]
    ]
    assert island.inputs["instanceType"] == "p6-b200.48xlarge"
    efa = [i for i in island.inputs["networkInterfaces"] if i.get("interfaceType") == "efa-only"]
    assert sorted(i["networkCardIndex"] for i in efa) == list(range(8))
    asked = [a["instanceType"] for t, a in built.invoked if t == TYPE_TOKEN]
    assert sorted(asked) == ["m7i.2xlarge", "p6-b200.48xlarge"]


def test_an_override_whose_gpus_the_api_contradicts_is_refused() -> None:
    def h100_on_b200(data: dict[str, Any]) -> None:
        data["provider"]["instance_types"] = {"p5-node": "p6-b200.48xlarge"}

    message, monitor = refused(spec_with(AWS_DEV, edit=h100_on_b200))
    assert (
        "pool gpu (profile p5-node) is p6-b200.48xlarge, which has 8 x B200, but the profile "
        "has 8 x H100-SXM5-80GB"
    ) in message
    assert monitor.registered == []


def test_a_type_the_api_does_not_know_is_refused() -> None:
    def unknown(args: dict[str, Any]) -> dict[str, Any]:
        raise Exception(f"InvalidInstanceType: {args['instanceType']}")

    message, monitor = refused(blackwell("p6-b200.48xlarge"), calls={TYPE_TOKEN: unknown})
    assert "p6-b200.48xlarge is not an instance type in us-east-1" in message
    assert "m7i.2xlarge is not an instance type" in message  # every problem at once
    assert monitor.registered == []


# --- login nodes: instance metadata for root only ---------------------------------------------


def test_only_root_reaches_instance_metadata_on_login_nodes() -> None:
    import base64
    import subprocess

    import yaml

    built = run(spec_with(AWS_DEV))

    def cloud_config(node: str) -> dict[str, Any]:
        found = built.named(f"aws-dev-{node}", "launchTemplate:LaunchTemplate")
        document: dict[str, Any] = yaml.safe_load(base64.b64decode(found.inputs["userData"]))
        return document

    (command,) = cloud_config("login01")["bootcmd"]
    assert "-d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT" in command
    assert "meta skuid != 0 reject" in command
    subprocess.run(["bash", "-n", "-c", command], check=True)  # a shell line that parses
    assert "bootcmd" not in cloud_config("ctl01")
    island = [
        t
        for t in built.of_type("launchTemplate:LaunchTemplate")
        if "myriad:island" in t.inputs["tags"]
    ]
    assert "bootcmd" not in yaml.safe_load(base64.b64decode(island[0].inputs["userData"]))


def test_a_reservation_gone_while_its_nodes_run_does_not_block_the_next_up() -> None:
    # An On-Demand Capacity Reservation that expired is not found at all; its instances run
    # on as On-Demand instances. With every node running, nothing needs its capacity.
    odcr = "cr-0123456789abcdef0"

    def missing(_args: dict[str, Any]) -> dict[str, Any]:
        raise Exception("ResourceNotFoundException: not found")

    spec = gpus(2, market="capacity-reservation", reservation_id=odcr)
    calls = {
        "aws:cloudcontrol/getResource:getResource": missing,
        INSTANCES_TOKEN: running_in({("0", odcr): 2}),
    }
    (fleet,) = run(spec, calls=calls).of_type("ec2/fleet:Fleet")
    # The fleet's inputs as they were: a changed capacity option would replace the island.
    assert fleet.inputs["onDemandOptions"]["capacityReservationOptions"] == {
        "usageStrategy": "use-capacity-reservations-first"
    }
    message, _ = refused(spec, calls={"aws:cloudcontrol/getResource:getResource": missing})
    assert f"capacity reservation {odcr} (island-0) does not exist" in message
