"""The node's half of the check model: evaluation runs on the standard library alone, from
an expectation document (JSON) and a gathered document, exactly as on the controller; and
the registry holds every check once, collected from the subject modules."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from myriad.node.checks import (
    BY_ID,
    CHECKS,
    NodeExpectations,
    evaluate_node,
    registry,
    view_of,
)
from myriad.node.checks.registry import SUBJECTS, subject_modules
from myriad.node.facts import node_facts

SRC = Path(__file__).resolve().parents[2] / "src"
A100 = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
NVLINK = "nvidia-smi-nvlink/a100-sxm4-80gb-x8_nvlink-status.txt"
FIX = "re-run the nvidia_driver role: myriad bringup --tags nvidia_driver --limit {node}"

# What the node runs: read both documents, evaluate, print the results and what was loaded.
NODE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])  # src, beside the standard library alone (-I -S)
    from myriad.node.checks import NodeExpectations, evaluate_node, view_of
    from myriad.node.facts import node_facts
    with open(sys.argv[2]) as handle:
        expectations = NodeExpectations.from_dict(json.load(handle))
    with open(sys.argv[3]) as handle:
        facts = node_facts(expectations.node, json.load(handle))
    results = evaluate_node(expectations, facts, view_of(facts, expectations.node))
    print(json.dumps({
        "results": [r._asdict() for r in results],
        "modules": sorted(sys.modules),
        "path": sys.path,
    }))
    """
)


def expectations_document() -> dict[str, Any]:
    """A GPU node's expectations as the controller renders them, written out by hand: four
    A100s on a branch-535 driver with persistence on, 12 NVLink links each."""

    def e(check: str, expected: Any, applies: bool = True, reason: str = "") -> dict[str, Any]:
        return {
            "check": check,
            "expected": expected,
            "spec_field": f"profiles.a100.{check}",
            "fix": FIX,
            "applies": applies,
            "reason": reason,
        }

    return {
        "schema": 1,
        "node": "gpu07",
        "pool": "gpu",
        "profile": "a100",
        "role": "compute",
        "expectations": [
            e("host.name", "gpu07"),
            e("gpu.count", 1),
            e("gpu.model", {"model": "A100-SXM4-80GB", "token": "a100", "pcie": False}),
            e("gpu.driver", {"branch": "535", "version": None}),
            e("gpu.persistence", True),
            e("gpu.health", True),
            e("gpu.nvlink", 12),
            e("hca.rate", {"names": ["mlx5_0"], "value": 400}),
            e("gpu.fabricmanager", None, applies=False, reason="no NVSwitch"),
        ],
    }


def gathered_document(sample: Callable[[str], str]) -> dict[str, Any]:
    def probe(stdout: str, rc: int | None = 0, missing: bool = False) -> dict[str, Any]:
        return {"rc": rc, "stdout": stdout, "stderr": "", "missing": missing, "timed_out": False}

    return {
        "schema": 1,
        "args": {"units": []},
        "seconds": 0.4,
        "probes": {
            "hostname": probe("gpu07\n"),
            "nvidia_smi": probe(sample(A100)),
            "nvlink": probe(sample(NVLINK)),
            "sysfs_infiniband": probe("", rc=None, missing=True),
            "ibstat": probe("", rc=None, missing=True),
        },
    }


def test_node_side_evaluation_needs_only_the_standard_library(
    tmp_path: Path, sample: Callable[[str], str]
) -> None:
    expectations, gathered = tmp_path / "expectations.json", tmp_path / "facts.json"
    expectations.write_text(json.dumps(expectations_document()))
    gathered.write_text(json.dumps(gathered_document(sample)))
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    # -I: no environment, no user site, no script folder; -S: no site-packages at all.
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(script), str(SRC), str(expectations), str(gathered)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert not [p for p in output["path"] if "-packages" in p], output["path"]
    top_level = {name.split(".")[0] for name in output["modules"]}
    third_party = top_level - set(sys.stdlib_module_names) - {"myriad", "__main__"}
    assert third_party == set()
    myriad = {name for name in output["modules"] if name.startswith("myriad.")}
    assert myriad, "myriad was not imported"
    assert all(name == "myriad.node" or name.startswith("myriad.node.") for name in myriad), sorted(
        myriad
    )
    assert {"pydantic", "rich", "yaml", "ansible"}.isdisjoint(top_level)

    results = {r["check"]: r for r in output["results"]}
    statuses = {check: r["status"] for check, r in results.items()}
    assert statuses == {
        "node.reachable": "pass",
        "host.name": "pass",
        "gpu.count": "pass",
        "gpu.model": "pass",
        "gpu.driver": "pass",  # 535.54.03 is of branch 535
        "gpu.persistence": "fail",  # the capture was taken with persistence mode off
        "gpu.health": "error",  # N/A in this capture: unknown, not healthy
        "gpu.nvlink": "pass",
        "hca.rate": "fail",  # no RDMA devices: the tool the spec needs is missing
        "gpu.fabricmanager": "not-applicable",
    }
    assert results["gpu.persistence"]["actual"] == "GPU 0 off"
    assert results["gpu.persistence"]["fix"] == (
        "re-run the nvidia_driver role: myriad bringup --tags nvidia_driver --limit gpu07"
    )
    assert results["gpu.driver"]["expected"] == "branch 535 (535.x)"
    assert results["gpu.fabricmanager"]["actual"] == "no NVSwitch"

    # The controller, with every package at hand, reaches the very same results.
    here = NodeExpectations.from_dict(expectations_document())
    facts = node_facts("gpu07", gathered_document(sample))
    same = [r._asdict() for r in evaluate_node(here, facts, view_of(facts, "gpu07"))]
    assert same == output["results"]


def test_the_registry_collects_every_subject_module_in_report_order() -> None:
    package = Path(registry.__file__).parent
    on_disk = {
        path.stem
        for path in package.glob("*.py")
        if path.stem not in ("__init__", "model", "registry", "engine")
    }
    found = subject_modules()
    assert set(found) == on_disk
    # The listed subjects first, in their order; any other subject module after, by name.
    listed = [name for name in SUBJECTS if name in on_disk]
    assert found == listed + sorted(on_disk - set(SUBJECTS))
    ids = [check.id for check in CHECKS]
    assert len(ids) == len(set(ids)) == len(BY_ID)
    assert ids[:2] == ["host.name", "hosts.file"]
    # Checks of one subject are together, subjects in the registry's order; each check's
    # derive lives in its subject's module.
    modules = [check.derive.__module__.rsplit(".", 1)[1] for check in CHECKS]
    assert modules == sorted(modules, key=found.index)
    for check in CHECKS:
        assert check.title and check.spec_fields, check.id


def test_a_check_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from myriad.node.checks.gpu import GPU_COUNT

    again = types.ModuleType("myriad.node.checks.gpu_again")
    again.GPU_COUNT_AGAIN = replace(GPU_COUNT, title="GPU count, declared again")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, again.__name__, again)
    monkeypatch.setattr(registry, "subject_modules", lambda: ["gpu", "gpu_again"])
    with pytest.raises(RuntimeError, match=r"gpu\.count is declared twice \(again in gpu_again"):
        registry.collect()
