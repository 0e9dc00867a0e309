"""gpu.nvlink-domain: the trays of one rack-scale NVLink domain compared with each other.

Issue #30: every GPU of a domain must agree on its clique and cluster UUID. gpu.fabric-state
holds one tray's GPUs to that; only `myriad validate`, which gathers every tray, can see a
tray whose GPUs agree with each other but not with the rest of the rack. The trays here are
the gb200-nvl72 example's (18 trays, one domain `nvl01`), their GPUs' Fabric sections in the
element names of the real DTD v13 capture (tests/health_stubs.py `fabric_xml`).
"""

from __future__ import annotations

import pytest
from test_checks import Cluster, by_key, gpu_cluster, probe

from health_stubs import GB200_CLIQUE, GB200_CLUSTER, fabric_xml
from myriad.node.checks import BY_ID
from myriad.node.checks.model import ClusterView
from myriad.node.facts import Fact, node_facts
from myriad.node.health import CONTROLLER_VIEW
from myriad.plan.pipeline import plan_loaded

from spec_builder import load_example

CHECK = "gpu.nvlink-domain"
RACK = f"clique {GB200_CLIQUE} of cluster {GB200_CLUSTER}"
OTHER = f"clique 4027 of cluster {GB200_CLUSTER}"


@pytest.fixture(scope="module")
def rack() -> Cluster:
    return Cluster(plan_loaded(load_example("gb200-nvl72")))


def trays(cliques: dict[str, int]) -> dict[str, dict[str, object]]:
    """Each named tray's four GPUs all in the clique given (cluster UUID the rack's)."""
    return {
        name: {"nvidia_smi": probe(fabric_xml(4, dict.fromkeys(range(4), clique)))}
        for name, clique in cliques.items()
    }


def test_each_tray_expects_its_racks_domain_and_trays(rack: Cluster) -> None:
    expected = rack.expected("gpu07", CHECK)
    assert expected == {"domain": "nvl01", "trays": [f"gpu{i:02d}" for i in range(1, 19)]}
    assert rack.expected("ctl01", CHECK) is None  # the controller has no GPUs


def test_trays_in_one_domain_pass(rack: Cluster) -> None:
    found = by_key(rack.run(trays({"gpu01": 4026, "gpu02": 4026, "gpu03": 4026})))
    for name in ("gpu01", "gpu02", "gpu03"):
        result = found[(name, CHECK)]
        assert (result.status, result.actual) == (
            "pass",
            f"{RACK}, as the 2 other trays of nvl01 read",
        )
    assert result.expected == (
        "the same NVLink domain (clique, cluster UUID) as the other trays of nvl01"
    )


def test_the_tray_in_another_domain_fails_and_names_the_racks(rack: Cluster) -> None:
    found = by_key(rack.run(trays({"gpu01": 4026, "gpu02": 4027, "gpu03": 4026})))
    odd = found[("gpu02", CHECK)]
    assert (odd.status, odd.actual) == (
        "fail",
        f"{OTHER}; nvl01's other trays: {RACK} (gpu01, gpu03)",
    )
    assert odd.fix.startswith("drain gpu02; a tray in another NVLink domain than the rest of nvl01")
    # The others pass: two of the three trays agree, and the odd one is named on its own line.
    assert (found[("gpu01", CHECK)].status, found[("gpu01", CHECK)].actual) == (
        "pass",
        f"{RACK}, as 1 of the 2 other trays of nvl01",
    )
    # gpu.fabric-state, judging each tray alone, passes all three.
    assert found[("gpu02", "gpu.fabric-state")].status == "pass"


def test_two_trays_that_disagree_both_fail(rack: Cluster) -> None:
    found = by_key(rack.run(trays({"gpu01": 4026, "gpu02": 4027})))
    assert {n: found[(n, CHECK)].status for n in ("gpu01", "gpu02")} == {
        "gpu01": "fail",
        "gpu02": "fail",
    }
    assert found[("gpu01", CHECK)].actual == f"{RACK}; nvl01's other trays: {OTHER} (gpu02)"


def test_a_tray_split_within_itself_or_alone_is_not_judged_here(rack: Cluster) -> None:
    split = {"nvidia_smi": probe(fabric_xml(4, {3: 4027}))}
    found = by_key(rack.run({**trays({"gpu01": 4026, "gpu03": 4026}), "gpu02": split}))
    own = found[("gpu02", CHECK)]
    assert (own.status, own.actual) == (
        "error",
        "this tray's GPUs are in no one NVLink domain (see gpu.fabric-state)",
    )
    assert found[("gpu02", "gpu.fabric-state")].status == "fail"
    # gpu01 is compared with gpu03 alone: gpu02 says nothing either way.
    assert found[("gpu01", CHECK)].actual == f"{RACK}, as the 1 other trays of nvl01 read"


def test_servers_whose_nvlink_stops_at_the_server_skip_it() -> None:
    found = by_key(gpu_cluster(gpus=8).run({}))
    result = found[("gpu01", CHECK)]
    assert result.status == "not-applicable"
    assert "not a tray of a rack-scale NVLink domain" in result.actual


def test_on_the_node_it_is_the_controllers_to_judge() -> None:
    """The node health runner has its own node only: its view says so, and the runner turns
    that into not-applicable (tests/health/test_runner_controller_view.py)."""
    nothing: Fact[object] = Fact("not-gathered", detail=CONTROLLER_VIEW)
    view = ClusterView(None, nothing, nothing, nothing, gpu_domains=nothing)  # type: ignore[arg-type]
    facts = node_facts("gpu01", {"nvidia_smi": probe(fabric_xml(4))})
    outcome = BY_ID[CHECK].evaluate({"domain": "nvl01", "trays": ["gpu01"]}, facts, view, "gpu01")
    assert outcome.status == "error" and CONTROLLER_VIEW in outcome.actual
