"""The controller's half: each node's document is the validation expectations plus the spec's
policy; the spec's health section sets Slurm's health check and turns the role on; a check the
spec names that does not exist is a located spec error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from health_stubs import h100_spec
from myriad.errors import SpecError
from myriad.health.render import documents, write_documents
from myriad.node import artefact
from myriad.node.checks import NodeExpectations
from myriad.plan.pipeline import plan_loaded
from myriad.provision.resolve import resolve_cluster
from myriad.spec import load_spec_text
from myriad.validate.expectations import expect, load_role_defaults

HEALTH = {"interval_s": 15, "drain": ["gpu.count", "gpu.xid", "hca.counter-growth"]}


def resolved(health: dict[str, Any] | None) -> Any:
    spec = h100_spec("health-unit", "172.31.90.0/24", health)
    if health is None:
        del spec["health"]
    loaded = load_spec_text(yaml.safe_dump(spec, sort_keys=False), "health-unit.yaml")
    return resolve_cluster(plan_loaded(loaded))


def test_documents_hold_the_validation_expectations_and_the_policy(tmp_path: Path) -> None:
    cluster = resolved(HEALTH)
    docs = documents(cluster.loaded, cluster.plan, cluster.inventory)
    assert sorted(docs) == ["ctl01", "node01", "node02"]
    doc = docs["node02"]
    assert doc["policy"] == {
        "orchestrator": "slurm",
        "interval_s": 15,
        "drain": ["gpu.count", "gpu.xid", "hca.counter-growth"],
        "flap_window_s": 3600,
        "flap_limit": 3,
        "xid_hold_s": 0,
    }
    # One source of truth: the same expectations `myriad validate` derives for node02.
    validate = expect(
        cluster.loaded.spec, cluster.loaded.catalog, cluster.plan, cluster.inventory,
        load_role_defaults(),
    ).node("node02")  # fmt: skip
    assert NodeExpectations.from_dict(doc["node"]).expectations == validate.expectations
    by_check = {e["check"]: e for e in doc["node"]["expectations"]}
    assert by_check["gpu.count"]["expected"] == 8
    assert by_check["hca.counter-growth"]["expected"] == {
        "names": ["mlx5_0", "mlx5_1"],
        "value": {
            "link_downed": 0,
            "symbol_error": 10,
            "port_rcv_errors": 10,
            "link_error_recovery": 0,
        },
    }
    assert by_check["disk.space"]["expected"] == {"/": 5, "/tmp": 5, "/var": 5}
    assert by_check["gpu.xid"]["expected"] == {"hold_s": 0}
    # No shared storage in this spec.
    assert by_check["storage.writable"]["reason"] == "storage.kind is none"
    # The controller has no GPUs: its XID check says why it does not apply.
    ctl = {e["check"]: e for e in docs["ctl01"]["node"]["expectations"]}
    assert (ctl["gpu.xid"]["applies"], ctl["gpu.xid"]["reason"]) == (
        False,
        "profile container has no GPUs",
    )

    written = write_documents(docs, tmp_path / "health")
    assert sorted(p.name for p in written) == ["ctl01.json", "node01.json", "node02.json"]
    assert json.loads((tmp_path / "health" / "node02.json").read_text()) == doc
    # A node gone from the spec loses its document.
    write_documents({"node01": docs["node01"]}, tmp_path / "health")
    assert sorted(p.name for p in (tmp_path / "health").iterdir()) == ["node01.json"]


def test_the_spec_sets_slurms_health_check_and_turns_the_role_on() -> None:
    variables = resolved(HEALTH).inventory.group_vars["all"]
    assert variables["health_enabled"] is True
    assert variables["slurm_health_check_program"] == "/usr/local/sbin/myriad-health"
    assert variables["slurm_health_check_interval"] == 15
    assert variables["slurm_health_check_node_state"] == "ANY"


def test_without_a_health_section_nothing_changes() -> None:
    cluster = resolved(None)
    assert documents(cluster.loaded, cluster.plan, cluster.inventory) == {}
    variables = cluster.inventory.group_vars["all"]
    assert "health_enabled" not in variables
    assert "slurm_health_check_program" not in variables
    validate = expect(
        cluster.loaded.spec, cluster.loaded.catalog, cluster.plan, cluster.inventory,
        load_role_defaults(),
    ).node("node01")  # fmt: skip
    skipped = {e.check: e.reason for e in validate.expectations if not e.applies}
    assert skipped["gpu.xid"] == "no health section: node health is off"
    assert skipped["hca.counter-growth"] == "no health section: node health is off"
    assert skipped["disk.space"] == "no health section: node health is off"
    assert skipped["storage.writable"] == "no health section: node health is off"


def test_an_unknown_check_in_drain_is_a_located_spec_error() -> None:
    cluster = resolved({"drain": ["gpu.count", "gpu.cuont"]})
    with pytest.raises(SpecError) as caught:
        documents(cluster.loaded, cluster.plan, cluster.inventory)
    (problem,) = caught.value.problems
    assert (problem.path, problem.message) == (("health", "drain", 1), "unknown check 'gpu.cuont'")
    assert problem.line > 0
    assert "gpu.count" in problem.hint and "gpu.xid" in problem.hint


def test_bringup_writes_the_documents_where_the_role_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from myriad.health.render import prepare

    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    spec = h100_spec("health-prep", "172.31.90.0/24", HEALTH)
    with_health = tmp_path / "with.yaml"
    with_health.write_text(yaml.safe_dump(spec))
    folder = prepare(with_health)
    # The role's default: {{ inventory_dir }}/../health, beside <state>/<cluster>/inventory.
    assert folder == tmp_path / "state" / "health-prep" / "health"
    assert sorted(p.name for p in folder.iterdir()) == [
        "ctl01.json",
        artefact.NAME,
        "node01.json",
        "node02.json",
    ]
    # Beside them the node package the role installs (roles/health: health_node_artefact).
    assert (folder / artefact.NAME).read_bytes() == artefact.build()
    del spec["health"]
    without = tmp_path / "without.yaml"
    without.write_text(yaml.safe_dump(spec))
    assert prepare(without) is None
