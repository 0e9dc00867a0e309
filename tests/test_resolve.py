"""resolve_cluster: the one spec → plan → machines → inventory sequence every command uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad.errors import PlanError, StackOutputsError
from myriad.plan.lints import Finding
from myriad.plan.pipeline import PlanResult, plan_loaded
from myriad.provision.resolve import resolve_cluster
from myriad.render.inventory import Connection

from spec_builder import ROOT, cluster, load_example

LOCAL = ROOT / "inventories" / "local" / "cluster.yaml"
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def _outputs(tmp_path: Path, *nodes: dict[str, object]) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"nodes": list(nodes)}), encoding="utf-8")
    return path


def test_a_spec_file_and_its_plan_resolve_to_the_same_inventory() -> None:
    from_file = resolve_cluster(LOCAL)
    from_plan = resolve_cluster(plan_loaded(load_example("local")))
    assert from_file.inventory == from_plan.inventory
    assert from_file.machines == ()
    assert from_file.spec.metadata.name == "local"
    assert from_file.plan is from_file.result.plan


def test_the_machines_of_a_stack_give_their_addresses(tmp_path: Path) -> None:
    saved = _outputs(
        tmp_path,
        {
            "name": "gpu01",
            "address": "10.10.9.9",
            "pool": "gpu",
            "role": "compute",
            "island": 0,
            "provider": "baremetal",
        },
    )
    resolved = resolve_cluster(STARTER, stack_outputs=saved, connection=Connection(user="ops"))
    assert [m.name for m in resolved.machines] == ["gpu01"]
    assert resolved.inventory.host_vars["gpu01"]["ansible_host"] == "10.10.9.9"
    assert resolved.inventory.host_vars["gpu01"]["ansible_user"] == "ops"
    assert resolved.inventory.host_vars["gpu02"]["ansible_host"] == "10.10.0.14"


def test_machines_that_disagree_with_the_spec_are_refused(tmp_path: Path) -> None:
    saved = _outputs(
        tmp_path,
        {
            "name": "gpu01",
            "address": "10.10.9.9",
            "pool": "storage",
            "role": "compute",
            "island": 0,
            "provider": "baremetal",
        },
    )
    with pytest.raises(StackOutputsError, match="gpu01: pool is 'storage' in the stack"):
        resolve_cluster(STARTER, stack_outputs=saved)


def test_a_plan_with_lint_errors_resolves_to_nothing() -> None:
    result = plan_loaded(cluster(facility={"rack_kw": 6}))
    assert result.has_errors
    with pytest.raises(PlanError, match=r"the spec has lint errors \(see `myriad plan`\): "):
        resolve_cluster(result)


def test_an_unplannable_fabric_is_a_plan_error_too() -> None:
    fabric = Finding(
        id="fabric-shape",
        severity="error",
        message="the fabric does not fit",
        suggestion="change network.topology",
        path=("network", "topology"),
    )
    result = PlanResult(loaded=load_example("local"), plan=None, findings=(fabric,))
    with pytest.raises(PlanError, match="the fabric does not fit"):
        resolve_cluster(result)
