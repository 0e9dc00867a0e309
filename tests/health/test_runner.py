"""myriad-health on a node (tests/health/conftest.py): it drains its own node with its own
reason, resumes only what it drained and only when every draining check passes, never
touches an administrator's drain, holds a flapping node, judges each XID once, drains on
growing counters, and writes its state and metrics whatever it finds."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any

from health_node import SRC, Node
from health_stubs import fabric_xml

OFF_THE_BUS = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"
APP_FAULT = (
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, "
    "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
)
GPU_REASON = "myriad-health: gpu.count expected 8, found 7"


def test_a_missing_gpu_drains_and_the_node_resumes_when_it_is_back(node: Node) -> None:
    assert node.run() == (0, "myriad-health: ok, 4 checks")
    assert node.calls == ["show node node02 -o"]

    node.gpus(7)
    assert node.run() == (1, GPU_REASON)
    assert node.slurm() == {"drain": True, "reason": GPU_REASON}
    assert node.calls[-1] == f"update NodeName=node02 State=DRAIN Reason={GPU_REASON}"
    state = node.state()
    assert state["slurm"]["drained_by"] == "myriad-health"
    assert state["failing"] == ["gpu.count expected 8, found 7"]
    since = state["slurm"]["since"]
    assert "myriad_health_node_drained 1" in node.metrics()

    # Still failing: no second update, the drain's start is kept.
    assert node.run() == (1, GPU_REASON)
    assert node.calls[-1] == "show node node02 -o"
    assert node.state()["slurm"]["since"] == since

    node.gpus(8)
    assert node.run() == (0, "myriad-health: ok, 4 checks")
    assert node.calls[-1] == "update NodeName=node02 State=RESUME"
    assert node.slurm() == {"drain": False, "reason": None}
    assert node.state()["slurm"]["action"] == "resume"
    assert "myriad_health_node_drained 0" in node.metrics()


def test_an_administrators_drain_is_never_touched(node: Node) -> None:
    node.set_slurm(True, "admin: replacing a fan")
    node.gpus(7)
    assert node.run() == (1, GPU_REASON)
    node.gpus(8)
    assert node.run() == (0, "myriad-health: ok, 4 checks")
    assert [c for c in node.calls if c.startswith("update")] == []
    assert node.slurm() == {"drain": True, "reason": "admin: replacing a fan"}
    assert node.state()["slurm"]["drained_by"] == "other"
    assert "myriad_health_node_drained 0" in node.metrics()


def test_an_xid_is_judged_once_and_application_faults_never_drain(node: Node) -> None:
    node.log(APP_FAULT)
    assert node.run() == (0, "myriad-health: ok, 4 checks")
    result = next(r for r in node.state()["results"] if r["check"] == "gpu.xid")
    assert result["actual"] == "recorded only: XID 13"

    node.log(OFF_THE_BUS)
    code, line = node.run()
    assert code == 1
    assert line == (
        "myriad-health: gpu.xid expected no draining XID (held until reboot); application "
        "XIDs recorded, found XID 79 on 0000:44:00 (GPU has fallen off the bus)"
    )
    assert node.slurm()["reason"] == line
    # Read once (the counter stays at 1), held until the node reboots (hold 0).
    assert node.run() == (1, line)
    metrics = node.metrics()
    assert 'myriad_health_xid_events_total{xid="79",action="drain"} 1' in metrics
    assert 'myriad_health_xid_events_total{xid="13",action="record"} 1' in metrics
    assert 'myriad_health_check_failed{check="gpu.xid",action="drain"} 1' in metrics


def test_a_held_xid_ends_with_its_hold(node: Node) -> None:
    node.policy(xid_hold_s=1)
    node.log(OFF_THE_BUS)
    assert node.run()[0] == 1
    time.sleep(1.2)
    assert node.run() == (0, "myriad-health: ok, 4 checks")
    assert node.slurm() == {"drain": False, "reason": None}


def test_a_growing_link_downed_counter_drains(node: Node) -> None:
    node.counter("mlx5_0", "link_downed", 4)
    # First reading: the baseline, whatever the counters say since boot.
    assert node.run()[0] == 0
    node.counter("mlx5_0", "link_downed", 5)
    code, line = node.run()
    assert (code, line) == (
        1,
        "myriad-health: hca.counter-growth expected growth per run at most link_downed +0, "
        "port_rcv_errors +10 on mlx5_0, mlx5_1, found mlx5_0 link_downed +1",
    )
    # No growth since: the link is quiet again and the node resumes.
    assert node.run()[0] == 0
    assert node.slurm()["drain"] is False
    # Receive errors within the spec's 10 per run do not drain; 11 more do.
    node.counter("mlx5_1", "port_rcv_errors", 10)
    assert node.run()[0] == 0
    node.counter("mlx5_1", "port_rcv_errors", 21)
    assert node.run()[1].endswith("found mlx5_1 port_rcv_errors +11")


def test_a_flapping_node_stays_drained_and_says_so(node: Node) -> None:
    node.policy(flap_limit=2)
    node.gpus(7)
    assert node.run()[0] == 1
    node.gpus(8)
    assert node.run()[0] == 0
    node.gpus(7)
    code, line = node.run()
    assert code == 1
    assert line == GPU_REASON
    flapping = "myriad-health: flapping: drained 2 times in 3600 s, stays drained; last: "
    assert node.slurm()["reason"] == flapping + "gpu.count expected 8, found 7"
    node.gpus(8)
    assert node.run()[0] == 0
    assert node.slurm()["drain"] is True
    assert node.state()["slurm"]["action"] == "held: flapping"


def test_an_unreadable_kernel_log_is_unknown_and_holds_a_drained_node(node: Node) -> None:
    node.gpus(7)
    assert node.run()[0] == 1
    node.gpus(8)
    node.policy(kernel_log=str(node.root / "no-such-log"))
    code, _ = node.run()
    # Not judged is not healthy: no drain for it, but no resume either.
    assert code == 0
    assert node.slurm()["drain"] is True
    state = node.state()
    assert state["unknown"] == ["gpu.xid"]
    assert state["slurm"]["action"] == "held: gpu.xid unknown"
    assert 'myriad_health_check_unknown{check="gpu.xid"} 1' in node.metrics()
    assert 'check="gpu.xid"' not in "".join(
        line
        for line in node.metrics().splitlines()
        if line.startswith("myriad_health_check_failed")
    )


def test_the_metrics_contract(node: Node) -> None:
    node.log(OFF_THE_BUS)
    node.run()
    metrics = node.metrics()
    names = set(re.findall(r"^(myriad_health_\w+)", metrics, re.M))
    assert names == {
        "myriad_health_check_failed",
        "myriad_health_check_unknown",
        "myriad_health_last_run_timestamp_seconds",
        "myriad_health_run_duration_seconds",
        "myriad_health_node_drained",
        "myriad_health_xid_events_total",
    }
    assert "# TYPE myriad_health_xid_events_total counter" in metrics
    assert 'myriad_health_check_failed{check="disk.space",action="warn"} 0' in metrics
    assert 'myriad_health_check_failed{check="gpu.count",action="drain"} 0' in metrics
    stamp = float(re.search(r"^myriad_health_last_run_timestamp_seconds (\S+)$", metrics, re.M)[1])  # type: ignore[index]
    assert abs(stamp - time.time()) < 60


def test_a_document_that_cannot_be_read_is_exit_2(node: Node) -> None:
    node.config.write_text('{"schema": 7}')
    assert node.run() == (
        2,
        f"myriad-health: cannot judge: {node.config}: not a myriad-health document of schema 1",
    )


def test_the_runner_needs_only_the_standard_library(node: Node, tmp_path_factory: Any) -> None:
    """What the node imports, run as the node runs it (python -I -S, src alone on the path)."""
    listing = tmp_path_factory.mktemp("modules") / "modules.json"
    boot = (
        "import atexit, json, sys; sys.path.insert(0, sys.argv.pop(1)); "
        f"out = open({str(listing)!r}, 'w'); "
        "atexit.register(lambda: out.write(json.dumps(sorted(sys.modules))) and out.close()); "
        "from myriad.node.health import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", boot, str(SRC), "--config", str(node.config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": f"{node.root / 'bin'}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    modules = json.loads(listing.read_text())
    top = {name.split(".")[0] for name in modules}
    assert top - set(sys.stdlib_module_names) - {"myriad", "__main__"} == set()
    mine = {name for name in modules if name.startswith("myriad.")}
    assert all(name == "myriad.node" or name.startswith("myriad.node.") for name in mine), sorted(
        mine
    )
    assert "myriad.node.health" in mine and "myriad.node.checks.xid" in mine
    # The controller's halves never load on the node.
    assert {
        "myriad.health.render",
        "myriad.health.report",
        "myriad.validate.expectations",
    }.isdisjoint(mine)


def test_checks_of_the_orchestrators_view_do_not_apply_on_the_node(node: Node) -> None:
    document = json.loads(node.config.read_text())
    document["node"]["expectations"].append(
        {
            "check": "slurm.node-state",
            "expected": ["IDLE", "ALLOCATED", "MIXED", "COMPLETING"],
            "spec_field": "pools",
            "fix": "",
            "applies": True,
            "reason": "",
        }
    )
    node.config.write_text(json.dumps(document))
    assert node.run() == (0, "myriad-health: ok, 4 checks")
    assert node.state()["unknown"] == []
    assert 'check="slurm.node-state"' not in node.metrics()


def test_a_tray_whose_gpus_disagree_on_their_nvlink_domain_drains_with_the_reason(
    node: Node,
) -> None:
    # A GB200 tray: the gpu.fabric-state expectation `myriad validate` derives for an NVL72
    # compute tray, draining; its GPUs' fabric sections as nvidia-smi -q -x prints them.
    document = json.loads(node.config.read_text())
    document["node"]["expectations"].append(
        {
            "check": "gpu.fabric-state",
            "expected": {"domain": True},
            "spec_field": "profiles.h100.gpu.model",
            "fix": "",
            "applies": True,
            "reason": "",
        }
    )
    document["policy"]["drain"].append("gpu.fabric-state")
    node.config.write_text(json.dumps(document))
    xml = node.root / "nvidia-smi.xml"
    xml.write_text(fabric_xml(8))
    assert node.run() == (0, "myriad-health: ok, 5 checks")

    xml.write_text(fabric_xml(8, {5: 4027}))
    code, line = node.run()
    assert code == 1
    assert line.startswith(
        "myriad-health: gpu.fabric-state expected every GPU Completed, Success, in one NVLink "
        "domain"
    )
    assert "GPUs disagree on their NVLink domain: GPU 0,1,2,3,4,6,7 clique 4026" in line
    assert node.slurm()["drain"] is True
    assert node.slurm()["reason"] == line

    xml.write_text(fabric_xml(8))
    assert node.run() == (0, "myriad-health: ok, 5 checks")
    assert node.slurm() == {"drain": False, "reason": None}
