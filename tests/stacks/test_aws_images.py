"""The aws provider in image mode under Pulumi mocks: Image Builder, the AMI, the seeds.

Exercised: stacks.aws_images (kits from the image records, the component document, the seed
unit) through stacks.program.build for the aws-dev example with `bringup.mode: image` and a
state folder holding a kit for profile p5-node; the same example in push mode. The seed
fetcher's shell is checked by `sh -n` and its digest file by `sha256sum -c`.
Not exercised: AWS (Image Builder's build, S3, IMDS), the kit's contents.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from myriad.plan.node_images import ImageArchive, ImageManifest
from myriad.spec.models import Cluster
from stacks import aws_images
from stacks.interface import StackError
from stacks.program import build
from stacks.settings import read_settings

from stack_harness import REPO, Built, run_program, spec_with, stack_config

AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"
KIT_BYTES = b"a kit: the converge bundle and the build inventory, as bytes here"
KIT_SHA = hashlib.sha256(KIT_BYTES).hexdigest()
CONTENT = "5eed" + "1" * 60
KIT_FILE = f"p5-node-{CONTENT[:12]}.kit.tar.gz"
LABEL = f"aws-dev-p5-node-{CONTENT[:12]}"
UBUNTU = "ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
GPU01_SEED = b"gpu01's seed"
# Instance ARNs in the mocks' account (stack_harness.AWS_ACCOUNT) and the example's region.
ARN_PREFIX = "arn:aws:ec2:us-east-1:123456789012:instance/"


def spec_in(mode: str | None) -> Cluster:
    def edit(data: dict[str, Any]) -> None:
        if mode is not None:
            data["bringup"] = {"mode": mode}

    return spec_with(AWS_DEV, edit=edit)


def kit_record(cluster: str = "aws-dev") -> ImageManifest:
    return ImageManifest(
        cluster=cluster,
        profile="p5-node",
        content_hash=CONTENT,
        tag=LABEL,
        built_at="2026-12-01T22:00:00Z",
        base=UBUNTU,
        roles={"slurm": "ab" * 32},
        kit=ImageArchive(KIT_FILE, KIT_SHA, len(KIT_BYTES)),
    )


def make_state(root: Path, record: ImageManifest | None = None) -> Path:
    state = root / "state"
    images, seeds = state / "images", state / "seeds"
    images.mkdir(parents=True)
    seeds.mkdir()
    record = record or kit_record()
    (images / "p5-node.json").write_text(json.dumps(record.to_dict()))
    (images / KIT_FILE).write_bytes(KIT_BYTES)
    (seeds / "gpu01.tar.gz").write_bytes(GPU01_SEED)
    return state


def build_stack(
    spec: Cluster, state: Path | None, extra: dict[str, Any] | None = None, **harness: Any
) -> Built:
    extra = {**({"myriad:stateDir": str(state)} if state is not None else {}), **(extra or {})}

    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        result = build(spec, settings)
        return {"nodes": result.nodes, **result.outputs}

    return run_program(body, config={**stack_config("aws-dev"), **extra}, **harness)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_state(tmp_path_factory.mktemp("aws-images"))


@pytest.fixture(scope="module")
def image_stack(state: Path) -> Built:
    return build_stack(spec_in("image"), state)


def graph(built: Built) -> list[tuple[str, str, str]]:
    return sorted((r.type, r.name, json.dumps(r.inputs, sort_keys=True)) for r in built.resources)


def test_push_mode_builds_no_image_and_changes_nothing(state: Path, tmp_path: Path) -> None:
    push = build_stack(spec_in("push"), state)
    assert not [
        r for r in push.resources if "imagebuilder" in r.type or r.type.startswith("aws:s3/")
    ]
    assert graph(push) == graph(build_stack(spec_in(None), None))  # 4 nodes: push by default
    # Image mode without any image record launches what push mode launches.
    assert graph(build_stack(spec_in("image"), tmp_path)) == graph(push)
    assert "images" not in push.outputs


def test_an_image_per_profile_with_a_kit(image_stack: Built) -> None:
    (component,) = image_stack.of_type("imagebuilder/component:Component")
    (recipe,) = image_stack.of_type("imagebuilder/imageRecipe:ImageRecipe")
    (image,) = image_stack.of_type("imagebuilder/image:Image")
    (infrastructure,) = image_stack.of_type(
        "imagebuilder/infrastructureConfiguration:InfrastructureConfiguration"
    )
    assert component.inputs["name"] == recipe.inputs["name"] == LABEL
    assert component.inputs["platform"] == "Linux"
    assert recipe.inputs["parentImage"] == UBUNTU  # the templates' base, as Image Builder reads it
    assert [c["componentArn"] for c in recipe.inputs["components"]] == [
        "arn:aws:imagebuilder:us-east-1:aws:component/aws-cli-version-2-linux/x.x.x",
        f"arn:aws:imagebuilder:us-east-1:123456789012:x/{LABEL}/1.0.0/1",
    ]
    (root,) = recipe.inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/sda1"
    assert root["ebs"] == {
        "volumeSize": 500,
        "volumeType": "gp3",
        "encrypted": "true",
        "deleteOnTermination": "true",
    }
    assert recipe.inputs["amiTags"]["myriad:content-hash"] == CONTENT
    assert image.inputs["imageRecipeArn"].endswith(f"/{LABEL}/1.0.0/1")
    assert image.inputs["imageTestsConfiguration"] == {"imageTestsEnabled": False}
    # The build runs in the cluster's private subnet and node security group.
    assert infrastructure.inputs["subnetId"] == "aws-dev-private-id"
    assert infrastructure.inputs["securityGroupIds"] == ["aws-dev-nodes-id"]
    assert infrastructure.inputs["instanceTypes"] == ["m7i.2xlarge"]
    assert infrastructure.inputs["instanceMetadataOptions"]["httpTokens"] == "required"
    assert infrastructure.inputs["terminateInstanceOnFailure"] is True
    (kit,) = [r for r in image_stack.of_type("s3/bucketObjectv2:BucketObjectv2") if "kit" in r.name]
    assert kit.inputs["key"] == f"kits/{KIT_FILE}"


def test_the_built_ami_is_the_image_mode_pools_launch_template_image(image_stack: Built) -> None:
    ami = "ami-" + hashlib.sha256(LABEL.encode()).hexdigest()[:17]
    templates = {
        r.inputs["tags"]["myriad:pool"]: r.inputs
        for r in image_stack.of_type("launchTemplate:LaunchTemplate")
    }
    assert templates["gpu"]["imageId"] == ami
    # Profile head has no kit: its pools keep the stock image.
    assert templates["ctl"]["imageId"].startswith("resolve:ssm:/aws/service/canonical/")
    assert templates["login"]["imageId"] == templates["ctl"]["imageId"]
    assert image_stack.outputs["images"]["amis"] == {"p5-node": ami}


def test_the_component_document_applies_the_kit(image_stack: Built) -> None:
    (component,) = image_stack.of_type("imagebuilder/component:Component")
    document = yaml.safe_load(component.inputs["data"])
    assert document["schemaVersion"] == 1.0
    phases = {phase["name"]: phase["steps"] for phase in document["phases"]}
    assert list(phases) == ["build", "validate"]
    steps = {step["name"]: step for step in phases["build"]}
    assert list(steps) == [
        "DownloadKit",
        "CheckKit",
        "UnpackKit",
        "ApplyImagePlay",
        "RecordImage",
        "EnableConverge",
        "Clean",
    ]
    bucket = image_stack.outputs["images"]["bucket"]
    assert steps["DownloadKit"]["action"] == "S3Download"
    assert steps["DownloadKit"]["inputs"] == [
        {"source": f"s3://{bucket}/kits/{KIT_FILE}", "destination": "/tmp/myriad-kit.tar.gz"}
    ]
    (check,) = steps["CheckKit"]["inputs"]["commands"]
    assert check == f"echo '{KIT_SHA}  /tmp/myriad-kit.tar.gz' | sha256sum -c -"
    (play,) = steps["ApplyImagePlay"]["inputs"]["commands"]
    assert play.endswith(
        "python3 -m ansible.cli.playbook -i /opt/myriad/image-build/hosts.yml "
        "/opt/myriad/playbooks/image.yml"
    )
    assert "PYTHONPATH=/opt/myriad/lib" in play
    (record,) = steps["RecordImage"]["inputs"]["commands"]
    encoded = record.split("echo ", 1)[1].split(" ", 1)[0]
    written = json.loads(base64.b64decode(encoded))
    assert written["content_hash"] == CONTENT and written["profile"] == "p5-node"
    assert ImageManifest.from_dict(written).roles == {"slurm": "ab" * 32}
    assert all(step["onFailure"] == "Abort" for step in phases["build"])
    (validate,) = phases["validate"]
    assert "systemctl is-enabled myriad-converge.service" in validate["inputs"]["commands"][0]


def test_image_mode_nodes_fetch_their_seed_and_converge(image_stack: Built) -> None:
    bucket = image_stack.outputs["images"]["bucket"]
    templates = {
        r.inputs["tags"]["myriad:pool"]: r.inputs
        for r in image_stack.of_type("launchTemplate:LaunchTemplate")
    }
    text = base64.b64decode(templates["gpu"]["userData"]).decode()
    assert text.startswith("#cloud-config\n")
    document = yaml.safe_load(text)
    files = {f["path"]: f for f in document["write_files"]}
    program = files["/usr/local/sbin/myriad-seed-fetch"]["content"]
    # The key carries the instance's ARN, the value IAM gives ${ec2:SourceInstanceARN}.
    assert f"key=seeds/{ARN_PREFIX}$id" in program
    assert f'"s3://{bucket}/$key$suffix"' in program
    assert "--region us-east-1" in program and "sha256sum -c seed.tar.gz.sha256" in program
    assert "systemctl start --no-block myriad-converge.service" in program
    unit = files["/etc/systemd/system/myriad-seed.service"]["content"]
    assert "Restart=on-failure" in unit
    assert "ConditionDirectoryNotEmpty=!/var/lib/myriad/seed" in unit
    assert document["runcmd"][-1] == [
        "systemctl",
        "enable",
        "--now",
        "--no-block",
        "myriad-seed.service",
    ]
    assert "munge" not in text.lower()  # the seed travels through S3, never the user data
    for found in image_stack.of_type("launchTemplate:LaunchTemplate"):  # profile head: stock
        if found.inputs["tags"]["myriad:pool"] != "gpu":
            assert "runcmd" not in yaml.safe_load(base64.b64decode(found.inputs["userData"]))


def test_seeds_are_uploaded_by_instance_arn_with_their_digest(image_stack: Built) -> None:
    objects = {r.name: r for r in image_stack.of_type("s3/bucketObjectv2:BucketObjectv2")}
    gpu01 = next(n for n in image_stack.outputs["nodes"] if n["name"] == "gpu01")
    arn = ARN_PREFIX + gpu01["ids"]["instance_id"]
    assert objects["aws-dev-gpu01-seed"].inputs["key"] == f"seeds/{arn}.tar.gz"
    sidecar = objects["aws-dev-gpu01-seed-sha256"].inputs
    assert sidecar["key"] == f"seeds/{arn}.tar.gz.sha256"
    assert sidecar["content"] == f"{hashlib.sha256(GPU01_SEED).hexdigest()}  seed.tar.gz\n"
    assert "aws-dev-gpu02-seed" not in objects  # no seed written yet: nothing uploaded


def node_role_statements(built: Built, pool: str) -> list[dict[str, Any]]:
    """Every inline statement of the role in the instance profile `pool`'s template names."""
    (template,) = [
        r
        for r in built.of_type("launchTemplate:LaunchTemplate")
        if r.inputs["tags"]["myriad:pool"] == pool
    ]
    profile_name = template.inputs["iamInstanceProfile"]["name"]
    (profile,) = [
        r
        for r in built.of_type("iam/instanceProfile:InstanceProfile")
        if f"{r.name}-profile" == profile_name  # the mocks' name for an instance profile
    ]
    role = profile.inputs["role"]
    policies = [r for r in built.of_type("iam/rolePolicy:RolePolicy") if r.inputs["role"] == role]
    return [s for p in policies for s in json.loads(p.inputs["policy"])["Statement"]]


def test_a_login_node_can_read_no_seed_but_its_own(image_stack: Built) -> None:
    """Issue 26: the login node's role read every seed (`seeds/*`), and with it the munge key.

    Now the node role reads only the object named by the requesting instance's own ARN:
    IAM substitutes `${ec2:SourceInstanceARN}` (present in requests signed with an instance
    profile's credentials) in the resource part of the ARN. Whether S3 then refuses another
    node's seed is AWS's evaluation: the first-run check list in stacks/README.md.
    """
    bucket_arn = f"arn:aws:s3:::{image_stack.outputs['images']['bucket']}"
    statements = node_role_statements(image_stack, "login")
    reads = [s for s in statements if "s3:GetObject" in str(s["Action"])]
    assert reads == [
        {
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": [
                f"{bucket_arn}/seeds/${{ec2:SourceInstanceARN}}.tar.gz",
                f"{bucket_arn}/seeds/${{ec2:SourceInstanceARN}}.tar.gz.sha256",
            ],
        }
    ]
    # Nothing else on the node role names the bucket: no wildcard over the seeds.
    assert not [s for s in statements if s not in reads and bucket_arn in json.dumps(s)]
    # The same role on every pool: the controller and compute nodes are held to theirs too.
    assert node_role_statements(image_stack, "gpu") == statements
    assert node_role_statements(image_stack, "ctl") == statements


def test_the_nat_gateway_comes_before_the_build_in_image_mode(image_stack: Built) -> None:
    (image,) = image_stack.of_type("imagebuilder/image:Image")
    assert any(d.endswith("::aws-dev-private-default") for d in image.dependencies)
    (nat_ip,) = [r for r in image_stack.of_type("ec2/eip:Eip") if r.name == "aws-dev-nat"]
    assert not [d for d in nat_ip.dependencies if "ec2/fleet:Fleet" in d]


def test_a_kit_of_another_cluster_or_a_missing_kit_is_refused(tmp_path: Path) -> None:
    state = make_state(tmp_path / "a", kit_record(cluster="other"))
    with pytest.raises(StackError, match="records an image of cluster other profile p5-node"):
        aws_images.load_kits(spec_in("image"), state / "images")
    state = make_state(tmp_path / "b")
    (state / "images" / KIT_FILE).unlink()
    with pytest.raises(StackError, match=rf"{KIT_FILE} is missing"):
        aws_images.load_kits(spec_in("image"), state / "images")
    assert aws_images.load_kits(spec_in("push"), state / "images") == {}


def test_the_seed_fetcher_is_valid_shell_and_its_digest_file_checks(tmp_path: Path) -> None:
    program = tmp_path / "fetch"
    program.write_text(aws_images.seed_program("bucket-1", "us-east-1", ARN_PREFIX))
    subprocess.run(["sh", "-n", str(program)], check=True)
    seed = tmp_path / "seed.tar.gz"
    seed.write_bytes(GPU01_SEED)
    (tmp_path / "seed.tar.gz.sha256").write_text(aws_images.seed_sidecar(seed))
    subprocess.run(["sha256sum", "-c", "seed.tar.gz.sha256"], cwd=tmp_path, check=True)
    seed.write_bytes(b"changed")
    checked = subprocess.run(
        ["sha256sum", "-c", "seed.tar.gz.sha256"], cwd=tmp_path, capture_output=True, check=False
    )
    assert checked.returncode != 0


def test_an_island_stack_launches_from_the_shared_stacks_image(state: Path) -> None:
    def islands(data: dict[str, Any]) -> None:
        data["bringup"] = {"mode": "image"}
        data["provider"]["stack_per_island"] = True
        data["pools"][2]["count"] = 40
        data["network"]["topology"]["island_nodes"] = 16

    shared = {
        "vpc_id": "vpc-shared",
        "public_subnet_id": "subnet-public",
        "private_subnet_id": "subnet-private",
        "security_group_id": "sg-shared",
        "instance_profile": "aws-dev-node-profile",
    }
    built = build_stack(
        spec_with(AWS_DEV, edit=islands),
        state,
        extra={"myriad:island": 0, "myriad:sharedStack": "acme/myriad/aws-dev"},
        shared_network=shared,
        shared_images={"amis": {"p5-node": "ami-0shared0000000000"}, "bucket": "shared-bucket"},
    )
    # The shared stack builds the images; an island stack only launches from them.
    assert not [r for r in built.resources if "imagebuilder" in r.type]
    (template,) = built.of_type("launchTemplate:LaunchTemplate")
    assert template.inputs["imageId"] == "ami-0shared0000000000"
    document = yaml.safe_load(base64.b64decode(template.inputs["userData"]))
    (program,) = [f for f in document["write_files"] if f["path"].endswith("myriad-seed-fetch")]
    assert '"s3://shared-bucket/$key$suffix"' in program["content"]
    assert f"key=seeds/{ARN_PREFIX}$id" in program["content"]
    (seed,) = [r for r in built.of_type("BucketObjectv2") if r.name == "aws-dev-gpu01-seed"]
    assert seed.inputs["bucket"] == "shared-bucket"
