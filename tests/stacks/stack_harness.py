"""Running the Pulumi program under `pulumi.runtime.set_mocks`, and specs for it to build.

What these tests exercise: the program's resource graph, as the Pulumi engine would receive it
(types, names, inputs with secrets still marked, protect and retain options). What they do not:
the AWS API and the Pulumi CLI, which are not reachable here.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from myriad.plan.nodes import iter_nodes
from myriad.spec import load_spec_text
from myriad.spec.models import Cluster

REPO = Path(__file__).resolve().parents[2]
SECRET_MARK = rpc._special_sig_key  # the key Pulumi puts on a serialized secret
# Values that must never appear in the clear anywhere in the resource graph.
BMC_USER = "canary-bmc-user"
BMC_PASSWORD = "canary-Bmc-Passw0rd-7f3e"
ADMIN_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMyriadTestKeyOnlyForUnitTests0000000 ops@test"


@dataclass
class Registered:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    protect: bool
    retain_on_delete: bool
    additional_secret_outputs: list[str]
    delete_before_replace: bool = False
    ignore_changes: tuple[str, ...] = ()
    replacement_trigger: Any = None
    dependencies: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, also keeping the resource options the engine would receive."""

    def __init__(self, mocks: pulumi_mocks.Mocks) -> None:
        super().__init__(mocks)
        self.registered: list[Registered] = []

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registered.append(
                Registered(
                    type=request.type,
                    name=request.name,
                    inputs=rpc.deserialize_properties(request.object),
                    parent=request.parent,
                    protect=request.protect,
                    retain_on_delete=request.retainOnDelete,
                    additional_secret_outputs=list(request.additionalSecretOutputs),
                    delete_before_replace=request.deleteBeforeReplace,
                    ignore_changes=tuple(request.ignoreChanges),
                    # Myriad's triggers are tokens, strings.
                    replacement_trigger=(
                        request.replacement_trigger.string_value
                        if request.HasField("replacement_trigger")
                        else None
                    ),
                    dependencies=tuple(request.dependencies),
                    replace_on_changes=tuple(request.replaceOnChanges),
                )
            )
        return response

    def ReadResource(self, request: Any) -> Any:  # the gRPC method name
        # Reads of existing resources, such as a StackReference to the shared stack.
        response = super().ReadResource(request)
        self.registered.append(
            Registered(
                type=request.type,
                name=request.name,
                inputs=rpc.deserialize_properties(request.properties),
                parent=request.parent,
                protect=False,
                retain_on_delete=False,
                additional_secret_outputs=[],
            )
        )
        return response


def _fake_ip(name: str, network: str) -> str:
    net = ipaddress.ip_network(network)
    offset = int(hashlib.sha256(name.encode()).hexdigest(), 16) % (net.num_addresses - 16) + 8
    return str(net.network_address + offset)


# An invoke's answer: a fixed result, or a function of the invoke's arguments.
CallAnswer = Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]


ZONES = {"use1-az4": "us-east-1d", "use1-az6": "us-east-1a", "use1-az1": "us-east-1b"}


def _zone(args: Mapping[str, Any]) -> Mapping[str, Any]:
    zone_id = str(args.get("zoneId"))
    if zone_id not in ZONES:
        raise Exception("no matching EC2 Availability Zone found")
    return {"name": ZONES[zone_id], "zoneId": zone_id, "state": "available", "id": zone_id}


def _offered(args: Mapping[str, Any]) -> Mapping[str, Any]:
    wanted = {f["name"]: f["values"] for f in args.get("filters", [])}
    return {"instanceTypes": list(wanted.get("instance-type", [])), "id": "us-east-1"}


# DescribeInstanceTypes for the table's types (its figures), p6-b200.48xlarge as the API
# describes it (8 x B200, 8 network cards, 8 EFA interfaces; moto's copy of the API's data),
# and any other name as a small CPU type.
GPU_NAMES = {"H100-SXM5-80GB": "H100", "H200-SXM-141GB": "H200", "A100-SXM4-40GB": "A100"}
GPU_NAMES |= {"A100-SXM4-80GB": "A100", "L40S": "L40S"}


def _instance_type(args: Mapping[str, Any]) -> Mapping[str, Any]:
    from stacks.instance_types import INSTANCE_TYPES

    name = str(args["instanceType"])
    known = INSTANCE_TYPES.get(name)
    if name == "p6-b200.48xlarge":
        vcpus, memory, efa, cards, gpus = 192, 2048, 8, 8, [(8, "B200")]
    elif known is not None:
        gpus = [(known.gpu_count, GPU_NAMES[known.gpu_model])] if known.gpu_model else []
        vcpus, memory, efa = known.vcpus, known.memory_gib, known.efa_interfaces
        cards = max(efa, 1)
    else:
        vcpus, memory, efa, cards, gpus = 8, 32, 0, 1, []
    return {
        "id": name,
        "instanceType": name,
        "defaultVcpus": vcpus,
        "memorySize": memory * 1024,
        "efaMaximumInterfaces": efa,
        "maximumNetworkCards": cards,
        "gpuses": [
            {"count": n, "name": model, "manufacturer": "NVIDIA", "memorySize": 0}
            for n, model in gpus
        ],
    }


# An account where everything the aws-dev example needs is there: the zones above, every
# instance type offered in each, and room in every vCPU quota. Tests replace answers.
AWS_ACCOUNT: dict[str, CallAnswer] = {
    "aws:index/getAvailabilityZone:getAvailabilityZone": _zone,
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _offered,
    "aws:servicequotas/getServiceQuota:getServiceQuota": {"value": 100000.0, "id": "quota"},
    "aws:ec2/getInstanceType:getInstanceType": _instance_type,
    # None of the cluster's instances runs yet (a first `pulumi up`).
    "aws:ec2/getInstances:getInstances": {"ids": [], "privateIps": [], "publicIps": [], "id": "x"},
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "accountId": "123456789012",
        "arn": "arn:aws:iam::123456789012:user/ops",
        "id": "123456789012",
        "userId": "AIDA0000",
    },
}


class FakeCloud(pulumi.runtime.Mocks):
    """Outputs a real provider would compute, made up deterministically from the name.

    Invokes (data sources) are answered from `calls`, by token; an answer that raises, or an
    invoke without an answer, fails the way a provider's failure does (the invoke raises).
    """

    def __init__(
        self,
        shared_network: Mapping[str, str] | None = None,
        calls: Mapping[str, CallAnswer] | None = None,
        shared_images: Mapping[str, Any] | None = None,
        launched: Mapping[str, int] | None = None,
        template_versions: Mapping[str, int] | None = None,
    ) -> None:
        # fleet name -> instances it launches (default: its target capacity, all of them)
        self.launched = dict(launched or {})
        # launch template name -> its latest version (default 1, a new template)
        self.template_versions = dict(template_versions or {})
        self.shared_network = dict(shared_network or {})
        self.shared_images = dict(shared_images or {})
        self.calls = {**AWS_ACCOUNT, **(calls or {})}
        self.invoked: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        resource_id = f"{args.name}-id"
        if args.typ == "aws:ec2/instance:Instance":
            state["privateIp"] = _fake_ip(args.name, "10.42.128.0/17")
            state["primaryNetworkInterfaceId"] = f"eni-{args.name}"
            resource_id = "i-" + hashlib.sha256(args.name.encode()).hexdigest()[:17]
        elif args.typ == "aws:ec2/eip:Eip":
            state["publicIp"] = _fake_ip(args.name, "198.51.100.0/24")
        elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = self.template_versions.get(args.name, 1)
        elif args.typ == "aws:ec2/fleet:Fleet":
            count = int(args.inputs["targetCapacitySpecification"]["totalTargetCapacity"])
            count = self.launched.get(args.name, count)
            digest = hashlib.sha256(args.name.encode()).hexdigest()
            # Not in node order on purpose: the program sorts the IDs.
            ids = [f"i-{digest[:9]}{n:08x}" for n in reversed(range(count))]
            state["fleetInstanceSets"] = [{"instanceIds": ids, "instanceType": "x"}]
            resource_id = f"fleet-{digest[:12]}"
        elif args.typ == "aws:iam/instanceProfile:InstanceProfile":
            state["name"] = f"{args.name}-profile"
        elif args.typ == "aws:iam/role:Role":
            # AWS names a role without a name itself; here, after its resource name, so that
            # tests can follow instance profile -> role -> the role's policies.
            state["name"] = f"{args.name}-role"
        elif args.typ == "aws:resourcegroups/group:Group":
            state["arn"] = f"arn:aws:resource-groups:us-east-1:123456789012:group/{args.name}"
        elif args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state["dnsName"] = f"fs-{args.name}.fsx.us-east-1.amazonaws.com"
            state["mountName"] = "abcdef01"
        elif args.typ == "aws:ec2/placementGroup:PlacementGroup":
            state["name"] = f"{args.name}-pg"
        elif args.typ == "aws:imagebuilder/image:Image":
            digest = hashlib.sha256(args.name.encode()).hexdigest()
            state["outputResources"] = [
                {"amis": [{"image": f"ami-{digest[:17]}", "region": "us-east-1"}]}
            ]
        elif args.typ in ("aws:s3/bucket:Bucket",):
            state["bucket"] = f"{args.inputs.get('bucketPrefix', '')}{args.name}"
            state["arn"] = f"arn:aws:s3:::{state['bucket']}"
        elif args.typ.startswith("aws:imagebuilder/"):
            state["arn"] = f"arn:aws:imagebuilder:us-east-1:123456789012:x/{args.name}/1.0.0/1"
        elif args.typ == "pulumi:pulumi:StackReference":
            state["outputs"] = {"network": self.shared_network}
            if self.shared_images:
                state["outputs"]["images"] = self.shared_images
        elif args.typ.endswith("myriad:BareMetalNode"):
            state.update(
                system_path="/redfish/v1/Systems/1",
                power_state="On",
                health="OK",
            )
        return resource_id, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        self.invoked.append((args.token, dict(args.args)))
        if args.token == "aws:ec2/getInstance:getInstance":
            # The address of a fleet's instance, made up from its ID like an instance's.
            instance_id = str(args.args["instanceId"])
            return {"id": instance_id, "privateIp": _fake_ip(instance_id, "10.42.128.0/17")}, []
        answer = self.calls.get(args.token)
        if answer is None:
            return {}, [("", f"no mock answer for invoke {args.token}")]
        try:
            return dict(answer(args.args) if callable(answer) else answer), []
        except Exception as exc:  # an answer that raises is the provider's failure
            return {}, [("", str(exc))]


@dataclass
class Built:
    resources: list[Registered]
    outputs: dict[str, Any]
    invoked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def of_type(self, suffix: str) -> list[Registered]:
        return [r for r in self.resources if r.type.endswith(suffix)]

    def named(self, name: str, suffix: str) -> Registered:
        matches = [r for r in self.of_type(suffix) if r.name == name]
        assert len(matches) == 1, f"{len(matches)} {suffix} named {name}"
        return matches[0]


def run_program(
    body: Callable[[], Any],
    *,
    config: Mapping[str, Any] | None = None,
    secret_keys: tuple[str, ...] = (),
    shared_network: Mapping[str, str] | None = None,
    calls: Mapping[str, CallAnswer] | None = None,
    monitor_out: list[RecordingMonitor] | None = None,
    shared_images: Mapping[str, Any] | None = None,
    launched: Mapping[str, int] | None = None,
    template_versions: Mapping[str, int] | None = None,
) -> Built:
    """Run `body` as a Pulumi program under mocks; it returns a dict of outputs to resolve."""
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in (config or {}).items()},
        list(secret_keys),
    )
    cloud = FakeCloud(shared_network, calls, shared_images, launched, template_versions)
    monitor = RecordingMonitor(cloud)
    if monitor_out is not None:
        monitor_out.append(monitor)
    pulumi.runtime.set_mocks(cloud, project="myriad", stack="test", preview=False, monitor=monitor)
    captured: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        outputs = body()
        return pulumi.Output.from_input(outputs).apply(captured.update)

    program()
    return Built(monitor.registered, captured, cloud.invoked)


def stack_config(env: str) -> dict[str, Any]:
    """The plain config of a committed Pulumi.<env>.yaml."""
    document = yaml.safe_load((REPO / f"Pulumi.{env}.yaml").read_text())
    return dict(document["config"])


def spec_with(
    path: Path,
    *,
    hosts: bool = False,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Cluster:
    """An example spec as committed, optionally with a generated host list and other edits.

    The committed bare-metal examples list no hosts (their MACs and BMCs are site facts), so
    the tests make up a deterministic inventory: MACs in the locally administered range,
    addresses from the management network, one BMC address per node.
    """
    data = yaml.safe_load(path.read_text())
    if edit is not None:
        edit(data)
    if hosts:
        spec = load_spec_text(yaml.safe_dump(data, sort_keys=False), str(path)).spec
        network = ipaddress.ip_network(spec.network.addressing.management)
        data["provider"]["hosts"] = [
            {
                "name": node.name,
                "mac": "02:00:" + ":".join(f"{b:02x}" for b in (i + 1).to_bytes(4, "big")),
                "bmc_address": f"https://10.255.{(i + 1) // 250}.{(i + 1) % 250 + 1}",
                "address": str(network.network_address + 20 + i),
            }
            for i, node in enumerate(iter_nodes(spec))
        ]
    return load_spec_text(yaml.safe_dump(data, sort_keys=False), str(path)).spec


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """Every leaf of an input tree, with its path and whether it sits inside a secret."""

    def inner(value: Any, path: str, secret: bool) -> Iterator[tuple[str, Any, bool]]:
        if isinstance(value, dict):
            if SECRET_MARK in value:
                yield from inner(value.get("value"), path, True)
                return
            for key, item in value.items():
                yield from inner(item, f"{path}.{key}" if path else str(key), secret)
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                yield from inner(item, f"{path}[{index}]", secret)
        else:
            yield path, value, secret

    yield from inner(value, path, False)
