"""Parser for `kubectl get nodes -o json` (a v1 List of Node, or a single Node)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from myriad.node.parsers.common import ParseFailure, guarded, load_json

__all__ = ["GPU_RESOURCE", "KubeNode", "parse_kubectl_nodes"]

TOOL = "kubectl get nodes"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class KubeNode:
    name: str
    ready: bool
    ready_status: str | None
    ready_reason: str | None
    unschedulable: bool
    gpu_capacity: int | None
    gpu_allocatable: int | None
    kubelet_version: str | None
    labels: dict[str, str]
    taints: tuple[str, ...]


def _object(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseFailure(TOOL, f"{where} is not an object")
    return value


def _gpu_count(resources: dict[str, Any], where: str) -> int | None:
    value = resources.get(GPU_RESOURCE)
    if value is None:
        return None
    # Extended resources are whole numbers; the API serialises quantities as strings.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d+", value):
        return int(value)
    raise ParseFailure(TOOL, f"{where} {GPU_RESOURCE} is not a whole number: {value!r}")


def _ready(status: dict[str, Any], name: str) -> tuple[str | None, str | None]:
    conditions = status.get("conditions")
    if conditions is None:
        return None, None
    if not isinstance(conditions, list):
        raise ParseFailure(TOOL, f"{name}: status.conditions is not a list")
    for condition in conditions:
        cond = _object(condition, f"{name}: a condition")
        if cond.get("type") == "Ready":
            state, reason = cond.get("status"), cond.get("reason")
            return (
                state if isinstance(state, str) else None,
                reason if isinstance(reason, str) else None,
            )
    return None, None


def _taint(value: object, name: str) -> str:
    taint = _object(value, f"{name}: a taint")
    key, effect, taint_value = taint.get("key"), taint.get("effect"), taint.get("value")
    if not isinstance(key, str) or not isinstance(effect, str):
        raise ParseFailure(TOOL, f"{name}: a taint lacks key or effect")
    return f"{key}={taint_value}:{effect}" if taint_value else f"{key}:{effect}"


def _labels(metadata: dict[str, Any], name: str) -> dict[str, str]:
    labels = _object(metadata.get("labels"), f"{name}: metadata.labels")
    if not all(isinstance(v, str) for v in labels.values()):
        raise ParseFailure(TOOL, f"{name}: a label value is not a string")
    return dict(labels)


def _node(item: object, position: int) -> KubeNode:
    node = _object(item, f"item {position}")
    if node.get("kind", "Node") != "Node":
        raise ParseFailure(TOOL, f"item {position} is a {node.get('kind')!r}, not a Node")
    metadata = _object(node.get("metadata"), f"item {position} metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ParseFailure(TOOL, f"item {position} has no metadata.name")
    spec = _object(node.get("spec"), f"{name}: spec")
    status = _object(node.get("status"), f"{name}: status")
    taints = spec.get("taints")
    if taints is None:
        taints = []
    if not isinstance(taints, list):
        raise ParseFailure(TOOL, f"{name}: spec.taints is not a list")
    ready_status, ready_reason = _ready(status, name)
    node_info = _object(status.get("nodeInfo"), f"{name}: status.nodeInfo")
    kubelet = node_info.get("kubeletVersion")
    return KubeNode(
        name=name,
        ready=ready_status == "True",
        ready_status=ready_status,
        ready_reason=ready_reason,
        unschedulable=spec.get("unschedulable") is True,
        gpu_capacity=_gpu_count(_object(status.get("capacity"), name), f"{name} capacity"),
        gpu_allocatable=_gpu_count(_object(status.get("allocatable"), name), f"{name} allocatable"),
        kubelet_version=kubelet if isinstance(kubelet, str) else None,
        labels=_labels(metadata, name),
        taints=tuple(_taint(t, name) for t in taints),
    )


@guarded(TOOL)
def parse_kubectl_nodes(text: str) -> tuple[KubeNode, ...]:
    """Parse `kubectl get nodes -o json` or `kubectl get node NAME -o json`."""
    data = _object(load_json(TOOL, text), "the document")
    kind = data.get("kind")
    if kind == "Node":
        return (_node(data, 0),)
    if kind not in ("List", "NodeList"):
        raise ParseFailure(TOOL, f"expected a List of Node, got kind {kind!r}")
    items = data.get("items")
    if not isinstance(items, list):
        raise ParseFailure(TOOL, "the List has no items array")
    return tuple(_node(item, i) for i, item in enumerate(items))
