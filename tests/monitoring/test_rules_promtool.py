"""Every alert rule, run by `promtool test rules` against synthetic series: it fires on the bad
node's series, stays quiet on the good node's, and its labels and annotations carry the node
and the expected value, worked out by hand here from the spec and the catalog.

The spec is starter-64 (8 x HGX H100, ConnectX-7 NDR InfiniBand, Slurm) with monitoring on,
`alert_for_seconds: 120` and health.remediation at its defaults (max_nodes 4, breaker_nodes 8,
breaker_window_s 900) and `health.hang_after_s: 300` (so MyriadJobHang fits the 10-minute
cases; its default 1800 s has its own test below). Hand-derived figures:
  - GPUs per node 8 (profiles.h100-node.gpu.count), H100-SXM5-80GB board power 700 W,
    18 NVLink links at 900 GB/s (catalog);
  - ConnectX-7: 400 Gb/s = 50,000,000,000 B/s per port; 8 ports mlx5_0..mlx5_7, rails 0..7;
  - cluster GPU power 64 x 700 W = 44.8 kW; + 10 % margin = 49,280 W;
  - racks: 25 kW / 10.2 kW per HGX H100 = 2 servers per rack (space: 42 U / 8 U = 5), so
    16 x 700 W = 11,200 W per rack; + 10 % = 12,320 W; the three head nodes fill rack r0001
    and gpu01-gpu02 are r0002, gpu03-gpu04 r0003;
  - 11 nodes in all (2 controllers, 1 login, 8 GPU nodes).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.render.monitoring import alert_rules
from myriad.spec import load_spec_text

from spec_builder import example_text, load_example

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
EXAMPLES = sorted(p.parent.name for p in (ROOT / "inventories").glob("*/cluster.yaml"))
BAD, GOOD = "gpu03", "gpu01"
ALL_DEVICES = ", ".join(f"mlx5_{i}" for i in range(8))


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: scripts/bootstrap installs it (apt prometheus)")
    return found


def promtool_test(tmp_path: Path, document: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` on `document`, written beside the rules in `tmp_path`."""
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return subprocess.run(
        [promtool(), "test", "rules", "tests.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def starter_rules(health: str = "{remediation: {}, hang_after_s: 300}") -> dict[str, Any]:
    text = example_text("starter-64", without=("monitoring", "health"))
    text += "monitoring: {enabled: true, alert_for_seconds: 120}\n"
    text += f"health: {health}\n"
    result = plan_loaded(load_spec_text(text, str(STARTER)))
    assert result.plan is not None
    return alert_rules(result.loaded.spec, result.loaded.catalog, result.plan)


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def gpu(node: str, index: int, **extra: str) -> dict[str, str]:
    return {"job": "dcgm", "node": node, "pool": "gpu", "gpu": str(index), **extra}


def port(node: str, device: int) -> dict[str, str]:
    return {
        "job": "node",
        "node": node,
        "pool": "gpu",
        "device": f"mlx5_{device}",
        "port": "1",
        "rail": str(device),
    }


def remedy(controller: str) -> dict[str, str]:
    return {"job": "node", "node": controller, "instance": f"{controller}:9100"}


# alert → (input series, the bad alert's labels (without alertname/severity), summary, expected)
CASES: dict[str, tuple[list[dict[str, str]], dict[str, str], str, str]] = {
    "MyriadNodeDown": (
        [
            series(
                "up",
                "1x15",
                job="node",
                instance="10.10.0.13:9100",
                node=GOOD,
                pool="gpu",
                role="compute",
            ),
            series(
                "up",
                "0x15",
                job="node",
                instance="10.10.0.15:9100",
                node=BAD,
                pool="gpu",
                role="compute",
            ),
        ],
        {
            "job": "node",
            "instance": "10.10.0.15:9100",
            "node": BAD,
            "pool": "gpu",
            "role": "compute",
        },
        "gpu03 is down: its node exporter at 10.10.0.15:9100 does not answer "
        "(pool gpu, role compute)",
        "every node of the spec answers (11 nodes)",
    ),
    "MyriadGpuExporterDown": (
        [
            series("up", "1x15", job="dcgm", node=GOOD, pool="gpu"),
            series("up", "0x15", job="dcgm", node=BAD, pool="gpu"),
        ],
        {"job": "dcgm", "node": BAD, "pool": "gpu"},
        "gpu03: the DCGM exporter does not answer; its GPUs are unseen",
        "DCGM exporter answering on every GPU node",
    ),
    "MyriadGpuMissing": (
        [series("DCGM_FI_DEV_GPU_TEMP", "40x15", **gpu(GOOD, i)) for i in range(8)]
        + [series("DCGM_FI_DEV_GPU_TEMP", "40x15", **gpu(BAD, i)) for i in range(7)],
        {"node": BAD, "pool": "gpu"},
        "gpu03: 7 GPUs visible, the profile has 8 (profiles.h100-node.gpu.count)",
        "8 x H100-SXM5-80GB per node of pool gpu",
    ),
    "MyriadGpuPowerHigh": (
        [
            series("DCGM_FI_DEV_POWER_USAGE", "690x15", **gpu(GOOD, 3)),
            series("DCGM_FI_DEV_POWER_USAGE", "750x15", **gpu(BAD, 3)),
        ],
        gpu(BAD, 3),
        "gpu03 GPU 3 draws 750 W, above the H100-SXM5-80GB board power of 700 W (catalog)",
        "at most 700 W per H100-SXM5-80GB",
    ),
    "MyriadNvlinkDown": (
        [
            series(
                "myriad_health_check_failed",
                "0x15",
                check="gpu.nvlink",
                action="drain",
                node=GOOD,
                pool="gpu",
            ),
            series(
                "myriad_health_check_failed",
                "1x15",
                check="gpu.nvlink",
                action="drain",
                node=BAD,
                pool="gpu",
            ),
        ],
        {"check": "gpu.nvlink", "action": "drain", "node": BAD, "pool": "gpu"},
        "gpu03: NVLink down or below its rate (health check gpu.nvlink); expected 18 links per "
        "GPU at 900 GB/s",
        "18 NVLink links per H100-SXM5-80GB at 900 GB/s (catalog)",
    ),
    "MyriadGpuTemperatureHigh": (
        [
            series("DCGM_FI_DEV_GPU_TEMP", "80x15", **gpu(GOOD, 5)),
            series("DCGM_FI_DEV_GPU_TEMP", "91x15", **gpu(BAD, 5)),
        ],
        gpu(BAD, 5),
        "gpu03 GPU 5 at 91 C, above 85 C (monitoring.gpu_temperature_max_c)",
        "at most 85 C",
    ),
    "MyriadGpuXidReported": (
        [
            series("DCGM_FI_DEV_XID_ERRORS", "0x15", **gpu(GOOD, 2)),
            series("DCGM_FI_DEV_XID_ERRORS", "0x6 79x9", **gpu(BAD, 2)),
        ],
        gpu(BAD, 2),
        "gpu03 GPU 2 reported XID 79",
        "no XID errors",
    ),
    "MyriadGpuEccUncorrectable": (
        [
            series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x15", **gpu(GOOD, 1)),
            series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x7 1x8", **gpu(BAD, 1)),
        ],
        gpu(BAD, 1),
        "gpu03 GPU 1: uncorrectable ECC errors",
        "no uncorrectable (double-bit) ECC errors",
    ),
    "MyriadGpuRowRemapFailure": (
        [
            series("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x15", **gpu(GOOD, 4)),
            series("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x7 1x8", **gpu(BAD, 4)),
        ],
        gpu(BAD, 4),
        "gpu03 GPU 4: row remapping failed",
        "row remapping never fails",
    ),
    "MyriadGpuRowsRemapped": (
        [
            series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "2x15", **gpu(GOOD, 6)),
            series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "0x7 1x8", **gpu(BAD, 6)),
        ],
        gpu(BAD, 6),
        "gpu03 GPU 6: rows remapped after uncorrectable errors; a GPU reset applies the remap",
        "no new remapped rows",
    ),
    "MyriadNvlinkErrors": (
        [
            series("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "5x15", **gpu(GOOD, 7)),
            series("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "0x6 1+1x9", **gpu(BAD, 7)),
        ],
        gpu(BAD, 7),
        "gpu03 GPU 7: NVLink error counters grow",
        "NVLink CRC, replay and recovery counters flat",
    ),
    "MyriadFabricPortDown": (
        [
            series("node_infiniband_state_id", "4x15", **port(GOOD, 3)),
            series("node_infiniband_state_id", "1x15", **port(BAD, 3)),
        ],
        port(BAD, 3),
        "gpu03 mlx5_3 (rail 3) is not ACTIVE (state 1)",
        f"ACTIVE on all 8 compute ports ({ALL_DEVICES}) of pool gpu",
    ),
    "MyriadFabricPortSlow": (
        [
            series("node_infiniband_rate_bytes_per_second", "50000000000x15", **port(GOOD, 2)),
            series("node_infiniband_rate_bytes_per_second", "12500000000x15", **port(BAD, 2)),
        ],
        port(BAD, 2),
        "gpu03 mlx5_2 (rail 2) runs at 1.25e+10 B/s, below the planned 400 Gb/s "
        "(50000000000 B/s, ConnectX-7)",
        "400 Gb/s (50000000000 B/s) per port, ConnectX-7 (catalog)",
    ),
    "MyriadFabricLinkErrors": (
        [
            series("node_infiniband_link_downed_total", "3x15", **port(GOOD, 0)),
            series("node_infiniband_link_downed_total", "0x7 1x8", **port(BAD, 0)),
        ],
        port(BAD, 0),
        "gpu03 mlx5_0 (rail 0): link-down or receive-error counters grow",
        "link-down and receive-error counters flat",
    ),
    "MyriadNodeDrainedByHealth": (
        [
            series("myriad_health_node_drained", "0x15", node=GOOD),
            series("myriad_health_node_drained", "0x7 1x8", node=BAD),
        ],
        {"node": BAD},
        "gpu03 was drained by myriad-health",
        "no node drained by the health runner",
    ),
    "MyriadHealthCheckFailed": (
        [
            series("myriad_health_check_failed", "0x15", check="gpu.ecc", action="warn", node=GOOD),
            series("myriad_health_check_failed", "1x15", check="gpu.ecc", action="warn", node=BAD),
        ],
        {"check": "gpu.ecc", "action": "warn", "node": BAD},
        "gpu03: health check gpu.ecc fails (action warn)",
        "every health check passes",
    ),
    "MyriadHealthXidEvents": (
        [
            series("myriad_health_xid_events_total", "2x15", xid="79", action="drain", node=GOOD),
            series("myriad_health_xid_events_total", "0x7 1x8", xid="79", action="drain", node=BAD),
        ],
        {"xid": "79", "action": "drain", "node": BAD},
        "gpu03: XID 79 events (action drain)",
        "no XID events",
    ),
    "MyriadClusterPowerHigh": (
        # 8 nodes x 8 GPUs at 780 W = 49,920 W > 49,280 W.
        [
            series("DCGM_FI_DEV_POWER_USAGE", "780x15", **gpu(f"gpu0{n}", i))
            for n in range(1, 9)
            for i in range(8)
        ],
        {},
        "GPU power of the cluster at 49920 W, above the plan's 44.8 kW by more than 10% "
        "(monitoring.power_margin)",
        "at most 49280 W (plan GPU power 44.8 kW + 10%)",
    ),
    "MyriadRackPowerHigh": (
        # r0003 (gpu03, gpu04): 16 x 780 W = 12,480 W > 12,320 W; r0002: 16 x 700 W = 11,200.
        [
            series(
                "DCGM_FI_DEV_POWER_USAGE",
                f"{watts}x15",
                **gpu(node, i, profile="h100-node", rack=rack),
            )
            for node, rack, watts in (
                ("gpu01", "r0002", 700),
                ("gpu02", "r0002", 700),
                ("gpu03", "r0003", 780),
                ("gpu04", "r0003", 780),
            )
            for i in range(8)
        ],
        {"rack": "r0003"},
        "rack r0003: GPU power 12480 W, above the plan's 11200 W for 2 h100-node servers by "
        "more than 10%",
        "at most 12320 W per rack of 2 h100-node servers",
    ),
    "MyriadSlurmControllerDown": (
        [
            series("myriad_slurm_controller_up", "1x15", controller="ctl01", node="ctl01"),
            series("myriad_slurm_controller_up", "0x15", controller="ctl02", node="ctl01"),
        ],
        {"controller": "ctl02", "node": "ctl01"},
        "slurmctld on ctl02 does not answer `scontrol ping` (seen from ctl01)",
        "slurmctld up on every controller of the spec",
    ),
    # Job 4711 on gpu03: both its GPUs idle the whole 15 minutes (> 300 s); job 4712 on gpu01
    # has one GPU idle and one at 87 %, so the job still computes.
    "MyriadJobHang": (
        [
            series("DCGM_FI_DEV_GPU_UTIL", "0x15", **gpu(BAD, 0, hpc_job="4711")),
            series("DCGM_FI_DEV_GPU_UTIL", "0x15", **gpu(BAD, 1, hpc_job="4711")),
            series("DCGM_FI_DEV_GPU_UTIL", "0x15", **gpu(GOOD, 0, hpc_job="4712")),
            series("DCGM_FI_DEV_GPU_UTIL", "87x15", **gpu(GOOD, 1, hpc_job="4712")),
        ],
        {"hpc_job": "4711", "node": BAD},
        "Slurm job 4711 on gpu03: all its GPUs at 0 % utilisation for 300 s",
        "a running job's GPUs busy within 300 s (health.hang_after_s)",
    ),
    # myriad remedy's textfile, scraped from the controller (myriad.ops.remedy.metrics_text);
    # the good series come from another instance.
    "MyriadRemediationBreakerTripped": (
        [
            series("myriad_remediation_breaker_failing", "2x15", **remedy("ctl02")),
            series("myriad_remediation_breaker_tripped", "0x15", **remedy("ctl02")),
            series("myriad_remediation_breaker_failing", "3x7 9x8", **remedy("ctl01")),
            series("myriad_remediation_breaker_tripped", "0x7 1x8", **remedy("ctl01")),
        ],
        remedy("ctl01"),
        "automatic remediation stopped: 9 nodes began failing within 900 s",
        "fewer than 8 nodes failing together (health.remediation.breaker_nodes)",
    ),
    "MyriadRemediationBudgetExhausted": (
        [
            series("myriad_remediation_in_progress", "3x15", **remedy("ctl02")),
            series("myriad_remediation_in_progress", "0x5 4x10", **remedy("ctl01")),
        ],
        remedy("ctl01"),
        "remediation's budget is used: 4 nodes in remediation",
        "fewer than 4 nodes in remediation at once (health.remediation.max_nodes)",
    ),
    "MyriadNodeNeedsHardware": (
        [
            series("myriad_remediation_needs_hardware", "0x7 1x8", host=BAD, **remedy("ctl01")),
        ],
        {"host": BAD, **remedy("ctl01")},
        "gpu03 needs hardware: kept drained, the repair hook ran",
        "no node waiting for repair",
    ),
    "MyriadRemediationActionFailed": (
        [
            series(
                "myriad_remediation_actions_total",
                "5x15",
                action="reboot",
                result="succeeded",
                **remedy("ctl01"),
            ),
            series(
                "myriad_remediation_actions_total",
                "0x7 1x8",
                action="power-cycle",
                result="failed",
                **remedy("ctl01"),
            ),
        ],
        {"action": "power-cycle", "result": "failed", **remedy("ctl01")},
        "remediation's power-cycle failed in the last hour",
        "every remediation action succeeds",
    ),
}
# Quiet cases with no bad series at all: the cluster at its planned power.
QUIET: dict[str, list[dict[str, str]]] = {
    "MyriadClusterPowerHigh": [
        series("DCGM_FI_DEV_POWER_USAGE", "700x15", **gpu(f"gpu0{n}", i))
        for n in range(1, 9)
        for i in range(8)
    ],
}


def _rules_by_name(rules: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}


def test_every_alert_has_a_case() -> None:
    assert sorted(_rules_by_name(starter_rules())) == sorted(CASES)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_examples_alerts_are_among_the_cases(example: str) -> None:
    result = plan_loaded(load_example(example))
    assert result.plan is not None
    rules = alert_rules(result.loaded.spec, result.loaded.catalog, result.plan)
    assert set(_rules_by_name(rules)) <= set(CASES)


def test_every_rule_names_what_is_expected_and_a_runbook() -> None:
    for name, rule in _rules_by_name(starter_rules()).items():
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "expected", "runbook"}, name
        assert "README.md#monitoring" in annotations["runbook"], name
        assert rule["labels"]["severity"] in ("warning", "critical"), name


def test_promtool_fires_on_bad_series_and_stays_quiet_on_good(tmp_path: Path) -> None:
    rules = starter_rules()
    by_name = _rules_by_name(rules)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    tests: list[dict[str, Any]] = []
    for name, (inputs, labels, summary, expected) in CASES.items():
        rule = by_name[name]
        alert = {
            "exp_labels": {**labels, "severity": rule["labels"]["severity"]},
            "exp_annotations": {
                "summary": summary,
                "expected": expected,
                "runbook": rule["annotations"]["runbook"],
            },
        }
        # Before the condition held for `for:` (or before the bad sample), nothing fires.
        early = "1m" if rule["for"] != "0s" else "6m"
        tests.append(
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {"eval_time": early, "alertname": name, "exp_alerts": []},
                    {"eval_time": "10m", "alertname": name, "exp_alerts": [alert]},
                ],
            }
        )
    for name, inputs in QUIET.items():
        tests.append(
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [{"eval_time": "10m", "alertname": name, "exp_alerts": []}],
            }
        )
    document = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}
    done = promtool_test(tmp_path, document)
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-4000:]
    assert "SUCCESS" in done.stdout + done.stderr


def test_a_case_that_should_fail_does(tmp_path: Path) -> None:
    """The harness can fail: a good node's series never raises the alert."""
    rules = starter_rules()
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    inputs, labels, _, _ = CASES["MyriadGpuMissing"]
    good_only = [s for s in inputs if BAD not in s["series"]]
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": good_only,
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "MyriadGpuMissing",
                        "exp_alerts": [{"exp_labels": {**labels, "severity": "critical"}}],
                    }
                ],
            }
        ],
    }
    done = promtool_test(tmp_path, document)
    assert done.returncode != 0


def test_job_hang_waits_the_default_limit_and_only_for_idle_jobs(tmp_path: Path) -> None:
    """health.hang_after_s at its default, 1800 s = 30 one-minute samples. Job 4711 (gpu03)
    is idle from the start: pending at 29m, firing at 31m (idle 31 min > 30). Quiet throughout:
    job 4712 busy at 95 %; gpu02's GPU idle with no job (no hpc_job label); job 4713 on gpu04
    has its first sample at 21m (`_x20` is 21 gaps) and is idle since, so at 45m it has been
    idle 45 - 21 = 24 min < 30; job 4714 on gpu05 computed at 20m (`0x19` is 20 samples,
    t = 0..19, then 60 % at t = 20), so at 45m it has been idle 45 - 21 = 24 min, not 45."""
    rules = starter_rules("{}")
    rule = _rules_by_name(rules)["MyriadJobHang"]
    assert rule["for"] == "1800s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    inputs = [
        series("DCGM_FI_DEV_GPU_UTIL", "0x50", **gpu(BAD, 0, hpc_job="4711")),
        series("DCGM_FI_DEV_GPU_UTIL", "95x50", **gpu(GOOD, 0, hpc_job="4712")),
        series("DCGM_FI_DEV_GPU_UTIL", "0x50", **gpu("gpu02", 0)),
        series("DCGM_FI_DEV_GPU_UTIL", "_x20 0x30", **gpu("gpu04", 0, hpc_job="4713")),
        series("DCGM_FI_DEV_GPU_UTIL", "0x19 60 0x30", **gpu("gpu05", 0, hpc_job="4714")),
    ]
    fired = {
        "exp_labels": {"hpc_job": "4711", "node": BAD, "severity": "warning"},
        "exp_annotations": {
            "summary": "Slurm job 4711 on gpu03: all its GPUs at 0 % utilisation for 1800 s",
            "expected": "a running job's GPUs busy within 1800 s (health.hang_after_s)",
            "runbook": rule["annotations"]["runbook"],
        },
    }
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {"eval_time": "29m", "alertname": "MyriadJobHang", "exp_alerts": []},
                    {"eval_time": "31m", "alertname": "MyriadJobHang", "exp_alerts": [fired]},
                    {"eval_time": "45m", "alertname": "MyriadJobHang", "exp_alerts": [fired]},
                ],
            }
        ],
    }
    done = promtool_test(tmp_path, document)
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-4000:]


@pytest.mark.parametrize(
    "counter",
    [
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ],
)
def test_nvlink_errors_fire_on_replay_and_recovery_alone(tmp_path: Path, counter: str) -> None:
    """MyriadNvlinkErrors ORs three counters; CASES drives only the CRC one, so a typo in the
    replay or recovery name would pass it. Each here grows alone on gpu03 GPU 7 (0 for 6 min,
    then +1 a minute) while gpu01's stays flat at 5: only gpu03 fires."""
    rules = starter_rules()
    rule = _rules_by_name(rules)["MyriadNvlinkErrors"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    labels = gpu(BAD, 7)
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    series(counter, "5x15", **gpu(GOOD, 7)),
                    series(counter, "0x6 1+1x9", **labels),
                ],
                "alert_rule_test": [
                    {"eval_time": "6m", "alertname": "MyriadNvlinkErrors", "exp_alerts": []},
                    {
                        "eval_time": "10m",
                        "alertname": "MyriadNvlinkErrors",
                        "exp_alerts": [
                            {
                                "exp_labels": {**labels, "severity": rule["labels"]["severity"]},
                                "exp_annotations": {
                                    "summary": "gpu03 GPU 7: NVLink error counters grow",
                                    "expected": rule["annotations"]["expected"],
                                    "runbook": rule["annotations"]["runbook"],
                                },
                            }
                        ],
                    },
                ],
            }
        ],
    }
    done = promtool_test(tmp_path, document)
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-4000:]
