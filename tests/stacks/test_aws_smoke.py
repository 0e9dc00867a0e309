"""The aws-smoke example under Pulumi mocks, with the config of Pulumi.aws-smoke.yaml: small
instances, no EFA, nothing protected, so one `pulumi destroy` removes it all."""

from __future__ import annotations

from typing import Any

import pulumi

from myriad.plan.nodes import iter_nodes
from myriad.provision.stack_outputs import match_spec, parse_nodes
from stacks.program import build
from stacks.settings import read_settings

from stack_harness import REPO, run_program, spec_with, stack_config

SMOKE = REPO / "inventories/aws-smoke/cluster.yaml"


def test_the_smoke_example_is_small_unprotected_and_complete() -> None:
    spec = spec_with(SMOKE)
    assert stack_config("aws-smoke")["myriad:spec"] == "inventories/aws-smoke/cluster.yaml"

    def body() -> dict[str, Any]:
        result = build(spec, read_settings(pulumi.Config("myriad"), spec, SMOKE))
        return {"nodes": result.nodes, **result.outputs}

    built = run_program(body, config=stack_config("aws-smoke"))
    templates = built.of_type("launchTemplate:LaunchTemplate")
    assert {t.inputs["instanceType"] for t in templates} == {"m7i.large"}
    for found in templates:
        assert all("interfaceType" not in i for i in found.inputs["networkInterfaces"])
    assert not [r.name for r in built.resources if r.protect]
    nodes = parse_nodes({"nodes": built.outputs["nodes"]})
    assert list(match_spec(spec, nodes)) == [n.name for n in iter_nodes(spec)]
    assert len(nodes) == 4
