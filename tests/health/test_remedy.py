"""The remediation core: each decision only when safe, within the budget, stopped by the
breaker, escalating instead of looping, racks drained as a unit. Pure: no Slurm, no BMC."""

from __future__ import annotations

import json

import pytest

from myriad.errors import ValidateError
from myriad.health.actions import ActionMap, Finding, load_action_map
from myriad.health.remedy import (
    HOOK_FORMAT,
    LOG_FORMAT,
    ActionRecord,
    NodeState,
    decide,
    hook_payload,
    log_document,
    read_log,
)
from myriad.spec.health import Remediation
from remedy_states import NOW, drained

XID79 = Finding("gpu.xid", 79)  # RESTART_BM: reboot
XID95 = Finding("gpu.xid", 95)  # RESET_GPU
RESET = Finding("gpu.recovery-action", "Reset")
LINK_DOWN = Finding("hca.state")  # needs hardware


@pytest.fixture(scope="module")
def amap() -> ActionMap:
    return load_action_map()


def policy(**kw: object) -> Remediation:
    return Remediation.model_validate(kw)


def record(node: str, action: str, result: str = "succeeded", ago: float = 3600) -> ActionRecord:
    return ActionRecord(node, action, "earlier", NOW - ago, "myriad-remedy", result)  # type: ignore[arg-type]


# --- the action, and when it is safe -----------------------------------------------------


def test_xid_79_on_a_drained_idle_node_reboots_through_slurm(amap: ActionMap) -> None:
    plan = decide([drained("gpu01", XID79)], [], policy(), amap, NOW)
    (d,) = plan.decisions
    assert (d.node, d.action, d.status) == ("gpu01", "reboot", "act")
    assert d.how.startswith("scontrol reboot ASAP nextstate=RESUME reason='myriad-remedy: ")
    assert d.how.endswith(" gpu01")
    assert "gpu.xid:79" in d.reason and "bare-metal" in d.reason
    assert d.findings == ("gpu.xid:79",)


def test_gpu_reset_only_with_no_gpu_processes(amap: ActionMap) -> None:
    free = decide([drained("gpu01", RESET)], [], policy(), amap, NOW).decisions[0]
    assert (free.action, free.status) == ("reset-gpu", "act")
    assert "nvidia-smi -r" in free.how
    busy = decide([drained("gpu01", RESET, gpu_processes=2)], [], policy(), amap, NOW)
    assert (busy.decisions[0].status, busy.acting()) == ("wait", ())
    assert "GPU processes 2 running" in busy.decisions[0].reason
    unknown = decide([drained("gpu01", RESET, gpu_processes=None)], [], policy(), amap, NOW)
    assert unknown.decisions[0].status == "wait"


@pytest.mark.parametrize(
    "finding",
    [RESET, XID95, XID79, Finding("gpu.count"), Finding("node.unreachable")],
    ids=["reset", "xid95", "xid79", "gpu-count", "unreachable"],
)
@pytest.mark.parametrize("jobs", [1, 3, None], ids=["one-job", "three-jobs", "unknown"])
def test_never_acts_on_a_node_with_a_running_job(
    amap: ActionMap, finding: Finding, jobs: int | None
) -> None:
    reachable = finding.check != "node.unreachable"
    node = drained("gpu01", finding, running_jobs=jobs, reachable=reachable, since=NOW - 7200)
    plan = decide([node], [], policy(), amap, NOW)
    (d,) = plan.decisions
    assert d.action in ("reset-gpu", "reboot", "power-cycle")
    assert d.status == "wait" and plan.acting() == ()
    assert ("could not be read" if jobs is None else "job(s) still running") in d.reason
    # The same node, its jobs gone, is acted on.
    idle = decide(
        [drained("gpu01", finding, reachable=reachable, since=NOW - 7200)], [], policy(), amap, NOW
    )
    assert idle.decisions[0].status == "act"


def test_needs_hardware_keeps_the_node_drained_even_with_a_job(amap: ActionMap) -> None:
    """It changes nothing on the node, so it needs no idle node and uses no budget."""
    plan = decide([drained("gpu01", LINK_DOWN, running_jobs=2)], [], policy(), amap, NOW)
    (d,) = plan.decisions
    assert (d.action, d.status) == ("needs-hardware", "act")
    assert "keep gpu01 drained" in d.how and "run the hook" in d.how


def test_a_node_health_has_not_drained_is_left_alone(amap: ActionMap) -> None:
    warning = NodeState("gpu01", (Finding("time.sync"),))
    assert decide([warning], [], policy(), amap, NOW).decisions == ()
    theirs = drained("gpu02", XID79, drained_by="other")
    (d,) = decide([theirs], [], policy(), amap, NOW).decisions
    assert d.status == "held" and "someone else" in d.reason


def test_an_application_fault_asks_nothing(amap: ActionMap) -> None:
    (d,) = decide([drained("gpu01", Finding("gpu.xid", 13))], [], policy(), amap, NOW).decisions
    assert (d.action, d.status) == ("none", "wait")
    assert "resumes it when its checks pass" in d.reason


def test_the_worst_finding_decides(amap: ActionMap) -> None:
    node = drained("gpu01", RESET, XID79, Finding("disk.space"))
    (d,) = decide([node], [], policy(), amap, NOW).decisions
    assert d.action == "reboot"
    assert d.findings == ("gpu.recovery-action:Reset", "gpu.xid:79", "disk.space")


def test_unreachable_node_is_drained_then_power_cycled_after_the_grace(amap: ActionMap) -> None:
    gone = NodeState("gpu01", (), reachable=False, since=NOW - 30)
    (d,) = decide([gone], [], policy(), amap, NOW).decisions
    assert (d.action, d.status) == ("drain", "act")
    assert d.findings == ("node.unreachable",)
    early = drained("gpu01", reachable=False, since=NOW - 300)
    (d,) = decide([early], [], policy(power_cycle_grace_s=900), amap, NOW).decisions
    assert (d.action, d.status) == ("power-cycle", "wait")
    assert "300 s of the 900 s grace" in d.reason
    late = drained("gpu01", reachable=False, since=NOW - 901)
    (d,) = decide([late], [], policy(power_cycle_grace_s=900), amap, NOW).decisions
    assert (d.action, d.status) == ("power-cycle", "act")
    assert "Redfish" in d.how and "PowerCycle" in d.how


def test_an_unreachable_node_cannot_be_reset_so_it_is_power_cycled(amap: ActionMap) -> None:
    node = drained("gpu01", RESET, reachable=False, since=NOW - 3600)
    (d,) = decide([node], [], policy(), amap, NOW).decisions
    assert (d.action, d.status) == ("power-cycle", "act")


# --- the budget ----------------------------------------------------------------------------


def test_at_most_max_nodes_in_remediation_longest_failing_first(amap: ActionMap) -> None:
    nodes = [drained(f"gpu{i:02}", XID79, since=NOW - 100 * i) for i in range(1, 7)]
    plan = decide(nodes, [], policy(max_nodes=4, breaker_nodes=10), amap, NOW)
    acting = [d.node for d in plan.acting()]
    assert acting == ["gpu03", "gpu04", "gpu05", "gpu06"]  # failing longest
    waiting = [d for d in plan.decisions if d.status == "wait"]
    assert [d.node for d in waiting] == ["gpu01", "gpu02"]
    assert all("budget: 4 of 4 nodes in remediation" in d.reason for d in waiting)


def test_actions_under_way_use_the_budget(amap: ActionMap) -> None:
    nodes = [drained(f"gpu{i:02}", XID79) for i in range(1, 4)]
    history = [record("gpu09", "reboot", "started", ago=60), record("gpu08", "reboot", "succeeded")]
    plan = decide(nodes, history, policy(max_nodes=2, breaker_nodes=10), amap, NOW)
    assert plan.in_remediation == ("gpu09",)
    assert len(plan.acting()) == 1


def test_a_share_per_island(amap: ActionMap) -> None:
    # Islands of 20 and 18 healthy nodes (23 and 19 with the failing ones), 10 % each:
    # floor(2.3) = 2 and floor(1.9) = 1 nodes at once.
    healthy = [NodeState(f"n{i:02}", island=i // 20) for i in range(38)]
    failing = [drained(f"gpu{i}", XID79, island=0, since=NOW - i) for i in range(1, 4)]
    failing.append(drained("gpu9", XID79, island=1))
    plan = decide(healthy + failing, [], policy(max_island_share=0.1, breaker_nodes=10), amap, NOW)
    assert plan.island_budget == {0: 2, 1: 1}
    assert sorted(d.node for d in plan.acting()) == ["gpu2", "gpu3", "gpu9"]
    (late,) = [d for d in plan.decisions if d.status == "wait"]
    assert late.node == "gpu1" and "island 0 has 2 of 2 nodes" in late.reason


def test_a_small_island_still_gets_one_node(amap: ActionMap) -> None:
    nodes = [drained("gpu1", XID79, island=0), NodeState("gpu2", island=0)]
    plan = decide(nodes, [], policy(max_island_share=0.05), amap, NOW)
    assert plan.island_budget == {0: 1} and len(plan.acting()) == 1


# --- the breaker ---------------------------------------------------------------------------


def test_three_nodes_failing_together_trip_the_breaker(amap: ActionMap) -> None:
    nodes = [drained(f"gpu0{i}", XID79, since=NOW - 30) for i in range(1, 4)]
    nodes.append(NodeState("gpu04", running_jobs=2))
    plan = decide(nodes, [], policy(max_nodes=2, breaker_nodes=3), amap, NOW)
    assert plan.breaker.tripped and plan.breaker.failing == 3
    assert plan.acting() == ()
    assert all(
        d.status == "held" and d.reason.startswith("breaker: 3 nodes") for d in plan.decisions
    )
    assert "not fixed by resetting or rebooting" in plan.breaker.reason
    assert plan.for_node("gpu04") is None  # the running job is untouched


def test_failures_outside_the_window_do_not_count(amap: ActionMap) -> None:
    nodes = [drained(f"gpu0{i}", XID79, since=NOW - 3600) for i in range(1, 3)]
    nodes.append(drained("gpu03", XID79, since=NOW - 30))
    plan = decide(nodes, [], policy(max_nodes=2, breaker_nodes=3, breaker_window_s=900), amap, NOW)
    assert not plan.breaker.tripped and plan.breaker.failing == 1
    assert len(plan.acting()) == 2  # the budget, not the breaker, holds the third


def test_the_breaker_still_drains(amap: ActionMap) -> None:
    nodes = [drained(f"gpu0{i}", XID79) for i in range(1, 3)]
    nodes.append(NodeState("gpu03", reachable=False, since=NOW))
    plan = decide(nodes, [], policy(max_nodes=1, breaker_nodes=3), amap, NOW)
    assert plan.breaker.tripped
    assert [(d.node, d.action) for d in plan.acting()] == [("gpu03", "drain")]


# --- escalation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "reachable", "after"),
    [
        ("reset-gpu", True, "reboot"),
        ("reboot", True, "needs-hardware"),
        ("reset-gpu", False, "power-cycle"),
        ("reboot", False, "power-cycle"),
        ("power-cycle", False, "needs-hardware"),
    ],
)
def test_failing_again_within_the_window_climbs_the_ladder(
    amap: ActionMap, before: str, reachable: bool, after: str
) -> None:
    node = drained("gpu01", RESET, reachable=reachable, since=NOW - 3600)
    history = [record("gpu01", before, "succeeded", ago=1800)]
    (d,) = decide([node], history, policy(escalation_window_s=86_400), amap, NOW).decisions
    assert (d.action, d.status) == (after, "act")
    if reachable or before == "power-cycle":
        assert d.escalated_from == before
        assert "failed again within 86400 s of " + before in d.reason
    else:
        # An unreachable node is power-cycled whatever came before: its own action.
        assert d.escalated_from is None


def test_a_reset_that_failed_escalates_too(amap: ActionMap) -> None:
    history = [record("gpu01", "reset-gpu", "failed", ago=120)]
    (d,) = decide([drained("gpu01", RESET)], history, policy(), amap, NOW).decisions
    assert (d.action, d.escalated_from) == ("reboot", "reset-gpu")


def test_the_ladder_over_a_nodes_life(amap: ActionMap) -> None:
    """A node that keeps failing goes reset, reboot, needs hardware, and then waits."""
    history: list[ActionRecord] = []
    seen = []
    for step in range(4):
        now = NOW + step * 3600
        # needs-hardware drains the node with remediation's own reason, and it stays so.
        by = "myriad-remedy" if step == 3 else "myriad-health"
        (d,) = decide(
            [drained("gpu01", RESET, since=now - 60, drained_by=by)], history, policy(), amap, now
        ).decisions
        seen.append((d.action, d.status))
        if d.status == "act":
            history.append(
                ActionRecord("gpu01", d.action, d.reason, now, "myriad-remedy", "succeeded")
            )
    assert seen == [
        ("reset-gpu", "act"),
        ("reboot", "act"),
        ("needs-hardware", "act"),
        ("needs-hardware", "wait"),  # the hook fired once; no loop
    ]


def test_a_node_back_from_repair_that_fails_anew_is_sent_again(amap: ActionMap) -> None:
    """`myriad resume` returned it after its repair (only an acceptance run lifts
    remediation's drain); node health drained it again an hour later. The hook fired for the
    last repair, which is over: this failure is sent for repair anew, not left waiting."""
    history = [record("gpu01", "needs-hardware", "succeeded", ago=3 * 3600)]
    (d,) = decide([drained("gpu01", XID79)], history, policy(), amap, NOW).decisions
    assert (d.action, d.status, d.escalated_from) == ("needs-hardware", "act", "needs-hardware")
    assert "failed again within 86400 s of needs-hardware" in d.reason, d.reason
    # Still held with remediation's reason: the repair is still awaited, the hook not again.
    (held,) = decide(
        [drained("gpu01", XID79, drained_by="myriad-remedy")], history, policy(), amap, NOW
    ).decisions
    assert (held.action, held.status) == ("needs-hardware", "wait")


def test_outside_the_window_the_same_action_again(amap: ActionMap) -> None:
    history = [record("gpu01", "reset-gpu", "succeeded", ago=2 * 86_400)]
    (d,) = decide(
        [drained("gpu01", RESET)], history, policy(escalation_window_s=86_400), amap, NOW
    ).decisions
    assert (d.action, d.escalated_from) == ("reset-gpu", None)


def test_an_action_under_way_is_waited_for(amap: ActionMap) -> None:
    history = [record("gpu01", "reboot", "started", ago=120)]
    (d,) = decide([drained("gpu01", XID79)], history, policy(), amap, NOW).decisions
    assert (d.action, d.status) == ("reboot", "wait") and "under way" in d.reason


def test_a_dry_run_is_not_history(amap: ActionMap) -> None:
    history = [record("gpu01", "reset-gpu", "dry-run", ago=60)]
    (d,) = decide([drained("gpu01", RESET)], history, policy(), amap, NOW).decisions
    assert (d.action, d.escalated_from) == ("reset-gpu", None)


# --- racks and NVLink domains -------------------------------------------------------------


def test_half_a_rack_failing_drains_the_rack(amap: ActionMap) -> None:
    rack = [
        drained("gpu01", XID79, rack="r1"),
        drained("gpu02", RESET, rack="r1"),
        NodeState("gpu03", rack="r1", running_jobs=1),
        NodeState("gpu04", rack="r1"),
        drained("gpu05", XID79, rack="r2"),
        NodeState("gpu06", rack="r2"),
        NodeState("gpu07", rack="r2"),
    ]
    plan = decide(rack, [], policy(rack_share=0.5), amap, NOW)
    (fault,) = plan.racks
    assert (fault.rack, fault.failing, fault.size) == ("r1", ("gpu01", "gpu02"), 4)
    by_node = {d.node: (d.action, d.status) for d in plan.decisions}
    assert by_node == {
        "gpu01": ("none", "held"),
        "gpu02": ("none", "held"),
        "gpu03": ("drain", "act"),  # a drain lets the running job finish
        "gpu04": ("drain", "act"),
        "gpu05": ("reboot", "act"),  # one of three in r2: node by node
    }
    assert "2 of 4 nodes failing together" in plan.for_node("gpu04").reason  # type: ignore[union-attr]
    assert "state=DRAIN" in plan.for_node("gpu03").how  # type: ignore[union-attr]


def test_one_failing_node_is_not_a_rack_fault(amap: ActionMap) -> None:
    plan = decide(
        [drained("gpu01", XID79, rack="r1"), NodeState("gpu02", rack="r1")],
        [],
        policy(rack_share=0.5),
        amap,
        NOW,
    )
    assert plan.racks == () and plan.for_node("gpu01").action == "reboot"  # type: ignore[union-attr]


# --- records, the log, the hook ------------------------------------------------------------


def test_a_plan_becomes_records_and_a_dry_run_says_so(amap: ActionMap) -> None:
    nodes = [drained("gpu01", XID79), drained("gpu02", LINK_DOWN)]
    dry = decide(nodes, [], policy(), amap, NOW, dry_run=True)
    assert [(r.node, r.action, r.result, r.by) for r in dry.records()] == [
        ("gpu01", "reboot", "dry-run", "myriad-remedy"),
        ("gpu02", "needs-hardware", "dry-run", "myriad-remedy"),
    ]
    real = decide(nodes, [], policy(), amap, NOW).records(by="alice")
    assert {(r.result, r.by, r.when) for r in real} == {("started", "alice", NOW)}
    assert real[0].detail.startswith("scontrol reboot ASAP")
    document = json.loads(json.dumps(dry.to_dict()))
    assert document["dry_run"] is True and document["breaker"]["tripped"] is False
    assert [d["node"] for d in document["decisions"]] == ["gpu01", "gpu02"]


def test_the_log_round_trips_and_refuses_damage() -> None:
    records = [record("gpu01", "reboot"), record("gpu02", "needs-hardware", "started")]
    document = json.loads(json.dumps(log_document(records)))
    assert document["format"] == LOG_FORMAT
    assert read_log(document) == tuple(records)
    document["records"][1]["result"] = "maybe"
    document["records"][1]["action"] = "reimage"
    with pytest.raises(
        ValidateError, match=r"record 1: action 'reimage' is not one of .*result 'maybe'"
    ):
        read_log(document)
    with pytest.raises(ValidateError, match="format"):
        read_log({"format": "other", "records": []})


def test_the_hook_payload(amap: ActionMap) -> None:
    plan = decide([drained("gpu01", LINK_DOWN)], [], policy(), amap, NOW)
    history = [record("gpu01", "reboot"), record("gpu02", "reboot")]
    payload = json.loads(json.dumps(hook_payload("lab", plan.decisions[0], history, NOW)))
    assert payload["format"] == HOOK_FORMAT
    assert (payload["cluster"], payload["node"], payload["action"]) == (
        "lab",
        "gpu01",
        "needs-hardware",
    )
    assert payload["findings"] == ["hca.state"]
    assert "cable" in payload["reason"]
    assert [r["node"] for r in payload["history"]] == ["gpu01"]
    assert set(payload) == {
        "format",
        "cluster",
        "node",
        "action",
        "reason",
        "findings",
        "when",
        "by",
        "history",
    }


def test_a_drain_in_the_log_does_not_hide_the_reboot_before_it(amap: ActionMap) -> None:
    history = [record("gpu01", "reboot", ago=1800), record("gpu01", "drain", "succeeded", ago=600)]
    (d,) = decide([drained("gpu01", XID79)], history, policy(), amap, NOW).decisions
    assert (d.action, d.escalated_from) == ("needs-hardware", "reboot")


def test_a_drain_by_whom_is_unknown_is_not_ours(amap: ActionMap) -> None:
    (d,) = decide([drained("gpu01", XID79, drained_by=None)], [], policy(), amap, NOW).decisions
    assert d.status == "held" and "someone unknown" in d.reason


def test_needs_hardware_uses_no_budget(amap: ActionMap) -> None:
    history = [record("gpu09", "reboot", "started", ago=60)]
    nodes = [drained("gpu01", LINK_DOWN), drained("gpu02", XID79)]
    plan = decide(nodes, history, policy(max_nodes=1, breaker_nodes=5), amap, NOW)
    by_node = {d.node: (d.action, d.status) for d in plan.decisions}
    assert by_node == {"gpu01": ("needs-hardware", "act"), "gpu02": ("reboot", "wait")}
