"""AWS instance types for the spec's profiles: one table, GPU shape → type and its EFA count.

EFA interfaces are one per network card, the count that reaches the type's full bandwidth:
- p5.48xlarge and p5e.48xlarge: 32 network cards, 3,200 Gbps (Amazon EC2 User Guide,
  "Maximize network bandwidth on Amazon EC2 instances with multiple network cards",
  docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html; its P5 example
  requests 32 EFA devices and one ENA device);
- g6e.48xlarge: 4 network cards, 400 Gbps (same guide, the p5-efa page);
- p5en.48xlarge 16, p4d.24xlarge and p4de.24xlarge 4: the `vpc.amazonaws.com/efa` device
  counts in torchx's AWS resource table (meta-pytorch/torchx,
  torchx/specs/named_resources_aws.py), which also gives the vCPU and memory figures here.
A shape not in the table is an error that names the `provider.instance_types` override. The
table picks the type; its figures are checked against the instance-type API before anything
is created (DescribeInstanceTypes: `VCpuInfo.DefaultVCpus`, `MemoryInfo.SizeInMiB`,
`NetworkInfo.EfaInfo.MaximumEfaInterfaces`, `NetworkInfo.MaximumNetworkCards`, `GpuInfo`;
EC2 API Reference, "InstanceTypeInfo"), and an override the table does not know (a p6 or
p6e type, say) takes its EFA and vCPU counts from that API alone (`described`).

Each type also names the Service Quotas code its running vCPUs count against (Service Quotas
User Guide, "Amazon EC2 endpoints and quotas": L-417A185B "Running On-Demand P instances",
L-DB2E81BA "Running On-Demand G and VT instances", L-1216C47A "Running On-Demand Standard
(A, C, D, H, I, M, R, T, Z) instances"); the preflight reads them before anything is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from myriad.spec.models import Cluster, Profile
from stacks.interface import StackError

QUOTA_P = "L-417A185B"
QUOTA_G = "L-DB2E81BA"
QUOTA_STANDARD = "L-1216C47A"
QUOTA_NAMES: Mapping[str, str] = {
    QUOTA_P: "Running On-Demand P instances",
    QUOTA_G: "Running On-Demand G and VT instances",
    QUOTA_STANDARD: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
}
# The family letters of each vCPU quota; a type of another family has no quota check here.
_QUOTA_BY_FAMILY: Mapping[str, str] = {
    **{letter: QUOTA_P for letter in "p"},
    **{letter: QUOTA_G for letter in "gv"},
    **{letter: QUOTA_STANDARD for letter in "acdhimrtz"},
}


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    efa_interfaces: int = 0
    gpu_model: str | None = None
    gpu_count: int = 0
    # False: an override the table does not know; its figures come from the API (preflight).
    described: bool = True

    @property
    def quota_code(self) -> str | None:
        """The On-Demand vCPU quota this type's running instances count against."""
        return _QUOTA_BY_FAMILY.get(self.name[:1])


_GPU_TYPES = (
    InstanceType("p5.48xlarge", 192, 2048, 32, "H100-SXM5-80GB", 8),
    InstanceType("p5e.48xlarge", 192, 2048, 32, "H200-SXM-141GB", 8),
    InstanceType("p5en.48xlarge", 192, 2048, 16, "H200-SXM-141GB", 8),
    InstanceType("p4d.24xlarge", 96, 1152, 4, "A100-SXM4-40GB", 8),
    InstanceType("p4de.24xlarge", 96, 1152, 4, "A100-SXM4-80GB", 8),
    InstanceType("g6e.48xlarge", 192, 1536, 4, "L40S", 8),
)

# General purpose, 4 GiB per vCPU: controllers, login and storage nodes.
_CPU_TYPES = tuple(
    InstanceType(f"m7i.{size}", vcpus, vcpus * 4)
    for size, vcpus in (
        ("large", 2),
        ("xlarge", 4),
        ("2xlarge", 8),
        ("4xlarge", 16),
        ("8xlarge", 32),
        ("12xlarge", 48),
        ("16xlarge", 64),
        ("24xlarge", 96),
        ("48xlarge", 192),
    )
)

INSTANCE_TYPES: Mapping[str, InstanceType] = {t.name: t for t in (*_GPU_TYPES, *_CPU_TYPES)}

# Where a GPU shape has several types the newer one is the default (p5en, not p5e, for H200);
# `provider.instance_types` picks another.
GPU_DEFAULTS: Mapping[tuple[str, int], str] = {
    ("H100-SXM5-80GB", 8): "p5.48xlarge",
    ("H200-SXM-141GB", 8): "p5en.48xlarge",
    ("A100-SXM4-40GB", 8): "p4d.24xlarge",
    ("A100-SXM4-80GB", 8): "p4de.24xlarge",
    ("L40S", 8): "g6e.48xlarge",
}


def _shape(profile: Profile) -> str:
    gpu = profile.gpu
    return f"{gpu.count} x {gpu.model}" if gpu else "no GPU"


def instance_type(spec: Cluster, profile_name: str) -> InstanceType:
    """The instance type for a profile: the spec's override, else the GPU or CPU table."""
    profile = spec.profiles[profile_name]
    override = spec.provider.instance_types.get(profile_name)
    if override is not None:
        return _checked_override(profile_name, profile, override)
    if profile.gpu is not None:
        name = GPU_DEFAULTS.get((profile.gpu.model, profile.gpu.count))
        if name is None:
            shapes = ", ".join(f"{c} x {m}" for m, c in GPU_DEFAULTS)
            raise StackError(
                f"profile {profile_name} ({_shape(profile)}) maps to no AWS instance type "
                f"Myriad knows (known GPU shapes: {shapes}); name one with "
                f"provider.instance_types.{profile_name}"
            )
        return INSTANCE_TYPES[name]
    vcpus = profile.cpu.cores * profile.cpu.threads_per_core
    for candidate in _CPU_TYPES:
        if candidate.vcpus >= vcpus and candidate.memory_gib >= profile.memory_gib:
            return candidate
    raise StackError(
        f"profile {profile_name} ({vcpus} vCPUs, {profile.memory_gib} GiB) is larger than any "
        f"m7i size; name an instance type with provider.instance_types.{profile_name}"
    )


def _checked_override(profile_name: str, profile: Profile, name: str) -> InstanceType:
    known = INSTANCE_TYPES.get(name)
    if known is None:
        # The preflight reads its vCPUs, EFA interfaces and GPUs from the instance-type API
        # (`with_facts`) and refuses one whose GPUs are not the profile's.
        gpu = profile.gpu
        return InstanceType(
            name,
            vcpus=0,
            memory_gib=0,
            gpu_model=gpu.model if gpu else None,
            gpu_count=gpu.count if gpu else 0,
            described=False,
        )
    want = (profile.gpu.model, profile.gpu.count) if profile.gpu else (None, 0)
    if (known.gpu_model, known.gpu_count) != want:
        has = f"{known.gpu_count} x {known.gpu_model}" if known.gpu_model else "no GPU"
        raise StackError(
            f"provider.instance_types.{profile_name} is {name} ({has}), but the profile has "
            f"{_shape(profile)}"
        )
    return known


def check_overrides(spec: Cluster) -> None:
    unknown = sorted(set(spec.provider.instance_types) - set(spec.profiles))
    if unknown:
        raise StackError(
            f"provider.instance_types names unknown profiles: {', '.join(unknown)} "
            f"(profiles: {', '.join(sorted(spec.profiles))})"
        )


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """What DescribeInstanceTypes says of a type (the figures Myriad uses)."""

    name: str
    vcpus: int
    memory_gib: int
    efa_interfaces: int
    network_cards: int
    gpu_count: int = 0
    gpu_name: str | None = None  # the API's short name: "H100", "B200"


def with_facts(
    kind: InstanceType, facts: InstanceFacts, where: str
) -> tuple[InstanceType, list[str]]:
    """`kind` with the API's figures, and what does not match the spec's profile.

    The API's EFA count is the one the launch template uses: one EFA-only interface per
    network card up to the type's maximum (`stacks.aws.network_interfaces`).
    """
    problems = []
    if kind.gpu_model is not None or facts.gpu_count:
        same_count = facts.gpu_count == kind.gpu_count
        same_model = (
            kind.gpu_model is not None
            and facts.gpu_name is not None
            and kind.gpu_model.upper().startswith(facts.gpu_name.upper())
        )
        if not (same_count and same_model):
            has = f"{facts.gpu_count} x {facts.gpu_name}" if facts.gpu_count else "no GPU"
            want = f"{kind.gpu_count} x {kind.gpu_model}" if kind.gpu_model else "no GPU"
            problems.append(f"{where} is {kind.name}, which has {has}, but the profile has {want}")
    efa = min(facts.efa_interfaces, facts.network_cards) if facts.network_cards else 0
    described = InstanceType(
        kind.name,
        vcpus=facts.vcpus,
        memory_gib=facts.memory_gib,
        efa_interfaces=efa,
        gpu_model=kind.gpu_model,
        gpu_count=kind.gpu_count,
    )
    return described, problems
