"""Kubernetes checks: kubelet on the nodes the kubernetes role joins, and each node as the
API server sees it (Ready, allocatable GPUs)."""

from __future__ import annotations

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    explain_unit,
    failed,
    passed,
    unit_active,
    unknown,
)
from myriad.node.facts import NodeFacts
from myriad.node.parsers import KubeNode

FIELD = "software.orchestrator"
FIX = bringup_fix("kubernetes", "systemctl restart kubelet")


def _kubernetes_role(c: Context) -> Skip | None:
    """Why the kubernetes role leaves the node alone, if it does."""
    if c.spec.software.orchestrator != "kubernetes":
        return Skip(FIELD, "the orchestrator is slurm")
    if c.pool.role not in ("controller", "compute"):
        return Skip(FIELD, "the kubernetes role runs on controller and compute nodes")
    return None


def _kube_node(view: ClusterView, node: str) -> KubeNode | Outcome:
    if not view.kube_nodes.ok:
        return unknown(f"Kubernetes' view unavailable: {view.kube_nodes.detail}")
    found = view.kube_nodes.get().get(node)
    if found is None:
        return failed(f"{node} is not a Kubernetes node")
    return found


# --- k8s.kubelet -----------------------------------------------------------------------------


def _derive_kubelet(c: Context) -> Expect | Skip:
    if (skip := _kubernetes_role(c)) is not None:
        return skip
    return Expect("kubelet", FIELD, FIX)


K8S_KUBELET = Check(
    id="k8s.kubelet",
    title="kubelet active",
    spec_fields=(FIELD,),
    derive=_derive_kubelet,
    evaluate=unit_active,
    explain=explain_unit,
)


# --- k8s.node-ready --------------------------------------------------------------------------


def _derive_ready(c: Context) -> Expect | Skip:
    if (skip := _kubernetes_role(c)) is not None:
        return skip
    return Expect(True, f"pools.{c.pool.name}", FIX)


def _evaluate_ready(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    found = _kube_node(view, node)
    if isinstance(found, Outcome):
        return found
    reason = f" ({found.ready_reason})" if found.ready_reason else ""
    actual = f"Ready={found.ready_status}{reason}"
    return passed(actual) if found.ready else failed(actual)


K8S_NODE_READY = Check(
    id="k8s.node-ready",
    title="Kubernetes node Ready",
    spec_fields=("pools",),
    derive=_derive_ready,
    evaluate=_evaluate_ready,
    explain=lambda expected: "Ready=True",
)


# --- k8s.gpu-allocatable ---------------------------------------------------------------------


def _derive_gpus(c: Context) -> Expect | Skip:
    if (skip := _kubernetes_role(c)) is not None:
        return skip
    gpus = int(c.variables.get("kubernetes_node_gpu_count") or 0)
    if not gpus:
        return Skip(f"{c.p}.gpu", "no GPUs in the profile")
    return Expect(
        gpus,
        f"{c.p}.gpu.count",
        "check the NVIDIA device plugin pod on {node} (kubectl -n kube-system logs) "
        "or the GPU Operator; " + bringup_fix("kubernetes"),
    )


def _evaluate_gpus(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    found = _kube_node(view, node)
    if isinstance(found, Outcome):
        return found
    count = found.gpu_allocatable
    if count is None:
        # The API answered and the node has no nvidia.com/gpu resource: the device plugin
        # never registered it, which is a difference, not an unknown.
        return failed("no nvidia.com/gpu resource")
    return passed(str(count)) if count == expected else failed(str(count))


K8S_GPU_ALLOCATABLE = Check(
    id="k8s.gpu-allocatable",
    title="allocatable nvidia.com/gpu",
    spec_fields=("profiles.*.gpu.count",),
    derive=_derive_gpus,
    evaluate=_evaluate_gpus,
)
