"""`kubectl get nodes -o json` parser.

No real capture of a GPU node list was found (tests/samples/SOURCES.md, Gaps), so
fixtures/kubectl-get-nodes-o-json_v1.29.json is written to the Kubernetes API reference
for Node v1 (status.capacity / status.allocatable, status.conditions type Ready,
spec.taints, spec.unschedulable) with nvidia.com/gpu as the NVIDIA device plugin
advertises it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import KubeNode, ParseFailure, parse_kubectl_nodes
from myriad.node.parsers.common import INTERNAL_ERROR

NODES = "kubectl-get-nodes-o-json_v1.29.json"


def test_node_list(fixture_text):
    nodes = {n.name: n for n in parse_kubectl_nodes(fixture_text(NODES))}
    assert list(nodes) == ["gpu0001", "gpu0002", "gpu0003", "ctl1"]

    ready = nodes["gpu0001"]
    assert (ready.ready, ready.ready_status, ready.ready_reason) == (True, "True", "KubeletReady")
    assert (ready.gpu_capacity, ready.gpu_allocatable) == (8, 8)
    assert ready.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert ready.kubelet_version == "v1.29.4"
    assert not ready.unschedulable and ready.taints == ()

    not_ready = nodes["gpu0002"]
    assert (not_ready.ready, not_ready.ready_reason) == (False, "KubeletNotReady")
    # One GPU marked unhealthy by the device plugin: capacity 8, allocatable 7.
    assert (not_ready.gpu_capacity, not_ready.gpu_allocatable) == (8, 7)

    cordoned = nodes["gpu0003"]
    assert cordoned.ready and cordoned.unschedulable
    assert cordoned.taints == ("node.kubernetes.io/unschedulable:NoSchedule",)

    control = nodes["ctl1"]
    assert (control.gpu_capacity, control.gpu_allocatable) == (None, None)
    assert control.taints == ("node-role.kubernetes.io/control-plane:NoSchedule",)
    assert control.labels["node-role.kubernetes.io/control-plane"] == ""


def test_single_node_document(fixture_text):
    single = json.loads(fixture_text(NODES))["items"][0]
    (node,) = parse_kubectl_nodes(json.dumps(single))
    assert node.name == "gpu0001"


def test_empty_list_is_no_nodes():
    assert parse_kubectl_nodes('{"apiVersion": "v1", "kind": "List", "items": []}') == ()


def test_missing_ready_condition():
    document = {"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1"}}]}
    (node,) = parse_kubectl_nodes(json.dumps(document))
    assert (node.ready, node.ready_status) == (False, None)


def test_taint_with_value():
    node = {
        "kind": "Node",
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    }
    assert parse_kubectl_nodes(json.dumps(node))[0].taints == ("nvidia.com/gpu=present:NoSchedule",)


def test_truncations(fixture_text, check_truncations):
    check_truncations(parse_kubectl_nodes, fixture_text(NODES))


def _with_gpu(value: object) -> str:
    node = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {}}}
    node["status"]["allocatable"]["nvidia.com/gpu"] = value
    return json.dumps(node)


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ('{"kind": "Pod"}', "kind 'Pod'"),
        ('{"kind": "List"}', "no items"),
        ('{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}}]}', "not a Node"),
        ('{"kind": "List", "items": [{"metadata": {}}]}', "no metadata.name"),
        ('{"kind": "List", "items": ["n1"]}', "not an object"),
        (_with_gpu("500m"), "whole number"),
        (_with_gpu(True), "whole number"),
        ('{"kind": "Node", "metadata": {"name": "n", "labels": {"a": 1}}}', "label"),
        ('{"kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": [{}]}}', "taint"),
        ('{"kind": "Node", "metadata": {"name": "n"}, "status": {"conditions": {}}}', "list"),
    ],
)
def test_malformed(document, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_kubectl_nodes(document)


def test_gpu_count_as_integer():
    assert parse_kubectl_nodes(_with_gpu(4))[0].gpu_allocatable == 4


def test_empty_and_garbage(garbage):
    for text in garbage:
        with pytest.raises(ParseFailure):
            parse_kubectl_nodes(text)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "items",
                    "metadata",
                    "name",
                    "status",
                    "spec",
                    "conditions",
                    "type",
                    "allocatable",
                    "nvidia.com/gpu",
                    "labels",
                    "taints",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_json)
def test_fuzz_never_raises_anything_else(document):
    for wrapped in (document, {"kind": "List", "items": [document]}):
        try:
            result = parse_kubectl_nodes(json.dumps(wrapped))
        except ParseFailure as failure:
            assert not failure.reason.startswith(INTERNAL_ERROR), failure
        else:
            assert all(isinstance(node, KubeNode) for node in result)
