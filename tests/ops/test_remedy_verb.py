"""`myriad remedy` and `myriad health` end to end on the local example's spec with
health.remediation on: the gathering is replaced by node02's state file with XID 79 held
(as the health runner writes it), Slurm, the nodes and the BMC by recorded fakes. Two passes:
the first reboots node02 through Slurm, the second sees it back and records the reboot done;
`myriad health` then shows both actions."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_remedy_exec import Nodes

from fake_slurm import RecordedController
from myriad.bringup.flow import cluster_state
from myriad.bringup.lock import hold_cluster_lock
from myriad.cli import main
from myriad.errors import ClusterBusy, OpsInputError
from myriad.health.report import HealthGathering, HealthReport, NodeHealth
from myriad.ops import remedy as ops
from myriad.ops.slurm import Slurm
from myriad.provision.resolve import resolve_cluster

from spec_builder import example_text

HEALTH = "myriad-health: gpu.xid failed"
XID_79_HELD = {
    "failing": ["gpu.xid XID 79 held"],
    "xid_held": [{"xid": 79, "pci": "0000:44:00.0"}],
}


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    text = example_text("local", without=("health",))
    text += "health: {remediation: {max_nodes: 1, breaker_nodes: 3}}\n"
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def node02_drained(spec: Path, monkeypatch: pytest.MonkeyPatch) -> RecordedController:
    """node02 drained by XID 79 for the whole test; Slurm a recorded fake, the nodes too."""
    controller = RecordedController(
        f"node01|idle|none\nnode02|drained|{HEALTH}\nnode03|idle|none\n"
    )
    act = ops.Actuators(Slurm(["x"], controller), Nodes())
    monkeypatch.setattr(ops, "default_actuators", lambda cluster, policy: act)
    monkeypatch.setattr(
        "myriad.health.report.gather_health",
        lambda path, **_: gathered(spec, True, 1_000_000.0),
    )
    return controller


def gathered(spec: Path, node02_drained: bool, now: float) -> HealthGathering:
    rows = tuple(
        NodeHealth(
            node,
            True,
            node02_drained and node == "node02",
            "myriad-health" if node02_drained and node == "node02" else None,
            "gpu.xid failed" if node02_drained and node == "node02" else None,
            now - 120 if node02_drained and node == "node02" else None,
            now,
            False,
        )
        for node in ("node01", "node02", "node03")
    )
    states: dict[str, Any] = {n.node: {} for n in rows}
    if node02_drained:
        states["node02"] = XID_79_HELD
    return HealthGathering(HealthReport("local", now, 900, rows), states, resolve_cluster(spec))


def test_two_passes_reboot_then_record_it_done(
    spec: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    controller = RecordedController(
        f"node01|idle|none\nnode02|drained|{HEALTH}\nnode03|idle|none\n"
    )
    nodes = Nodes()
    act = ops.Actuators(Slurm(["x"], controller), nodes)
    monkeypatch.setattr(ops, "default_actuators", lambda cluster, policy: act)
    drained = {"now": True}
    monkeypatch.setattr(
        "myriad.health.report.gather_health",
        lambda path, **_: gathered(spec, drained["now"], 1_000_000.0),
    )

    # A dry run says what it would do, and does nothing.
    assert main(["remedy", str(spec), "--dry-run", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (outcome,) = document["outcomes"]
    assert (outcome["node"], outcome["action"], outcome["status"]) == (
        "node02", "reboot", "dry-run"
    )  # fmt: skip
    assert [c for c in controller.commands if c[0] == "scontrol"] == []
    state = Path(str(spec.parent / "state" / "local"))
    assert not (state / ops.LOG_FILE).exists()

    # The pass: node02 is rebooted through Slurm; the GPUs' processes were read first.
    assert main(["remedy", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "node02" in out and "reboot" in out and "started" in out
    assert [c[:4] for c in controller.commands if c[0] == "scontrol"] == [
        ("scontrol", "reboot", "ASAP", "nextstate=RESUME")
    ]
    assert ("node02", ops.GPU_APPS) in nodes.commands
    text = (state / ops.METRICS_FILE).read_text()
    assert "myriad_remediation_in_progress 1" in text  # node02's reboot
    # The same textfile on the controller, for its node exporter.
    (publish,) = [c for c in controller.commands if c[0] == "sh"]
    assert publish[4:] == (text, "/var/lib/prometheus/node-exporter/myriad_remediation.prom")

    # Slurm rebooted it and resumed it (nextstate=RESUME); its health runner passes.
    controller.sinfo = "node01|idle|none\nnode02|idle|none\nnode03|idle|none\n"
    drained["now"] = False
    assert main(["remedy", str(spec), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(r["node"], r["action"], r["result"]) for r in document["settled"]] == [
        ("node02", "reboot", "succeeded")
    ]
    assert document["outcomes"] == []
    log = ops.load_history(state)
    assert [(r.action, r.result) for r in log] == [("reboot", "started"), ("reboot", "succeeded")]
    metrics = (state / ops.METRICS_FILE).read_text()
    assert 'myriad_remediation_actions_total{action="reboot",result="succeeded"} 1' in metrics
    assert "myriad_remediation_in_progress 0" in metrics

    # `myriad health` shows the actions (its own gathering replaced the same way).
    monkeypatch.setattr(
        "myriad.health.report.health_report",
        lambda path, **_: gathered(spec, False, 1_000_100.0).report,
    )
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["health", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "Remediation actions" in out
    assert out.count("reboot") >= 2 and "succeeded" in out
    assert main(["health", str(spec), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [r["result"] for r in document["remediation_actions"]] == ["started", "succeeded"]


def test_with_monitoring_off_the_metrics_stay_in_the_state_folder(
    spec: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = example_text("local", without=("health", "monitoring"))
    spec.write_text(text + "health: {remediation: {}}\n")
    controller = RecordedController(
        f"node01|idle|none\nnode02|drained|{HEALTH}\nnode03|idle|none\n"
    )
    act = ops.Actuators(Slurm(["x"], controller), Nodes())
    monkeypatch.setattr(ops, "default_actuators", lambda cluster, policy: act)
    monkeypatch.setattr(
        "myriad.health.report.gather_health", lambda path, **_: gathered(spec, True, 1e6)
    )
    result = ops.remedy(spec)
    assert result.metrics.startswith("monitoring is off: metrics only in ")
    assert not any(c[0] == "sh" for c in controller.commands)
    assert Path(result.metrics.rsplit(" ", 1)[1]).is_file()


def test_remediation_off_is_named(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec.write_text(example_text("local"))
    monkeypatch.setattr(
        "myriad.health.report.gather_health", lambda path, **_: gathered(spec, True, 1e6)
    )
    with pytest.raises(OpsInputError, match=r"health\.remediation is not set"):
        ops.remedy(spec)


def test_a_rack_failing_together_exits_1_and_nothing_is_rebooted(
    spec: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    now = time.time()  # the pass's own clock: the breaker counts failures in its window
    rows = tuple(
        NodeHealth(n, True, True, "myriad-health", "gpu.xid failed", now - 60, now, False)
        for n in ("node01", "node02", "node03")
    )
    found = HealthGathering(
        HealthReport("local", now, 900, rows),
        {n.node: XID_79_HELD for n in rows},
        resolve_cluster(spec),
    )
    monkeypatch.setattr("myriad.health.report.gather_health", lambda path, **_: found)
    controller = RecordedController("".join(f"node0{i}|drained|{HEALTH}\n" for i in (1, 2, 3)))
    act = ops.Actuators(Slurm(["x"], controller), Nodes())
    monkeypatch.setattr(ops, "default_actuators", lambda cluster, policy: act)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["remedy", str(spec)]) == 1
    out = capsys.readouterr().out
    # The local example's three compute nodes share rack r0001: held as a rack fault, and
    # the breaker (breaker_nodes 3) trips as well.
    assert "rack r0001: 3 of 3 nodes failing together" in out
    assert "breaker tripped" in out and "3 nodes began failing" in out
    assert [c for c in controller.commands if c[0] == "scontrol"] == []


def test_a_pass_waits_for_no_one_while_another_run_holds_the_cluster(
    spec: Path, node02_drained: RecordedController
) -> None:
    """A roll, a bring-up or another remedy on the nodes: the pass is refused, naming the
    holder, before it reboots anything (two passes could each take the last place of the
    budget). A dry run only reads, and goes on."""
    controller = node02_drained
    state = cluster_state("local")
    with hold_cluster_lock(state, "roll"), pytest.raises(ClusterBusy, match="roll"):
        ops.remedy(spec)
    assert [c for c in controller.commands if c[0] == "scontrol"] == []
    assert not (state.root / ops.LOG_FILE).exists()
    with hold_cluster_lock(state, "roll"):
        (outcome,) = ops.remedy(spec, dry_run=True).outcomes
    assert (outcome.decision.node, outcome.status) == ("node02", "dry-run")
