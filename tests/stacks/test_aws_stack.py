"""The aws provider under Pulumi mocks: the resource graph for the aws-dev example and variants.

Exercised: stacks.program.build with the config read from Pulumi.aws-dev.yaml, stacks.aws,
stacks.instance_types, and the preflight's reads answered by the mocks' invokes (an account
with room for everything; tests/stacks/test_aws_policies.py varies it). Not exercised: the
AWS API (no account here).
"""

from __future__ import annotations

import base64
import ipaddress
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from myriad.plan.nodes import iter_nodes
from myriad.provision.stack_outputs import match_spec, parse_nodes
from myriad.spec.models import Cluster
from stacks.interface import StackError
from stacks.program import build
from stacks.settings import read_settings

from stack_harness import ADMIN_KEY, REPO, Built, run_program, spec_with, stack_config, walk

AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"
UNTAGGABLE = (
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:ec2/route:Route",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:resourcegroups/resource:Resource",
    "pulumi:providers:aws",
)


def build_stack(
    spec: Cluster,
    *,
    extra: dict[str, Any] | None = None,
    shared: dict[str, str] | None = None,
    calls: dict[str, Any] | None = None,
) -> Built:
    config = {**stack_config("aws-dev"), **(extra or {})}

    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        result = build(spec, settings)
        return {"nodes": result.nodes, **result.outputs}

    return run_program(body, config=config, shared_network=shared, calls=calls)


@pytest.fixture(scope="module")
def aws_dev_stack() -> Built:
    return build_stack(spec_with(AWS_DEV))


def templates_by_pool(built: Built) -> dict[str, Any]:
    return {
        r.inputs["tags"]["myriad:pool"]: r.inputs
        for r in built.of_type("launchTemplate:LaunchTemplate")
    }


def test_resource_counts_per_pool(aws_dev_stack: Built) -> None:
    instances = aws_dev_stack.of_type("ec2/instance:Instance")
    assert sorted(i.inputs["tags"]["myriad:pool"] for i in instances) == ["ctl", "login"]
    # The compute island is one EC2 Fleet request for both nodes, not one call per node.
    (fleet,) = aws_dev_stack.of_type("ec2/fleet:Fleet")
    assert fleet.inputs["type"] == "instant"
    assert fleet.inputs["targetCapacitySpecification"]["totalTargetCapacity"] == 2
    assert len(aws_dev_stack.of_type("launchTemplate:LaunchTemplate")) == 3
    assert len(aws_dev_stack.of_type("ec2/vpc:Vpc")) == 1
    assert len(aws_dev_stack.of_type("ec2/subnet:Subnet")) == 2
    assert len(aws_dev_stack.of_type("ec2/securityGroup:SecurityGroup")) == 1
    # One Elastic IP for the NAT gateway and one for the login node, none for the others.
    assert len(aws_dev_stack.of_type("ec2/eip:Eip")) == 2


def test_instance_types_come_from_the_profiles(aws_dev_stack: Built) -> None:
    templates = templates_by_pool(aws_dev_stack)
    assert templates["gpu"]["instanceType"] == "p5.48xlarge"
    # head: 1 socket x 4 cores x 2 threads = 8 vCPUs, 32 GiB.
    assert templates["ctl"]["instanceType"] == "m7i.2xlarge"
    assert templates["login"]["instanceType"] == "m7i.2xlarge"


def test_p5_gets_32_efa_interfaces_one_per_network_card(aws_dev_stack: Built) -> None:
    interfaces = templates_by_pool(aws_dev_stack)["gpu"]["networkInterfaces"]
    efa = [i for i in interfaces if i.get("interfaceType") == "efa-only"]
    primary = [i for i in interfaces if "interfaceType" not in i]
    assert len(efa) == 32
    assert sorted(i["networkCardIndex"] for i in efa) == list(range(32))
    assert [(i["networkCardIndex"], i["deviceIndex"]) for i in primary] == [(0, 0)]
    # Card 0 carries the primary ENA interface at device 0, so its EFA-only one is device 1.
    assert [i["deviceIndex"] for i in efa if i["networkCardIndex"] == 0] == [1]
    assert all(i["deviceIndex"] == 0 for i in efa if i["networkCardIndex"] > 0)
    cpu_interfaces = templates_by_pool(aws_dev_stack)["ctl"]["networkInterfaces"]
    assert len(cpu_interfaces) == 1 and "interfaceType" not in cpu_interfaces[0]


def test_compute_nodes_share_the_islands_placement_group(aws_dev_stack: Built) -> None:
    groups = aws_dev_stack.of_type("placementGroup:PlacementGroup")
    assert [(g.name, g.inputs["strategy"]) for g in groups] == [("aws-dev-island-0", "cluster")]
    templates = templates_by_pool(aws_dev_stack)
    assert templates["gpu"]["placement"] == {"groupName": "aws-dev-island-0-pg"}
    assert "placement" not in templates["ctl"] and "placement" not in templates["login"]
    for instance in aws_dev_stack.of_type("ec2/instance:Instance"):
        assert "placementGroup" not in instance.inputs


def test_every_taggable_resource_is_tagged(aws_dev_stack: Built) -> None:
    for resource in aws_dev_stack.resources:
        if not resource.type.startswith("aws:") or resource.type in UNTAGGABLE:
            continue
        tags = resource.inputs.get("tags", {})
        assert tags.get("myriad:cluster") == "aws-dev", f"{resource.type} {resource.name}"
    for instance in aws_dev_stack.of_type("ec2/instance:Instance"):
        tags = instance.inputs["tags"]
        assert tags["Name"] in {n.name for n in iter_nodes(spec_with(AWS_DEV))}
        assert {"myriad:pool", "myriad:role"} <= set(tags)
        assert ("myriad:island" in tags) == (tags["myriad:role"] == "compute")
        assert instance.inputs["volumeTags"] == tags
    for template in aws_dev_stack.of_type("launchTemplate:LaunchTemplate"):
        kinds = {spec["resourceType"] for spec in template.inputs["tagSpecifications"]}
        assert kinds == {"instance", "volume", "network-interface"}


def test_ssh_is_open_to_the_admin_network_only(aws_dev_stack: Built) -> None:
    (group,) = aws_dev_stack.of_type("ec2/securityGroup:SecurityGroup")
    ingress = group.inputs["ingress"]
    for rule in ingress:
        assert not {"0.0.0.0/0", "::/0"} & set(
            rule.get("cidrBlocks", []) + rule.get("ipv6CidrBlocks", [])
        )
    ssh = [r for r in ingress if r["protocol"] == "tcp" and r["fromPort"] <= 22 <= r["toPort"]]
    assert ssh == [ssh[0]] and ssh[0]["cidrBlocks"] == ["203.0.113.0/24"]
    # EFA needs all traffic to and from the group's own members, both ways.
    assert any(r["protocol"] == "-1" and r.get("self") for r in ingress)
    assert any(r["protocol"] == "-1" and r.get("self") for r in group.inputs["egress"])


def _check_cloud_config(text: str) -> dict[str, Any]:
    assert text.startswith("#cloud-config\n")
    lowered = text.lower()
    assert "password" not in lowered and "private key" not in lowered
    assert "secret" not in lowered
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def node_user_data(built: Built, node: str) -> str:
    """A controller, login or storage node's cloud-init: in its own launch template."""
    found = built.named(f"aws-dev-{node}", "launchTemplate:LaunchTemplate")
    return base64.b64decode(found.inputs["userData"]).decode()


def test_user_data_names_the_node_and_holds_no_secret(aws_dev_stack: Built) -> None:
    for instance in aws_dev_stack.of_type("ec2/instance:Instance"):
        name = instance.inputs["tags"]["Name"]
        document = _check_cloud_config(node_user_data(aws_dev_stack, name))
        assert document["hostname"] == name
        # The instance takes it from the template version it names, never on its own.
        assert "userData" not in instance.inputs
    templates = templates_by_pool(aws_dev_stack)
    # A fleet's instances are identical: the pool's identity, no host name (the stack names
    # them, the bring-up sets the name).
    document = _check_cloud_config(base64.b64decode(templates["gpu"]["userData"]).decode())
    assert "hostname" not in document
    identity = json.loads(document["write_files"][0]["content"])
    assert identity == {"cluster": "aws-dev", "pool": "gpu"}


def test_no_value_is_marked_secret_and_none_leaks(aws_dev_stack: Built) -> None:
    # The aws stack reads no secret; nothing it sends may look like one either.
    for resource in aws_dev_stack.resources:
        for path, value, _secret in walk(resource.inputs):
            assert not (isinstance(value, str) and "PRIVATE KEY" in value), path


def test_root_volume_and_instance_metadata(aws_dev_stack: Built) -> None:
    template = templates_by_pool(aws_dev_stack)["gpu"]
    (mapping,) = template["blockDeviceMappings"]
    assert mapping["deviceName"] == "/dev/sda1"
    assert mapping["ebs"] == {
        "volumeSize": 500,
        "volumeType": "gp3",
        "encrypted": "true",
        "deleteOnTermination": "true",
    }
    assert template["imageId"].startswith("resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/")
    assert template["metadataOptions"]["httpTokens"] == "required"
    assert template["keyName"] == "myriad-admin"
    (provider,) = aws_dev_stack.of_type("pulumi:providers:aws")
    assert provider.inputs["region"] == "us-east-1"


def test_outputs_are_what_the_inventory_reads(aws_dev_stack: Built) -> None:
    spec = spec_with(AWS_DEV)
    nodes = parse_nodes({"nodes": aws_dev_stack.outputs["nodes"]})
    by_name = match_spec(spec, nodes)
    assert list(by_name) == [n.name for n in iter_nodes(spec)]
    vpc = ipaddress.ip_network("10.42.0.0/16")
    for node in nodes:
        assert ipaddress.ip_address(node.address) in vpc
        assert node.ids["instance_id"].startswith("i-")
        assert (node.public_address is not None) == (node.role == "login")
    assert set(aws_dev_stack.outputs["network"]) == {
        "vpc_id",
        "public_subnet_id",
        "private_subnet_id",
        "security_group_id",
        "instance_profile",
    }


def test_names_are_stable_across_runs(aws_dev_stack: Built) -> None:
    again = build_stack(spec_with(AWS_DEV))

    def shape(built: Built) -> list[tuple[str, str, str]]:
        return sorted((r.type, r.name, str(r.inputs.get("userData"))) for r in built.resources)

    assert shape(again) == shape(aws_dev_stack)


def test_ssh_keys_from_the_stack_config_go_into_user_data() -> None:
    built = build_stack(spec_with(AWS_DEV), extra={"myriad:sshAuthorizedKeys": [ADMIN_KEY]})
    for node in ("ctl01", "login01"):
        assert yaml.safe_load(node_user_data(built, node))["ssh_authorized_keys"] == [ADMIN_KEY]
    gpu = templates_by_pool(built)["gpu"]["userData"]
    assert yaml.safe_load(base64.b64decode(gpu))["ssh_authorized_keys"] == [ADMIN_KEY]


def per_island(data: dict[str, Any]) -> None:
    data["provider"]["stack_per_island"] = True
    data["pools"][2]["count"] = 40
    data["network"]["topology"]["island_nodes"] = 16


SHARED = {
    "vpc_id": "vpc-shared",
    "public_subnet_id": "subnet-public",
    "private_subnet_id": "subnet-private",
    "security_group_id": "sg-shared",
    "instance_profile": "aws-dev-node-profile",
}


def test_island_stack_holds_its_island_and_uses_the_shared_network() -> None:
    spec = spec_with(AWS_DEV, edit=per_island)
    built = build_stack(
        spec,
        extra={"myriad:island": 1, "myriad:sharedStack": "acme/myriad/aws-dev"},
        shared=SHARED,
    )
    assert not built.of_type("ec2/instance:Instance")
    (fleet,) = built.of_type("ec2/fleet:Fleet")
    assert fleet.inputs["tags"]["myriad:island"] == "1"
    assert fleet.inputs["targetCapacitySpecification"]["totalTargetCapacity"] == 16
    names = [n["name"] for n in built.outputs["nodes"]]
    assert names == [f"gpu{n:02d}" for n in range(17, 33)]
    assert [g.name for g in built.of_type("placementGroup:PlacementGroup")] == ["aws-dev-island-1"]
    assert not built.of_type("ec2/vpc:Vpc") and not built.of_type("securityGroup:SecurityGroup")
    (reference,) = built.of_type("pulumi:pulumi:StackReference")
    assert reference.name == "acme/myriad/aws-dev"
    (template,) = built.of_type("launchTemplate:LaunchTemplate")
    assert {i["subnetId"] for i in template.inputs["networkInterfaces"]} == {"subnet-private"}
    assert template.inputs["iamInstanceProfile"] == {"name": "aws-dev-node-profile"}
    assert "network" not in built.outputs
    match_spec(spec, parse_nodes({"nodes": built.outputs["nodes"]}), require_all=False)


def test_shared_stack_holds_the_network_and_the_non_compute_nodes() -> None:
    built = build_stack(spec_with(AWS_DEV, edit=per_island))
    names = sorted(i.inputs["tags"]["Name"] for i in built.of_type("ec2/instance:Instance"))
    assert names == ["ctl01", "login01"]
    assert not built.of_type("placementGroup:PlacementGroup")
    assert len(built.of_type("ec2/vpc:Vpc")) == 1
    assert "network" in built.outputs


def test_island_stack_without_a_shared_stack_is_refused() -> None:
    with pytest.raises(StackError, match="myriad:sharedStack is not set"):
        build_stack(spec_with(AWS_DEV, edit=per_island), extra={"myriad:island": 0})


def test_island_out_of_range_is_refused() -> None:
    with pytest.raises(StackError, match="islands 0 to 2"):
        build_stack(spec_with(AWS_DEV, edit=per_island), extra={"myriad:island": 3})


def test_island_config_needs_a_per_island_spec() -> None:
    with pytest.raises(StackError, match="stack_per_island"):
        build_stack(spec_with(AWS_DEV), extra={"myriad:island": 0})


def test_a_profile_without_an_instance_type_is_a_clear_error() -> None:
    def blackwell(data: dict[str, Any]) -> None:
        data["profiles"]["p5-node"]["gpu"] = {"model": "B200-SXM-180GB", "count": 8}

    with pytest.raises(StackError, match=r"8 x B200-SXM-180GB\) maps to no AWS instance type"):
        build_stack(spec_with(AWS_DEV, edit=blackwell))


def test_an_override_picks_another_type_of_the_same_shape() -> None:
    def h200_on_p5e(data: dict[str, Any]) -> None:
        data["profiles"]["p5-node"]["gpu"] = {"model": "H200-SXM-141GB", "count": 8}
        data["provider"]["instance_types"] = {"p5-node": "p5e.48xlarge"}

    template = templates_by_pool(build_stack(spec_with(AWS_DEV, edit=h200_on_p5e)))["gpu"]
    assert template["instanceType"] == "p5e.48xlarge"
    assert sum(i.get("interfaceType") == "efa-only" for i in template["networkInterfaces"]) == 32


def test_an_override_of_another_gpu_shape_is_refused() -> None:
    def wrong(data: dict[str, Any]) -> None:
        data["provider"]["instance_types"] = {"p5-node": "p4d.24xlarge"}

    with pytest.raises(StackError, match=r"8 x A100-SXM4-40GB.*8 x H100-SXM5-80GB"):
        build_stack(spec_with(AWS_DEV, edit=wrong))


def test_a_management_network_too_small_for_the_nodes_is_refused() -> None:
    def narrow(data: dict[str, Any]) -> None:
        data["network"]["addressing"]["management"] = "10.42.0.0/24"
        data["pools"][2]["count"] = 200

    with pytest.raises(StackError, match=r"widen network\.addressing\.management"):
        build_stack(spec_with(AWS_DEV, edit=narrow))


def test_the_committed_stack_file_names_the_example(tmp_path: Path) -> None:
    assert stack_config("aws-dev")["myriad:spec"] == "inventories/aws-dev/cluster.yaml"
