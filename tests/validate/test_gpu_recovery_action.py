"""gpu.recovery-action: the driver's own GPU Recovery Action, derived from the spec's driver
(reported from 565), evaluated against the real v13 capture (driver 590) through the
gathered document, as the node health runner evaluates it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from myriad.node.checks import CheckResult, NodeExpectations, evaluate_node, view_of
from myriad.node.facts import node_facts
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec.loader import LoadedSpec
from myriad.validate.expectations import expect, load_role_defaults

from spec_builder import cluster, gpu_profile, load_example

NODE = "gpu01"
A5000 = "nvidia-smi-q-x/rtx-a5000-x2_v13_drv590.44.01.xml"
A100_535 = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
CHECK = "gpu.recovery-action"


def probe(stdout: str = "", rc: int | None = 0) -> dict[str, Any]:
    return {"rc": rc, "stdout": stdout, "stderr": "", "missing": False, "timed_out": False}


def run(expected: Any, probes: Mapping[str, Any]) -> CheckResult:
    document = {
        "schema": 1,
        "node": NODE,
        "expectations": [
            {"check": CHECK, "expected": expected, "spec_field": "hand-written", "fix": "fix"}
        ],
    }
    node = NodeExpectations.from_dict(json.loads(json.dumps(document)))
    facts = node_facts(NODE, {"schema": 1, "args": {"units": []}, "probes": dict(probes)})
    return next(r for r in evaluate_node(node, facts, view_of(facts, NODE)) if r.check == CHECK)


def with_driver(loaded: LoadedSpec, driver: str) -> LoadedSpec:
    software = loaded.spec.software.model_copy(update={"nvidia_driver": driver})
    return dataclasses.replace(loaded, spec=loaded.spec.model_copy(update={"software": software}))


def derived(loaded: LoadedSpec) -> Any:
    result = plan_loaded(loaded)
    assert result.plan is not None
    inventory = build_inventory(loaded.spec, loaded.catalog, result.plan)
    found = expect(loaded.spec, loaded.catalog, result.plan, inventory, load_role_defaults())
    return next(e for e in found.nodes[0].expectations if e.check == CHECK)


def test_expected_from_driver_565_on() -> None:
    gpus = cluster(nodes=2, profile=gpu_profile(nics=2))
    for driver in ("570", "565", "590.44.01"):
        found = derived(with_driver(gpus, driver))
        assert found.applies and found.expected == "None", driver
    old = derived(with_driver(gpus, "550"))
    assert not old.applies and old.spec_field == "software.nvidia_driver"
    assert "from 565" in old.reason
    # No GPUs (the local container cluster): not applicable.
    assert not derived(load_example("local")).applies


def test_the_v13_capture_asks_for_nothing(sample: Callable[[str], str]) -> None:
    result = run("None", {"nvidia_smi": probe(sample(A5000))})
    assert (result.status, result.actual) == ("pass", "None on 2 GPUs")


def test_a_gpu_asking_for_a_reset_fails(sample: Callable[[str], str]) -> None:
    # The capture with its first GPU's field changed to what a faulted GPU reports.
    text = sample(A5000).replace(
        "<gpu_recovery_action>None</gpu_recovery_action>",
        "<gpu_recovery_action>Reset</gpu_recovery_action>",
        1,
    )
    result = run("None", {"nvidia_smi": probe(text)})
    assert (result.status, result.actual) == ("fail", "GPU 0: Reset")


def test_a_driver_that_does_not_report_it_is_unknown_not_healthy(
    sample: Callable[[str], str],
) -> None:
    result = run("None", {"nvidia_smi": probe(sample(A100_535))})
    assert result.status == "error"
    assert "GPU 0: no recovery action reported" in result.actual
    broken = run("None", {"nvidia_smi": probe("", rc=9)})
    assert broken.status != "pass"
