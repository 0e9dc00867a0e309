"""Carrying out remediation's decisions (myriad.ops.remedy) with a recorded Slurm, recorded
node commands and a recorded BMC: what runs, what is checked again right before it, what the
action log keeps, and the hook (an executable, and a POST to an http.server on 127.0.0.1)."""

from __future__ import annotations

import http.server
import json
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fake_slurm import RecordedController
from myriad.errors import OpsError, ValidateError
from myriad.health.actions import Finding, load_action_map
from myriad.health.remedy import (
    HOOK_FORMAT,
    REASON_PREFIX,
    ActionRecord,
    NodeState,
    RemediationPlan,
    decide,
)
from myriad.health.report import HealthReport, NodeHealth
from myriad.ops import remedy as ops
from myriad.ops.slurm import Completed, Slurm, parse_sinfo, parse_squeue
from myriad.spec.health import Remediation
from remedy_states import NOW, drained

XID79 = Finding("gpu.xid", 79)  # the catalog: restart the bare-metal node
XID95 = Finding("gpu.xid", 95)  # the catalog: reset the GPU
LINK_DOWN = Finding("hca.state")  # needs hardware


class Nodes:
    """Each node's answers: GPU processes (pid lines), nvidia-smi -r's exit, reachable."""

    def __init__(self, apps: Mapping[str, str] | None = None, reset_rc: int = 0) -> None:
        self.apps = dict(apps or {})
        self.reset_rc = reset_rc
        self.down: set[str] = set()
        self.commands: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, node: str, argv: Sequence[str]) -> Completed:
        self.commands.append((node, tuple(argv)))
        if node in self.down:
            raise OpsError(f"could not reach {node}")
        if tuple(argv) == ops.GPU_APPS:
            return Completed(0, self.apps.get(node, ""), "")
        if tuple(argv) == ops.GPU_RESET:
            if self.reset_rc:
                return Completed(self.reset_rc, "", "GPU 00000000:44:00.0 is in use")
            return Completed(0, "All done.\n", "")
        return Completed(0, "", "")


class Bmc:
    def __init__(self) -> None:
        self.cycled: list[str] = []

    def __call__(self, node: str) -> str:
        self.cycled.append(node)
        return "ForceRestart"


def plan_for(
    *nodes: NodeState, history: Sequence[ActionRecord] = (), **policy: Any
) -> RemediationPlan:
    return decide(nodes, history, Remediation.model_validate(policy), load_action_map(), NOW)


def actuators(controller: RecordedController, nodes: Nodes, **kw: Any) -> ops.Actuators:
    return ops.Actuators(Slurm(["x"], controller), nodes, **kw)


def run(plan: RemediationPlan, act: ops.Actuators, root: Path) -> tuple[ops.Outcome, ...]:
    return ops.execute(plan, act, "lab", ops.load_history(root), root, clock=lambda: NOW + 1)


HEALTH = "myriad-health: gpu.xid failed"


# --- each action, and the check right before it -------------------------------------------


def test_xid_79_reboots_through_slurm_and_the_log_says_started(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu01|drained|{HEALTH}\n")
    plan = plan_for(drained("gpu01", XID79))
    (outcome,) = run(plan, actuators(controller, Nodes()), tmp_path)
    reason = "myriad-remedy: gpu.xid:79: the catalog says restart the bare-metal node"
    assert controller.changes() == [
        ("scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}", "gpu01")
    ]
    # The same command the dry run shows.
    assert plan.decisions[0].how == f"scontrol reboot ASAP nextstate=RESUME reason='{reason}' gpu01"
    (kept,) = ops.load_history(tmp_path)
    assert outcome.record == kept
    assert (kept.node, kept.action, kept.result, kept.by, kept.when) == (
        "gpu01", "reboot", "started", "myriad-remedy", NOW + 1
    )  # fmt: skip


def test_a_job_placed_since_the_decision_stops_the_reboot(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu01|mixed+drain|{HEALTH}\n", squeue="41|gpu01|bob|train\n")
    (outcome,) = run(plan_for(drained("gpu01", XID79)), actuators(controller, Nodes()), tmp_path)
    assert outcome.status == "skipped" and "job 41 now runs on gpu01" in outcome.note
    assert controller.changes() == [] and ops.load_history(tmp_path) == ()


def test_a_node_resumed_since_the_decision_is_left_alone(tmp_path: Path) -> None:
    controller = RecordedController("gpu01|idle|none\n")
    (outcome,) = run(plan_for(drained("gpu01", XID79)), actuators(controller, Nodes()), tmp_path)
    assert outcome.status == "skipped" and "no longer holds gpu01 drained" in outcome.note
    assert controller.changes() == []


def test_gpu_reset_runs_only_with_no_gpu_process(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu01|drained|{HEALTH}\n")
    plan = plan_for(drained("gpu01", XID95))
    assert plan.decisions[0].action == "reset-gpu"
    # A process appeared on the GPUs after the decision: no reset, nothing recorded.
    busy = Nodes({"gpu01": "4711\n"})
    (outcome,) = run(plan, actuators(controller, busy), tmp_path)
    assert outcome.status == "skipped" and "GPU processes 1 running" in outcome.note
    assert ("gpu01", ops.GPU_RESET) not in busy.commands
    # None: the reset runs, on that node, and succeeds.
    idle = Nodes()
    (outcome,) = run(plan, actuators(controller, idle), tmp_path)
    assert idle.commands[-1] == ("gpu01", ("nvidia-smi", "-r"))
    assert outcome.record is not None and outcome.record.result == "succeeded"
    assert outcome.record.detail == "nvidia-smi -r: All done."


def test_a_failed_gpu_reset_is_recorded_and_escalates_next_time(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu01|drained|{HEALTH}\n")
    (outcome,) = run(
        plan_for(drained("gpu01", XID95)), actuators(controller, Nodes(reset_rc=3)), tmp_path
    )
    assert outcome.record is not None and outcome.record.result == "failed"
    assert "exit 3: GPU 00000000:44:00.0 is in use" in outcome.record.detail
    later = plan_for(drained("gpu01", XID95), history=ops.load_history(tmp_path))
    assert (later.decisions[0].action, later.decisions[0].escalated_from) == ("reboot", "reset-gpu")


def test_power_cycle_only_while_the_node_still_does_not_answer(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu02|down+drain|{REASON_PREFIX}unreachable\n")
    state = drained("gpu02", reachable=False, drained_by="myriad-remedy", since=NOW - 1000)
    plan = plan_for(state)
    assert plan.decisions[0].action == "power-cycle"
    bmc = Bmc()
    # It answers again: no power cut.
    (outcome,) = run(plan, actuators(controller, Nodes(), power_cycle=bmc), tmp_path)
    assert outcome.status == "skipped" and "answers again" in outcome.note and bmc.cycled == []
    nodes = Nodes()
    nodes.down.add("gpu02")
    (outcome,) = run(plan, actuators(controller, nodes, power_cycle=bmc), tmp_path)
    assert bmc.cycled == ["gpu02"]
    assert outcome.record is not None
    assert (outcome.record.result, outcome.record.detail) == (
        "started",
        "Redfish ResetType ForceRestart",
    )


def test_power_cycle_without_a_bmc_client_is_a_failed_action(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu02|down+drain|{REASON_PREFIX}unreachable\n")
    state = drained("gpu02", reachable=False, drained_by="myriad-remedy", since=NOW - 1000)
    (outcome,) = run(plan_for(state), actuators(controller, Nodes()), tmp_path)
    assert outcome.record is not None and outcome.record.result == "failed"
    assert "no BMC client" in outcome.record.detail


def test_an_unreachable_node_is_drained_first_with_remedys_reason(tmp_path: Path) -> None:
    controller = RecordedController("gpu02|idle*|none\n")
    plan = plan_for(NodeState("gpu02", reachable=False))
    (outcome,) = run(plan, actuators(controller, Nodes()), tmp_path)
    assert controller.changes() == [
        (
            "scontrol", "update", "NodeName=gpu02", "State=DRAIN",
            "Reason=myriad-remedy: unreachable: drained so that no job is placed on it",
        )
    ]  # fmt: skip
    assert outcome.record is not None and outcome.record.action == "drain"


def test_a_dry_run_runs_nothing_and_writes_nothing(tmp_path: Path) -> None:
    controller = RecordedController(f"gpu01|drained|{HEALTH}\n")
    plan = decide(
        [drained("gpu01", XID79)], [], Remediation(), load_action_map(), NOW, dry_run=True
    )
    (outcome,) = run(plan, actuators(controller, Nodes()), tmp_path)
    assert outcome.status == "dry-run" and outcome.record is not None
    assert outcome.record.result == "dry-run"
    assert controller.commands == [] and not (tmp_path / ops.LOG_FILE).exists()


# --- needs hardware: the hook --------------------------------------------------------------


def executable(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_needs_hardware_keeps_the_node_drained_and_the_hook_gets_the_payload(
    tmp_path: Path,
) -> None:
    got = tmp_path / "payload.json"
    hook = executable(tmp_path / "ticket", f"cat > {got}\n")
    controller = RecordedController(f"gpu03|drained|{HEALTH}\n")
    plan = plan_for(drained("gpu03", LINK_DOWN))
    act = actuators(controller, Nodes(), hook=ops.hook_runner(str(hook), 5))
    (outcome,) = run(plan, act, tmp_path / "state")
    assert controller.changes()[0][:4] == ("scontrol", "update", "NodeName=gpu03", "State=DRAIN")
    assert controller.changes()[0][4].startswith("Reason=myriad-remedy: hca.state: ")
    payload = json.loads(got.read_text())
    assert (payload["format"], payload["cluster"], payload["node"], payload["action"]) == (
        HOOK_FORMAT, "lab", "gpu03", "needs-hardware"
    )  # fmt: skip
    assert payload["findings"] == ["hca.state"] and payload["when"] == NOW + 1
    assert outcome.record is not None and outcome.record.result == "succeeded"
    assert outcome.record.detail == f"kept drained; hook: {hook}: exit 0"


def test_a_hook_that_fails_or_hangs_is_a_failed_action_named(tmp_path: Path) -> None:
    failing = ops.hook_runner(
        str(executable(tmp_path / "f", "echo 'no ticket system' >&2\nexit 4\n")), 5
    )
    with pytest.raises(OpsError, match=r"exit 4: no ticket system"):
        failing({"node": "gpu03"})
    hanging = ops.hook_runner(str(executable(tmp_path / "h", "exec sleep 30\n")), 1)
    with pytest.raises(OpsError, match=r"still running after 1 s"):
        hanging({"node": "gpu03"})
    controller = RecordedController(f"gpu03|drained|{HEALTH}\n")
    act = actuators(controller, Nodes(), hook=failing)
    (outcome,) = run(plan_for(drained("gpu03", LINK_DOWN)), act, tmp_path / "state")
    # Drained all the same; the failure is in the log for a person.
    assert controller.changes() and outcome.record is not None
    assert outcome.record.result == "failed" and "exit 4" in outcome.record.detail


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        _Receiver.received.append(
            (self.headers["Content-Type"], json.loads(self.rfile.read(length)))
        )
        self.send_response(_Receiver.status)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def webhook() -> Iterator[str]:
    _Receiver.received, _Receiver.status = [], 200
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tickets"
    finally:
        server.shutdown()
        server.server_close()


def test_the_webhook_receives_the_payload_as_a_json_post(webhook: str) -> None:
    hook = ops.hook_runner(webhook, 5)
    assert hook({"format": HOOK_FORMAT, "node": "gpu03"}) == f"POST {webhook}: HTTP 200"
    assert _Receiver.received == [("application/json", {"format": HOOK_FORMAT, "node": "gpu03"})]
    _Receiver.status = 503
    with pytest.raises(OpsError, match=r"hook POST .*/tickets: HTTP 503"):
        hook({"node": "gpu03"})
    # A token in the URL (as chat and ticket services hand them out) is never shown.
    secret = ops.hook_runner(webhook + "?token=s3cret", 5)
    _Receiver.status = 200
    assert secret({"node": "gpu03"}) == f"POST {webhook} (query hidden): HTTP 200"
    _Receiver.status = 500
    with pytest.raises(OpsError) as failed:
        secret({"node": "gpu03"})
    assert "s3cret" not in str(failed.value)
    # urllib sends no credentials from the URL; the failure does not show them either.
    with pytest.raises(OpsError) as failed:
        ops.hook_runner(webhook.replace("http://", "http://bot:pw@"), 5)({"node": "gpu03"})
    assert "bot" not in str(failed.value) and "pw@" not in str(failed.value)


# --- settling, the log, the metrics --------------------------------------------------------


def health(node: str, reachable: bool = True) -> NodeHealth:
    return NodeHealth(node, reachable, False, None, None, None, NOW, False)


def report(*rows: NodeHealth) -> HealthReport:
    return HealthReport("lab", NOW, 900, rows)


def started(node: str, action: str, ago: float) -> ActionRecord:
    return ActionRecord(node, action, "xid 79", NOW - ago, "myriad-remedy", "started")  # type: ignore[arg-type]


def test_a_reboot_is_finished_when_the_node_is_back_and_failed_when_it_never_is() -> None:
    history = [started("gpu01", "reboot", 300), started("gpu02", "power-cycle", 4000)]
    states = parse_sinfo("gpu01|idle|none\ngpu02|down+drain|myriad-remedy: unreachable\n")
    done = ops.settle(history, report(health("gpu01"), health("gpu02", False)), states, NOW)
    assert [(r.node, r.action, r.result) for r in done] == [
        ("gpu01", "reboot", "succeeded"),
        ("gpu02", "power-cycle", "failed"),
    ]
    assert done[1].detail == "not back after 4000 s (Slurm: down+drain)"
    # Still rebooting, and within the time: nothing yet.
    rebooting = parse_sinfo("gpu01|drained+reboot_issued|myriad-remedy: xid reboot issued\n")
    assert ops.settle(history[:1], report(health("gpu01")), rebooting, NOW) == ()


def test_the_log_appends_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    assert ops.load_history(tmp_path) == ()
    first, second = started("gpu01", "reboot", 60), started("gpu02", "reboot", 30)
    ops.append_history(tmp_path, [first])
    ops.append_history(tmp_path, [second])
    assert ops.load_history(tmp_path) == (first, second)
    assert (tmp_path / ops.LOG_FILE).stat().st_mode & 0o777 == 0o600
    (tmp_path / ops.LOG_FILE).write_text("{")
    with pytest.raises(OpsError, match="not JSON"):
        ops.load_history(tmp_path)
    (tmp_path / ops.LOG_FILE).write_text('{"format": "myriad.remediation.log/v1", "records": [{}]}')
    with pytest.raises(ValidateError, match="record 0"):
        ops.load_history(tmp_path)


def test_node_states_read_findings_drains_jobs_and_since() -> None:
    states = {
        "gpu01": {"failing": ["gpu.xid 79 held"], "xid_held": [{"xid": 79}]},
    }
    slurm = parse_sinfo(
        f"gpu01|drained|{HEALTH}\ngpu02|down+drain|myriad-remedy: unreachable\n"
        "gpu03|drained|myriad: drain by alice: DIMM\n"
    )
    history = [
        ActionRecord("gpu02", "drain", "unreachable", NOW - 500, "myriad-remedy", "succeeded")
    ]
    rows = report(health("gpu01"), health("gpu02", False), health("gpu03"))
    got = ops.node_states(
        rows, states, slurm, parse_squeue("9|gpu03|bob|eval\n"), {"gpu01": 0}, history,
        racks={"gpu01": "r0002"}, islands={"gpu01": 0},
    )  # fmt: skip
    by = {n.node: n for n in got}
    assert by["gpu01"].findings == (XID79,)
    assert (by["gpu01"].drained_by, by["gpu01"].gpu_processes, by["gpu01"].rack) == (
        "myriad-health", 0, "r0002"
    )  # fmt: skip
    # The power-cycle grace counts from remediation's drain of the unreachable node.
    assert (by["gpu02"].drained_by, by["gpu02"].since, by["gpu02"].reachable) == (
        "myriad-remedy", NOW - 500, False
    )  # fmt: skip
    assert (by["gpu03"].drained_by, by["gpu03"].running_jobs) == ("other", 1)


def test_metrics_count_actions_budget_breaker_and_hardware() -> None:
    log = [
        started("gpu01", "reboot", 60),
        ActionRecord("gpu01", "reboot", "x", NOW, "myriad-remedy", "succeeded"),
        ActionRecord("gpu05", "reboot", "x", NOW, "myriad-remedy", "dry-run"),
    ]
    many = [drained(f"gpu{i:02d}", XID79) for i in range(1, 4)]
    plan = plan_for(*many, drained("gpu09", LINK_DOWN), breaker_nodes=3, max_nodes=2)
    text = ops.metrics_text(log, plan, Remediation(max_nodes=2, breaker_nodes=3))
    lines = set(text.splitlines())
    assert 'myriad_remediation_actions_total{action="reboot",result="started"} 1' in lines
    assert 'myriad_remediation_actions_total{action="reboot",result="succeeded"} 1' in lines
    assert not any('result="dry-run"' in line for line in lines)  # a dry run did nothing
    assert "myriad_remediation_breaker_tripped 1" in lines
    assert "myriad_remediation_breaker_failing 4" in lines
    assert "myriad_remediation_budget_nodes 2" in lines
    assert "myriad_remediation_in_progress 0" in lines  # gpu01's reboot is done
    assert "myriad_remediation_in_progress 1" in ops.metrics_text(log[:1], plan, Remediation())
    # The breaker holds needs-hardware too: no node waits for repair yet.
    assert not any(line.startswith("myriad_remediation_needs_hardware{") for line in lines)
    quiet = plan_for(drained("gpu09", LINK_DOWN))
    assert (
        'myriad_remediation_needs_hardware{host="gpu09"} 1'
        in ops.metrics_text([], quiet, Remediation()).splitlines()
    )


def test_a_power_cycled_node_that_answers_and_passes_is_resumed() -> None:
    remedy_drain = f"{REASON_PREFIX}unreachable: drained so that no job is placed on it"
    history = [
        ActionRecord("gpu02", "drain", "unreachable", NOW - 2000, "myriad-remedy", "succeeded"),
        started("gpu02", "power-cycle", 1000),
    ]
    # slurmd registered again after the power cut: drained still (ReturnToService returns
    # only DOWN nodes), and it answers: the power cycle is done.
    slurm = parse_sinfo(f"gpu02|drained|{remedy_drain}\n")
    (done,) = ops.settle(history, report(health("gpu02")), slurm, NOW - 100)
    assert (done.action, done.result) == ("power-cycle", "succeeded")
    history.append(done)

    def row(last_run: float, failing: tuple[str, ...] = ()) -> HealthReport:
        return report(
            NodeHealth("gpu02", True, True, None, None, None, last_run, False, [*failing])
        )

    # Its own health run since the power cycle passes: resume it.
    assert ops.returning(history, row(NOW - 50), slurm) == ("gpu02",)
    # Not before its health has run since, nor while a check fails there.
    assert ops.returning(history, row(NOW - 200), slurm) == ()
    assert ops.returning(history, row(NOW - 50, ("gpu.xid 79",)), slurm) == ()
    # Someone else's drain, or a node sent for repair, is not remediation's to resume.
    other = parse_sinfo("gpu02|drained|myriad: drain by alice: DIMM\n")
    assert ops.returning(history, row(NOW - 50), other) == ()
    repair = ActionRecord("gpu02", "needs-hardware", "x", NOW - 80, "myriad-remedy", "succeeded")
    assert ops.returning([*history, repair], row(NOW - 50), slurm) == ()
