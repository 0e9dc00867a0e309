"""The efa.devices check: derived where the spec runs NCCL over EFA, evaluated from
`fi_info -p efa -t FI_EP_RDM` as the node health runner does (through the gathered document).

The fi_info listings below are written by hand in fi_info's output format (libfabric's
`fi_info` man page: one `provider:` / `fabric:` / `domain:` block per endpoint); there is no
capture from an EFA instance in tests/samples, and none can be made without one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from myriad.node.checks import CheckResult, NodeExpectations, evaluate_node, view_of
from myriad.node.facts import node_facts, parse_fi_info_domains
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.validate.expectations import expect, load_role_defaults

from spec_builder import load_example

NODE = "gpu01"


def fi_info(devices: int) -> str:
    blocks = []
    for n in range(devices):
        domain = f"rdmap{16 + n}s27-rdm"
        blocks.append(
            f"provider: efa\n    fabric: efa\n    domain: {domain}\n    version: 122.0\n"
            "    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n"
        )
    return "".join(blocks)


def probe(stdout: str = "", rc: int | None = 0, missing: bool = False) -> dict[str, Any]:
    return {"rc": rc, "stdout": stdout, "stderr": "", "missing": missing, "timed_out": False}


def expectations(example: str) -> dict[str, dict[str, Any]]:
    result = plan_loaded(load_example(example))
    assert result.plan is not None
    spec, catalog = result.loaded.spec, result.loaded.catalog
    inventory = build_inventory(spec, catalog, result.plan)
    cluster = expect(spec, catalog, result.plan, inventory, load_role_defaults())
    return {
        node.node: {e.check: e for e in node.expectations}["efa.devices"].to_dict()
        for node in cluster.nodes
    }


def run(expected: Any, probes: Mapping[str, Any]) -> CheckResult:
    document = {
        "schema": 1,
        "node": NODE,
        "pool": "gpu",
        "profile": "p5-node",
        "role": "compute",
        "expectations": [
            {"check": "efa.devices", "expected": expected, "spec_field": "network.fabric",
             "fix": "fix {node}", "applies": True, "reason": ""}
        ],
    }  # fmt: skip
    node = NodeExpectations.from_dict(json.loads(json.dumps(document)))
    facts = node_facts(NODE, {"schema": 1, "args": {"units": []}, "probes": dict(probes)})
    results = {r.check: r for r in evaluate_node(node, facts, view_of(facts, NODE))}
    return results["efa.devices"]


def test_p5_compute_nodes_expect_32_devices_and_others_skip() -> None:
    found = expectations("aws-dev")
    assert found["gpu01"]["applies"] and found["gpu01"]["expected"] == 32
    assert "nics.compute.count" in found["gpu01"]["spec_field"]
    assert not found["ctl01"]["applies"]
    assert "compute nodes only" in found["ctl01"]["reason"]
    local = expectations("local")
    assert not any(e["applies"] for e in local.values())
    assert all("not efa" in e["reason"] for e in local.values())


def test_every_device_seen_passes() -> None:
    result = run(32, {"fi_info_efa": probe(fi_info(32))})
    assert result.status == "pass"
    assert result.actual.startswith("32 EFA RDM domain(s): rdmap16s27-rdm")


def test_a_missing_device_fails() -> None:
    result = run(32, {"fi_info_efa": probe(fi_info(30))})
    assert result.status == "fail"
    assert result.actual.startswith("30 EFA RDM domain(s)")


def test_no_efa_software_or_provider_fails_and_unreadable_is_unknown() -> None:
    missing = run(32, {"fi_info_efa": probe(missing=True, rc=None)})
    assert missing.status == "fail"
    # fi_info exits non-zero when the efa provider finds no device (FI_ENODATA).
    nodata = run(32, {"fi_info_efa": probe("fi_getinfo: -61 (No data available)", rc=255)})
    assert nodata.status == "fail" and "exited 255" in nodata.actual
    timed_out = {"rc": None, "stdout": "", "stderr": "", "missing": False, "timed_out": True}
    unknown = run(32, {"fi_info_efa": timed_out})
    assert unknown.status == "error" and "timed out" in unknown.actual
    assert run(32, {}).status == "error"  # not gathered: never a pass


def test_domains_are_read_once_each() -> None:
    text = fi_info(2) + fi_info(1)  # fi_info repeats a domain per endpoint variant
    assert parse_fi_info_domains(text) == ("rdmap16s27-rdm", "rdmap17s27-rdm")
