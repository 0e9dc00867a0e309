"""From a node's own health runner to a remediation decision: the real myriad-health run on a
stub node built from real captures (tests/health_node.py) writes its state file; the
controller reads the findings from it and decides."""

from __future__ import annotations

from health_node import Node
from myriad.health.actions import Finding, load_action_map
from myriad.health.remedy import NodeState, decide, findings_from_state
from myriad.spec.health import Remediation

OFF_THE_BUS = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"
APP_FAULT = "NVRM: Xid (PCI:0000:44:00): 13, Graphics SM Warp Exception"


def test_a_held_xid_79_becomes_a_reboot(node: Node) -> None:
    node.log(APP_FAULT, OFF_THE_BUS)
    assert node.run()[0] == 1
    state = node.state()
    findings = findings_from_state(state)
    assert findings == (Finding("gpu.xid", 79),)  # the application fault is not one
    since = state["slurm"]["since"]
    plan = decide(
        [NodeState("node02", findings, drained=True, drained_by="myriad-health", since=since)],
        [],
        Remediation(),
        load_action_map(),
        since + 60,
    )
    (d,) = plan.decisions
    assert (d.action, d.status) == ("reboot", "act")
    assert d.how == (
        "scontrol reboot ASAP nextstate=RESUME reason='myriad-remedy: gpu.xid:79: the catalog "
        "says restart the bare-metal node' node02"
    )


def test_a_flapping_link_and_a_missing_gpu(node: Node) -> None:
    node.counter("mlx5_0", "link_downed", 4)
    assert node.run()[0] == 0
    node.counter("mlx5_0", "link_downed", 5)
    node.gpus(7)
    assert node.run()[0] == 1
    assert findings_from_state(node.state()) == (
        Finding("gpu.count"),
        Finding("hca.counter-growth"),
    )


def test_a_healthy_node_has_no_findings(node: Node) -> None:
    assert node.run()[0] == 0
    assert findings_from_state(node.state()) == ()


def test_recovery_action_values_from_the_checks_actual() -> None:
    state = {
        "failing": [
            "gpu.recovery-action expected None, found GPU 0: Reset, GPU 3: Drain and Reset"
        ],
        "results": [
            {
                "check": "gpu.recovery-action",
                "status": "fail",
                "actual": "GPU 0: Reset, GPU 3: Drain and Reset, "
                "GPU 5: no recovery action reported",
            }
        ],
    }
    assert findings_from_state(state) == (
        Finding("gpu.recovery-action", "Reset"),
        Finding("gpu.recovery-action", "Drain and Reset"),
    )
    # A failing gpu.xid whose held XIDs are not in the state keeps no detail.
    assert findings_from_state({"failing": ["gpu.xid expected ..."]}) == (Finding("gpu.xid"),)
