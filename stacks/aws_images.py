"""AWS in image mode: an AMI per profile built by EC2 Image Builder from Myriad's own roles.

When the spec's bring-up mode resolves to `image` and `myriad image build` has recorded a
build kit for a profile (`<state>/<cluster>/images/<profile>.json`, `ImageManifest.kit`), the
stack that holds the cluster's network builds that profile's AMI and launches the profile's
pools from it:

- an S3 bucket (private, encrypted, public access blocked) holding each kit and, later, the
  nodes' seeds;
- per profile, an Image Builder **component** whose document fetches the kit (`S3Download`),
  checks its sha256 against the record, unpacks it at `/` (Ansible, Myriad's playbooks and
  roles, myriad-converge and its unit: the converge bundle under /opt/myriad, and the build
  inventory under /opt/myriad/image-build/ whose one host, `image-build`, uses
  `ansible_connection: local`), runs `playbooks/image.yml` with that Ansible against the
  build instance itself, writes the image record to /etc/myriad/image.json and enables
  myriad-converge; its `validate` phase checks all of that on the build instance;
- an **image recipe** on the spec's base image (the same SSM parameter the launch templates
  use, as `ssm:<name>`, which Image Builder resolves; the parent image may be "an SSM
  parameter prefixed by ssm:" per the ImageRecipe API reference), with AWS's managed
  `aws-cli-version-2-linux` component first (the node fetches its seed with it), the
  encrypted gp3 root volume of the nodes, and the SSM agent kept (the nodes use it);
- one **infrastructure configuration**: the private subnet and the node security group, an
  instance profile with `EC2InstanceProfileForImageBuilder` and
  `AmazonSSMManagedInstanceCore` (what Image Builder's build instance needs) plus read access
  to the bucket's kits, IMDSv2 only, the instance terminated on failure;
- an **image** per profile (one build per kit; a changed kit is a new component and recipe
  name, hence a new image and AMI). Its AMI ID is the launch template's `image_id` for the
  profile's pools.

The build instance reaches package mirrors through the NAT gateway, so in image mode the NAT
gateway comes before the image builds, and the builds before the compute fleets: an image
must exist before any node can start from it.

The seed. A node's seed (its inventory, the cluster tables, the munge key) is not in the user
data: user data is limited to 16 KB, is readable through the instance metadata by any process
on the node and through DescribeInstanceAttribute by anyone allowed it, stays in every launch
template version, and a fleet passes the same user data to every node of an island. A seed
also holds the cluster's addresses, which exist only once the nodes do. So the seed is an S3
object keyed by the instance's ARN (`seeds/arn:<partition>:ec2:<region>:<account>:instance/
<instance-id>.tar.gz` and its `.sha256`), uploaded by the stack once
`<state>/<cluster>/seeds/<node>.tar.gz` exists (the `pulumi up` after the controller wrote the
seeds); the user data installs `myriad-seed.service`, which fetches the node's seed by its
instance ID (IMDSv2) with the instance role, retrying every 30 s until it is there, checks its
sha256, unpacks it to /var/lib/myriad/seed and starts myriad-converge.

Every node shares one role, so the role reads only the seed of the instance making the
request: its policy's resource is `seeds/${ec2:SourceInstanceARN}.tar.gz` (and the
`.sha256`). IAM fills `ec2:SourceInstanceARN` with "the ARN of the Amazon EC2 instance from
which the request is made", present "only when the request comes from an Amazon EC2 instance
using an IAM role associated with an EC2 instance profile", and allows a policy variable in
the resource part of an ARN (IAM User Guide, "IAM policy elements: Variables and tags",
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html). A login
node, where users have shells, then holds credentials for its own seed at most, never the
other nodes' (issue 26); its instance metadata is root's only as well (`IMDS_ROOT_ONLY`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

from myriad.plan.node_images import ImageManifest
from myriad.spec.models import Cluster
from stacks.interface import StackError
from stacks.pxe_images import load_records, sha256_of

# Where the kit puts the build inventory, and the play the component runs with it.
BUILD_INVENTORY = "/opt/myriad/image-build/hosts.yml"
IMAGE_PLAY = "/opt/myriad/playbooks/image.yml"
# The node-side Ansible of the converge bundle (as myriad-converge runs it).
ANSIBLE_ENV = "PYTHONPATH=/opt/myriad/lib ANSIBLE_COLLECTIONS_PATH=/opt/myriad/lib"
IMAGE_RECORD = "/etc/myriad/image.json"
SEED_DIR = "/var/lib/myriad/seed"
SEED_PREFIX = "seeds/"
KIT_PREFIX = "kits/"
# The build needs no GPU (the driver is built by DKMS for the image's kernel); a general
# purpose instance with room for the DKMS builds and apt.
BUILD_INSTANCE_TYPE = "m7i.2xlarge"
# AWS-managed Image Builder component: AWS CLI version 2 (Image Builder user guide, "AWS
# managed components").
AWS_CLI_COMPONENT = "arn:aws:imagebuilder:{region}:aws:component/aws-cli-version-2-linux/x.x.x"
BUILDER_POLICIES = (
    "arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
SEED_UNIT = "myriad-seed.service"
SEED_PROGRAM = "/usr/local/sbin/myriad-seed-fetch"


def load_kits(spec: Cluster, images_dir: Path) -> dict[str, ImageManifest]:
    """Profile → image record with a build kit; empty in push mode (nothing is read then)."""
    found = load_records(spec, images_dir, lambda manifest: manifest.kit)
    for profile, manifest in found.items():
        assert manifest.kit is not None
        kit = images_dir / manifest.kit.file
        if not kit.is_file():
            raise StackError(
                f"{kit} is missing: the image record of profile {profile} names it; write it "
                f"again with `myriad image build --profile {profile}`"
            )
    return found


def resource_label(manifest: ImageManifest) -> str:
    """Component, recipe and AMI name: a new kit is a new name, so a new build."""
    return f"{manifest.cluster}-{manifest.profile}-{manifest.content_hash[:12]}"


def component_document(manifest: ImageManifest, kit_uri: str) -> str:
    """The Image Builder (AWSTOE) component document applying a profile's kit."""
    assert manifest.kit is not None
    kit = "/tmp/myriad-kit.tar.gz"
    record = {k: v for k, v in manifest.to_dict().items() if k not in {"kit", "archive"}}
    record_b64 = base64.b64encode((json.dumps(record, sort_keys=True) + "\n").encode()).decode()

    def bash(name: str, *commands: str) -> dict[str, Any]:
        # One command per step, joined by &&: a failure anywhere fails the step and the build.
        return {
            "name": name,
            "action": "ExecuteBash",
            "onFailure": "Abort",
            "inputs": {"commands": [" && ".join(commands)]},
        }

    document = {
        "name": resource_label(manifest),
        "description": (
            f"Myriad: apply the install steps of profile {manifest.profile} (content "
            f"{manifest.content_hash[:12]}) with the roles' own Ansible"
        ),
        "schemaVersion": 1.0,
        "phases": [
            {
                "name": "build",
                "steps": [
                    {
                        "name": "DownloadKit",
                        "action": "S3Download",
                        "onFailure": "Abort",
                        "maxAttempts": 3,
                        "inputs": [{"source": kit_uri, "destination": kit}],
                    },
                    bash("CheckKit", f"echo '{manifest.kit.sha256}  {kit}' | sha256sum -c -"),
                    bash("UnpackKit", f"tar -xzf {kit} -C / --no-same-owner", f"rm -f {kit}"),
                    bash(
                        "ApplyImagePlay",
                        "cd /opt/myriad",
                        f"{ANSIBLE_ENV} python3 -m ansible.cli.playbook -i {BUILD_INVENTORY} "
                        f"{IMAGE_PLAY}",
                    ),
                    bash(
                        "RecordImage",
                        "install -d -m 0755 /etc/myriad",
                        f"echo {record_b64} | base64 -d > {IMAGE_RECORD}",
                        f"chmod 0644 {IMAGE_RECORD}",
                    ),
                    bash(
                        "EnableConverge",
                        "systemctl daemon-reload",
                        "systemctl enable myriad-converge.service",
                    ),
                    # The build inventory names the build host; no node should start with it.
                    bash("Clean", f"rm -rf /opt/myriad/image-build {SEED_DIR}"),
                ],
            },
            {
                "name": "validate",
                "steps": [
                    bash(
                        "ConvergeReady",
                        "test -x /usr/local/sbin/myriad-converge",
                        "systemctl is-enabled myriad-converge.service",
                        f"python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "
                        f"{IMAGE_RECORD}",
                        "aws --version",
                    ),
                ],
            },
        ],
    }
    return yaml.safe_dump(document, sort_keys=False, width=1000)


def seed_program(bucket: str, region: str, arn_prefix: str) -> str:
    """What `myriad-seed.service` runs on a node started from an image (see the module doc)."""
    return f"""#!/bin/sh
# Myriad: fetch this node's seed (by instance ARN) and start myriad-converge.
set -eu
token=$(curl -fsS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \\
  http://169.254.169.254/latest/api/token)
id=$(curl -fsS -H "X-aws-ec2-metadata-token: $token" \\
  http://169.254.169.254/latest/meta-data/instance-id)
# The instance role may read this key only: the instance's own ARN.
key={SEED_PREFIX}{arn_prefix}$id
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in seed.tar.gz seed.tar.gz.sha256; do
  suffix=${{name#seed}}
  aws s3 cp --only-show-errors --region {region} \\
    "s3://{bucket}/$key$suffix" "$work/$name"
done
(cd "$work" && sha256sum -c seed.tar.gz.sha256)
install -d -m 0700 {SEED_DIR}
tar -xzf "$work/seed.tar.gz" -C {SEED_DIR} --no-same-owner
systemctl start --no-block myriad-converge.service
"""


SEED_UNIT_TEXT = f"""[Unit]
Description=Myriad: fetch this node's seed from S3, then converge
Wants=network-online.target
After=network-online.target
ConditionDirectoryNotEmpty=!{SEED_DIR}

[Service]
Type=oneshot
ExecStart={SEED_PROGRAM}
# The seed is uploaded once the controller has written it: until then, try again.
Restart=on-failure
RestartSec=30

[Install]
WantedBy=multi-user.target
"""


def seed_cloud_config(bucket: str, region: str, arn_prefix: str) -> dict[str, Any]:
    """The cloud-init parts that fetch the seed: files to write and commands to run."""
    program = seed_program(bucket, region, arn_prefix)
    return {
        "write_files": [
            {"path": SEED_PROGRAM, "permissions": "0755", "content": program},
            {
                "path": f"/etc/systemd/system/{SEED_UNIT}",
                "permissions": "0644",
                "content": SEED_UNIT_TEXT,
            },
        ],
        "runcmd": [
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", "--now", "--no-block", SEED_UNIT],
        ],
    }


def seed_sidecar(path: Path) -> str:
    """The `.sha256` object beside a seed, in the form `sha256sum -c` reads on the node."""
    return f"{sha256_of(path)}  seed.tar.gz\n"


def first_ami(resources: Any) -> str:
    """The AMI ID among an Image's output resources (mappings or objects, as the SDK gives)."""

    def get(value: Any, key: str) -> Any:
        return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)

    for resource in resources or []:
        for ami in get(resource, "amis") or []:
            image = get(ami, "image")
            if image:
                return str(image)
    raise StackError("the image build reported no AMI; see the image's log in Image Builder")


@dataclass(frozen=True)
class AwsImagesArgs:
    cluster: str
    region: str
    kits: Mapping[str, ImageManifest]
    images_dir: Path
    # Profile → (base image as `resolve:ssm:<name>`, root device), as the launch templates.
    bases: Mapping[str, tuple[str, str]]
    root_volume_gib: int
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    node_role: pulumi.Input[str]
    depends_on: tuple[pulumi.Resource, ...] = ()


class AwsImages(pulumi.ComponentResource):
    """The kits' bucket and one Image Builder image per profile; `amis` by profile."""

    amis: dict[str, pulumi.Output[str]]
    bucket: pulumi.Output[str]

    def __init__(
        self, name: str, args: AwsImagesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:aws:Images", name, None, opts)
        c = args.cluster
        child = pulumi.ResourceOptions(parent=self)
        tags = {"myriad:cluster": c}
        bucket = aws.s3.Bucket(
            f"{c}-images", bucket_prefix=f"{c[:30]}-myriad-", tags=tags, opts=child
        )
        aws.s3.BucketPublicAccessBlock(
            f"{c}-images",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{c}-images",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=(
                        aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                            sse_algorithm="AES256"
                        )
                    )
                )
            ],
            opts=child,
        )
        # Each node reads its own seed, nothing else of the bucket (see the module doc).
        aws.iam.RolePolicy(
            f"{c}-node-seeds",
            role=args.node_role,
            policy=bucket.arn.apply(seed_read_policy),
            opts=child,
        )
        builder = aws.iam.Role(
            f"{c}-image-build",
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
            tags=tags,
            opts=child,
        )
        for index, policy in enumerate(BUILDER_POLICIES):
            aws.iam.RolePolicyAttachment(
                f"{c}-image-build-{index}", role=builder.name, policy_arn=policy, opts=child
            )
        aws.iam.RolePolicy(
            f"{c}-image-build-kits",
            role=builder.name,
            policy=bucket.arn.apply(lambda arn: _read_policy(f"{arn}/{KIT_PREFIX}*")),
            opts=child,
        )
        profile = aws.iam.InstanceProfile(
            f"{c}-image-build", role=builder.name, tags=tags, opts=child
        )
        infrastructure = aws.imagebuilder.InfrastructureConfiguration(
            f"{c}-image-build",
            name=f"{c}-image-build",
            description=f"Myriad: where cluster {c}'s node images are built",
            instance_profile_name=profile.name,
            instance_types=[BUILD_INSTANCE_TYPE],
            subnet_id=args.subnet_id,
            security_group_ids=[args.security_group_id],
            instance_metadata_options=(
                aws.imagebuilder.InfrastructureConfigurationInstanceMetadataOptionsArgs(
                    http_tokens="required", http_put_response_hop_limit=1
                )
            ),
            terminate_instance_on_failure=True,
            resource_tags=tags,
            tags=tags,
            opts=child,
        )
        self.bucket = bucket.bucket
        self.amis = {}
        for name_, manifest in sorted(args.kits.items()):
            self.amis[name_] = self._image(args, manifest, bucket, infrastructure, tags)
        self.register_outputs({"amis": self.amis, "bucket": self.bucket})

    def _image(
        self,
        args: AwsImagesArgs,
        manifest: ImageManifest,
        bucket: aws.s3.Bucket,
        infrastructure: aws.imagebuilder.InfrastructureConfiguration,
        tags: dict[str, str],
    ) -> pulumi.Output[str]:
        assert manifest.kit is not None
        child = pulumi.ResourceOptions(parent=self)
        label = resource_label(manifest)
        profile = manifest.profile
        key = f"{KIT_PREFIX}{manifest.kit.file}"
        kit = aws.s3.BucketObjectv2(
            f"{label}-kit",
            bucket=bucket.id,
            key=key,
            source=pulumi.FileAsset(str(args.images_dir / manifest.kit.file)),
            server_side_encryption="AES256",
            tags=tags,
            opts=child,
        )
        component = aws.imagebuilder.Component(
            label,
            name=label,
            platform="Linux",
            version="1.0.0",
            description=f"Myriad: profile {profile}'s install steps",
            data=bucket.bucket.apply(
                lambda name: component_document(manifest, f"s3://{name}/{key}")
            ),
            tags=tags,
            opts=child,
        )
        base, root_device = args.bases[profile]
        recipe = aws.imagebuilder.ImageRecipe(
            label,
            name=label,
            version="1.0.0",
            description=f"Myriad: profile {profile} on {base.removeprefix('resolve:')}",
            parent_image=base.removeprefix("resolve:"),
            components=[
                aws.imagebuilder.ImageRecipeComponentArgs(
                    component_arn=AWS_CLI_COMPONENT.format(region=args.region)
                ),
                aws.imagebuilder.ImageRecipeComponentArgs(component_arn=component.arn),
            ],
            block_device_mappings=[
                aws.imagebuilder.ImageRecipeBlockDeviceMappingArgs(
                    device_name=root_device,
                    ebs=aws.imagebuilder.ImageRecipeBlockDeviceMappingEbsArgs(
                        volume_size=args.root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            systems_manager_agent=aws.imagebuilder.ImageRecipeSystemsManagerAgentArgs(
                uninstall_after_build=False
            ),
            ami_tags={
                **tags,
                "myriad:profile": profile,
                "myriad:content-hash": manifest.content_hash,
            },
            tags=tags,
            opts=child,
        )
        image = aws.imagebuilder.Image(
            label,
            image_recipe_arn=recipe.arn,
            infrastructure_configuration_arn=infrastructure.arn,
            # The component's validate phase checks the image on the build instance; a test
            # instance would run no test phase of ours and double the build's cost.
            image_tests_configuration=aws.imagebuilder.ImageImageTestsConfigurationArgs(
                image_tests_enabled=False
            ),
            tags={**tags, "myriad:profile": profile},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[kit, *args.depends_on]),
        )
        ami: pulumi.Output[str] = image.output_resources.apply(first_ami)
        return ami


def _read_policy(resource: str | list[str]) -> str:
    # Version 2012-10-17: the first policy language version with policy variables.
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": resource}],
        }
    )


# IAM's value for the instance a request comes from (see the module doc); `${...}` is IAM's
# syntax, which the policy must carry literally.
SOURCE_INSTANCE_ARN = "${ec2:SourceInstanceARN}"


def seed_read_policy(bucket_arn: str) -> str:
    """The node role's read access: the requesting instance's own seed and its digest."""
    key = f"{bucket_arn}/{SEED_PREFIX}{SOURCE_INSTANCE_ARN}"
    return _read_policy([f"{key}.tar.gz", f"{key}.tar.gz.sha256"])


def instance_arn_prefix(partition: str, region: str, account: str) -> str:
    """`arn:<partition>:ec2:<region>:<account>:instance/`, to which an instance ID is appended.

    The EC2 instance ARN format (Service Authorization Reference, Amazon EC2, resource type
    `instance`: arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}).
    """
    return f"arn:{partition}:ec2:{region}:{account}:instance/"


@dataclass(frozen=True)
class SeedSource:
    """Where an image-mode pool's nodes find their seeds (see the module doc)."""

    bucket: pulumi.Input[str]
    region: str
    seeds_dir: Path | None
    # The ARN of this account's instances in the region, less the instance ID (see
    # instance_arn_prefix): seeds are keyed by instance ARN.
    arn_prefix: pulumi.Input[str]


def upload_seed(
    name: str,
    node: str,
    instance_id: pulumi.Input[str],
    seed: SeedSource,
    parent: pulumi.Resource,
) -> list[aws.s3.BucketObjectv2]:
    """The node's seed and its `.sha256`, keyed by its instance ARN, once the seed exists."""
    if seed.seeds_dir is None:
        return []
    path = seed.seeds_dir / f"{node}.tar.gz"
    if not path.is_file():
        return []
    key = pulumi.Output.all(seed.arn_prefix, instance_id).apply(
        lambda parts: f"{SEED_PREFIX}{parts[0]}{parts[1]}"
    )
    child = pulumi.ResourceOptions(parent=parent)
    return [
        aws.s3.BucketObjectv2(
            f"{name}-seed",
            bucket=seed.bucket,
            key=key.apply(lambda k: f"{k}.tar.gz"),
            source=pulumi.FileAsset(str(path)),
            server_side_encryption="AES256",
            opts=child,
        ),
        aws.s3.BucketObjectv2(
            f"{name}-seed-sha256",
            bucket=seed.bucket,
            key=key.apply(lambda k: f"{k}.tar.gz.sha256"),
            content=seed_sidecar(path),
            server_side_encryption="AES256",
            opts=child,
        ),
    ]


def image_refs_from_stack(stack: str) -> tuple[pulumi.Output[dict[str, str]], pulumi.Output[str]]:
    """An island stack's view of the shared stack's images: (AMI by profile, bucket)."""
    images = pulumi.StackReference(f"{stack}-images", stack_name=stack).require_output("images")

    def pick(value: Any) -> tuple[dict[str, str], str]:
        if not isinstance(value, Mapping) or not isinstance(value.get("bucket"), str):
            raise StackError(f"stack {stack} exports no images; run it first")
        return dict(value.get("amis") or {}), str(value["bucket"])

    picked = images.apply(pick)
    return picked.apply(lambda p: p[0]), picked.apply(lambda p: p[1])
