"""Spec + plan → what Prometheus, Alertmanager and Grafana are given: scrape targets, alert
rules with the spec's and the catalog's figures, and dashboards with the plan's.

Everything here is data (dicts), written as files into the inventory's `monitoring/` folder
(`monitoring_files`), which the monitoring role copies verbatim to the monitoring servers: the
rules' annotations hold Prometheus templates (`{{ $labels.node }}`) that Ansible must not
template. The folder mirrors /etc/prometheus (prometheus.yml with `rules/` and `targets/`
beside it), so `promtool check config` runs on it as rendered.

Targets are file-based service discovery (adding a node rewrites targets/*.json; Prometheus
rereads them without a restart) and carry the node's labels: node, pool, profile, role,
island (compute nodes), rack (the plan's placement: servers of one profile fill racks in
pool order, as `myriad plan` counts them), nvlink_domain (trays of a rack-scale system: the
domain's name is its Slurm topology/block name, `nvlNN`). A port's rail is a label of its
series: metric relabelling maps each pool's HCA and interface names to their rail.

Metric names are those of the exporters the role installs: node exporter (Debian's
prometheus-node-exporter, textfile collector in /var/lib/prometheus/node-exporter), NVIDIA's
DCGM exporter with the counters in roles/monitoring/files/dcgm-counters.csv, the Slurm
collector (roles/monitoring/files/myriad-slurm-metrics) and the health runner's textfile.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from myriad.plan.addresses import host_addresses
from myriad.plan.model import Plan
from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.plan.nvlink import rack_domain_members
from myriad.plan.ports import ports
from myriad.plan.power import server_kw, server_rack_units
from myriad.spec.catalog_models import Catalog
from myriad.spec.health import Remediation
from myriad.spec.models import Cluster

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
# Node exporter's textfile collector directory: Debian's default, and where the health runner
# and the Slurm collector write.
TEXTFILE_DIRECTORY = "/var/lib/prometheus/node-exporter"
# InfiniBand port state ACTIVE (node exporter's node_infiniband_state_id, IBTA PortState).
IB_PORT_ACTIVE = 4
# Counter windows: at least five minutes, and at least four scrapes.
MIN_WINDOW_S = 300
RUNBOOK = "docs: README.md#monitoring"


@dataclass(frozen=True, slots=True)
class Target:
    node: str
    address: str
    labels: Mapping[str, str]


def monitoring_servers(spec: Cluster) -> list[str]:
    """The hosts that run Prometheus and Alertmanager: the spec's, else the first controller."""
    if spec.monitoring.servers:
        return list(spec.monitoring.servers)
    controllers = spec.pools_with_role("controller")
    return [controllers[0].hostname(1)] if controllers else []


def prometheus_url(spec: Cluster) -> str | None:
    """Prometheus of the first monitoring server, on its management address."""
    if not spec.monitoring.enabled:
        return None
    servers = monitoring_servers(spec)
    addresses = _addresses(spec)
    return f"http://{addresses[servers[0]]}:{PROMETHEUS_PORT}" if servers else None


def _addresses(spec: Cluster, nodes: Sequence[NodeRecord] | None = None) -> dict[str, str]:
    nodes = list(iter_nodes(spec)) if nodes is None else nodes
    planned = host_addresses(spec.network.addressing.management, len(nodes), what="management")
    return {node.name: planned[i] for i, node in enumerate(nodes)}


def racks(spec: Cluster, catalog: Catalog, nodes: Sequence[NodeRecord]) -> dict[str, str]:
    """Node → rack, as the plan counts racks: per profile, in pool order, `fit` to a rack."""
    by_profile: dict[str, list[str]] = {}
    for node in nodes:
        by_profile.setdefault(node.profile, []).append(node.name)
    placement: dict[str, str] = {}
    rack = 0
    for profile_name, names in by_profile.items():
        fit = rack_fit(spec, catalog, profile_name)
        for start in range(0, len(names), fit):
            rack += 1
            for name in names[start : start + fit]:
                placement[name] = f"r{rack:04d}"
    return placement


def rack_fit(spec: Cluster, catalog: Catalog, profile_name: str) -> int:
    """Servers of a profile per rack: power and space, whichever fills first (at least one)."""
    profile = spec.profiles[profile_name]
    facility = spec.facility
    by_power = math.floor(facility.rack_kw / server_kw(profile, catalog) + 1e-9)
    by_space = math.floor(facility.rack_units / server_rack_units(profile, catalog) + 1e-9)
    return max(1, min(by_power, by_space))


def targets(
    spec: Cluster,
    catalog: Catalog,
    plan: Plan,
    nodes: Sequence[NodeRecord],
    addresses: Mapping[str, str],
) -> list[Target]:
    placement = racks(spec, catalog, nodes)
    domain_of = {
        name: domain
        for domain, names in rack_domain_members(plan.nvlink, nodes).items()
        for name in names
    }
    found = []
    for node in nodes:
        labels = {
            "node": node.name,
            "pool": node.pool,
            "profile": node.profile,
            "role": node.role,
            "rack": placement[node.name],
        }
        if node.island is not None:
            labels["island"] = str(node.island)
        if node.name in domain_of:
            labels["nvlink_domain"] = domain_of[node.name]
        found.append(Target(node.name, addresses[node.name], labels))
    return found


def _file_sd(found: Sequence[Target], port: int) -> list[dict[str, Any]]:
    return [{"targets": [f"{t.address}:{port}"], "labels": dict(t.labels)} for t in found]


def _gpu_pools(spec: Cluster) -> set[str]:
    return {pool.name for pool in spec.pools if spec.profiles[pool.profile].gpu is not None}


def _seconds(value: int) -> str:
    return f"{value}s"


def _window(spec: Cluster) -> str:
    return _seconds(max(MIN_WINDOW_S, 4 * spec.monitoring.scrape_interval_seconds))


def _rail_relabels(spec: Cluster, catalog: Catalog) -> list[dict[str, Any]]:
    """Each pool's compute ports, by HCA and by interface name → a `rail` label."""
    relabels = []
    for pool in spec.pools:
        for port in ports(spec.profiles[pool.profile], catalog, "compute", spec.network.fabric):
            relabels.append(
                {
                    "source_labels": ["pool", "device"],
                    "regex": f"{pool.name};({port.device}|{port.interface})",
                    "target_label": "rail",
                    "replacement": str(port.index),
                }
            )
    return relabels


def prometheus_config(spec: Cluster, catalog: Catalog, servers: Sequence[str]) -> dict[str, Any]:
    monitoring = spec.monitoring
    addresses = _addresses(spec)
    interval = monitoring.scrape_interval_seconds
    node_job: dict[str, Any] = {
        "job_name": "node",
        "file_sd_configs": [{"files": ["targets/node.json"]}],
    }
    relabels = _rail_relabels(spec, catalog)
    if relabels:
        node_job["metric_relabel_configs"] = relabels
    jobs: list[dict[str, Any]] = [node_job]
    if _gpu_pools(spec):
        jobs.append({"job_name": "dcgm", "file_sd_configs": [{"files": ["targets/dcgm.json"]}]})
    jobs.append(
        {
            "job_name": "prometheus",
            "static_configs": [{"targets": [f"{addresses[s]}:{PROMETHEUS_PORT}" for s in servers]}],
        }
    )
    alertmanagers = [f"{addresses[s]}:{ALERTMANAGER_PORT}" for s in servers]
    jobs.append({"job_name": "alertmanager", "static_configs": [{"targets": alertmanagers}]})
    return {
        "global": {
            "scrape_interval": _seconds(interval),
            # A paused or unreachable node must time out within its interval.
            "scrape_timeout": _seconds(max(1, min(10, interval - 1 if interval > 1 else 1))),
            "evaluation_interval": _seconds(monitoring.evaluation_interval_seconds),
            "external_labels": {"cluster": spec.metadata.name},
        },
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": alertmanagers}]}]},
        "rule_files": ["rules/*.yml"],
        "scrape_configs": jobs,
    }


def alertmanager_config(spec: Cluster) -> dict[str, Any]:
    """One route: every alert to the spec's webhooks (none: held in Alertmanager's API/UI)."""
    receiver: dict[str, Any] = {"name": "myriad"}
    if spec.monitoring.webhooks:
        receiver["webhook_configs"] = [
            {"url": url, "send_resolved": True} for url in spec.monitoring.webhooks
        ]
    return {
        "route": {
            "receiver": "myriad",
            "group_by": ["alertname", "node"],
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "4h",
        },
        "receivers": [receiver],
    }


def _rule(
    name: str,
    expr: str,
    *,
    hold: str,
    severity: str,
    summary: str,
    expected: str,
    runbook: str,
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": hold,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "expected": expected,
            "runbook": f"{runbook} ({RUNBOOK})",
        },
    }


def alert_rules(spec: Cluster, catalog: Catalog, plan: Plan) -> dict[str, Any]:
    """Rule groups for the spec: the node, GPU, fabric, health, power and Slurm alerts."""
    monitoring = spec.monitoring
    hold = _seconds(monitoring.alert_for_seconds)
    window = _window(spec)
    node_rules = [
        _rule(
            "MyriadNodeDown",
            'up{job="node"} == 0',
            hold=hold,
            severity="critical",
            summary="{{ $labels.node }} is down: its node exporter at {{ $labels.instance }} "
            "does not answer (pool {{ $labels.pool }}, role {{ $labels.role }})",
            expected=f"every node of the spec answers ({plan.nodes} nodes)",
            runbook="Reach the node's BMC or console; if it is gone, drain it in Slurm and "
            "replace it; `myriad status` lists the nodes",
        )
    ]
    groups: list[dict[str, Any]] = [{"name": "myriad-nodes", "rules": node_rules}]
    gpu_rules = _gpu_rules(spec, catalog, hold, window)
    if gpu_rules:
        groups.append({"name": "myriad-gpus", "rules": gpu_rules})
    fabric_rules = _fabric_rules(spec, catalog, hold, window)
    if fabric_rules:
        groups.append({"name": "myriad-fabric", "rules": fabric_rules})
    groups.append({"name": "myriad-health", "rules": _health_rules(hold)})
    if spec.health is not None and spec.software.orchestrator == "slurm" and _gpu_pools(spec):
        groups.append({"name": "myriad-jobs", "rules": _job_rules(spec.health.hang_after_s)})
    if spec.health is not None and spec.health.remediation is not None:
        remediation = _remediation_rules(spec.health.remediation, hold)
        groups.append({"name": "myriad-remediation", "rules": remediation})
    power_rules = _power_rules(spec, catalog, plan, hold)
    if power_rules:
        groups.append({"name": "myriad-power", "rules": power_rules})
    if spec.software.orchestrator == "slurm":
        groups.append({"name": "myriad-slurm", "rules": _slurm_rules(spec, hold)})
    return {"groups": groups}


def _gpu_rules(spec: Cluster, catalog: Catalog, hold: str, window: str) -> list[dict[str, Any]]:
    pools = [p for p in spec.pools if spec.profiles[p.profile].gpu is not None]
    if not pools:
        return []
    rules = [
        _rule(
            "MyriadGpuExporterDown",
            'up{job="dcgm"} == 0',
            hold=hold,
            severity="warning",
            summary="{{ $labels.node }}: the DCGM exporter does not answer; its GPUs are unseen",
            expected="DCGM exporter answering on every GPU node",
            runbook="systemctl status myriad-dcgm-exporter on the node; nvidia-smi",
        )
    ]
    for pool in pools:
        gpu = spec.profiles[pool.profile].gpu
        assert gpu is not None
        model = catalog.gpus[gpu.model]
        selector = f'job="dcgm",pool="{pool.name}"'
        rules.append(
            _rule(
                "MyriadGpuMissing",
                f"count by (node, pool) (DCGM_FI_DEV_GPU_TEMP{{{selector}}}) < {gpu.count}",
                hold=hold,
                severity="critical",
                summary="{{ $labels.node }}: {{ $value }} GPUs visible, the profile has "
                f"{gpu.count} (profiles.{pool.profile}.gpu.count)",
                expected=f"{gpu.count} x {gpu.model} per node of pool {pool.name}",
                runbook="nvidia-smi -L on the node; a GPU that fell off the bus needs a "
                "power cycle or an RMA; drain the node first",
            )
        )
        rules.append(
            _rule(
                "MyriadGpuPowerHigh",
                f"DCGM_FI_DEV_POWER_USAGE{{{selector}}} > {model.board_power_w}",
                hold=hold,
                severity="warning",
                summary="{{ $labels.node }} GPU {{ $labels.gpu }} draws {{ $value }} W, above "
                f"the {gpu.model} board power of {model.board_power_w} W (catalog)",
                expected=f"at most {model.board_power_w} W per {gpu.model}",
                runbook="nvidia-smi -q -d POWER; check the power limit and the PSUs",
            )
        )
        if model.nvlink_links:
            rules.append(
                _rule(
                    "MyriadNvlinkDown",
                    f'myriad_health_check_failed{{check="gpu.nvlink",pool="{pool.name}"}} == 1',
                    hold=hold,
                    severity="critical",
                    summary="{{ $labels.node }}: NVLink down or below its rate (health check "
                    f"gpu.nvlink); expected {model.nvlink_links} links per GPU at "
                    f"{model.nvlink_gbs:g} GB/s",
                    expected=f"{model.nvlink_links} NVLink links per {gpu.model} at "
                    f"{model.nvlink_gbs:g} GB/s (catalog)",
                    runbook="nvidia-smi nvlink -s on the node; drain and reseat or RMA",
                )
            )
    temperature = spec.monitoring.gpu_temperature_max_c
    rules += [
        _rule(
            "MyriadGpuTemperatureHigh",
            f'DCGM_FI_DEV_GPU_TEMP{{job="dcgm"}} > {temperature}',
            hold=hold,
            severity="warning",
            summary="{{ $labels.node }} GPU {{ $labels.gpu }} at {{ $value }} C, above "
            f"{temperature} C (monitoring.gpu_temperature_max_c)",
            expected=f"at most {temperature} C",
            runbook="Check the node's fans and the rack's inlet temperature",
        ),
        _rule(
            "MyriadGpuXidReported",
            'DCGM_FI_DEV_XID_ERRORS{job="dcgm"} != 0',
            hold="0s",
            severity="warning",
            summary="{{ $labels.node }} GPU {{ $labels.gpu }} reported XID {{ $value }}",
            expected="no XID errors",
            runbook="Look the XID up in NVIDIA's XID catalog; the health runner drains for "
            "the fatal ones",
        ),
        _rule(
            "MyriadGpuEccUncorrectable",
            f'increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{job="dcgm"}}[{window}]) > 0',
            hold="0s",
            severity="critical",
            summary="{{ $labels.node }} GPU {{ $labels.gpu }}: uncorrectable ECC errors",
            expected="no uncorrectable (double-bit) ECC errors",
            runbook="Drain the node; reset the GPU to remap the row, RMA if it repeats",
        ),
        _rule(
            "MyriadGpuRowRemapFailure",
            'DCGM_FI_DEV_ROW_REMAP_FAILURE{job="dcgm"} > 0',
            hold="0s",
            severity="critical",
            summary="{{ $labels.node }} GPU {{ $labels.gpu }}: row remapping failed",
            expected="row remapping never fails",
            runbook="Drain the node; the GPU needs an RMA",
        ),
        _rule(
            "MyriadGpuRowsRemapped",
            f'increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{job="dcgm"}}[{window}]) > 0',
            hold="0s",
            severity="warning",
            summary="{{ $labels.node }} GPU {{ $labels.gpu }}: rows remapped after "
            "uncorrectable errors; a GPU reset applies the remap",
            expected="no new remapped rows",
            runbook="Drain the node and reset the GPU (nvidia-smi -r) when it is idle",
        ),
        _rule(
            "MyriadNvlinkErrors",
            f'increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{job="dcgm"}}[{window}]) > 0'
            f' or increase(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{{job="dcgm"}}[{window}]) > 0'
            f' or increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{{job="dcgm"}}[{window}])'
            " > 0",
            hold="0s",
            severity="warning",
            summary="{{ $labels.node }} GPU {{ $labels.gpu }}: NVLink error counters grow",
            expected="NVLink CRC, replay and recovery counters flat",
            runbook="nvidia-smi nvlink -e on the node; reseat or RMA if they keep growing",
        ),
    ]
    return rules


def _fabric_rules(spec: Cluster, catalog: Catalog, hold: str, window: str) -> list[dict[str, Any]]:
    fabric = spec.network.fabric
    if fabric not in ("infiniband", "roce"):
        return []
    rules = []
    for pool in spec.pools:
        compute = ports(spec.profiles[pool.profile], catalog, "compute", fabric)
        if not compute:
            continue
        devices = "|".join(p.device for p in compute)
        selector = f'job="node",pool="{pool.name}",device=~"{devices}"'
        speed = compute[0].speed_gbps
        rate = speed * 1_000_000_000 // 8
        group = spec.profiles[pool.profile].nics.compute
        assert group is not None
        rules += [
            _rule(
                "MyriadFabricPortDown",
                f"node_infiniband_state_id{{{selector}}} != {IB_PORT_ACTIVE}",
                hold=hold,
                severity="critical",
                summary="{{ $labels.node }} {{ $labels.device }} (rail {{ $labels.rail }}) is "
                "not ACTIVE (state {{ $value }})",
                expected=f"ACTIVE on all {len(compute)} compute ports "
                f"({', '.join(p.device for p in compute)}) of pool {pool.name}",
                runbook="ibstat on the node; check the cable and the leaf switch port",
            ),
            _rule(
                "MyriadFabricPortSlow",
                f"node_infiniband_rate_bytes_per_second{{{selector}}} < {rate}",
                hold=hold,
                severity="warning",
                summary="{{ $labels.node }} {{ $labels.device }} (rail {{ $labels.rail }}) runs "
                f"at {{{{ $value }}}} B/s, below the planned {speed} Gb/s ({rate} B/s, "
                f"{group.model})",
                expected=f"{speed} Gb/s ({rate} B/s) per port, {group.model} (catalog)",
                runbook="ibstat shows the rate; a degraded link is a bad cable or transceiver",
            ),
            _rule(
                "MyriadFabricLinkErrors",
                f"increase(node_infiniband_link_downed_total{{{selector}}}[{window}]) > 0"
                f" or increase(node_infiniband_port_errors_received_total{{{selector}}}"
                f"[{window}]) > 0",
                hold="0s",
                severity="warning",
                summary="{{ $labels.node }} {{ $labels.device }} (rail {{ $labels.rail }}): "
                "link-down or receive-error counters grow",
                expected="link-down and receive-error counters flat",
                runbook="perfquery on the port; replace the cable if the counters keep growing",
            ),
        ]
    return rules


def _health_rules(hold: str) -> list[dict[str, Any]]:
    return [
        _rule(
            "MyriadNodeDrainedByHealth",
            "myriad_health_node_drained == 1",
            hold="0s",
            severity="warning",
            summary="{{ $labels.node }} was drained by myriad-health",
            expected="no node drained by the health runner",
            runbook="See the failing checks (myriad_health_check_failed); fix, then resume "
            "the node in Slurm",
        ),
        _rule(
            "MyriadHealthCheckFailed",
            "myriad_health_check_failed == 1",
            hold=hold,
            severity="warning",
            summary="{{ $labels.node }}: health check {{ $labels.check }} fails (action "
            "{{ $labels.action }})",
            expected="every health check passes",
            runbook="myriad validate --limit the node names the expected and actual values",
        ),
        _rule(
            "MyriadHealthXidEvents",
            "increase(myriad_health_xid_events_total[15m]) > 0",
            hold="0s",
            severity="warning",
            summary="{{ $labels.node }}: XID {{ $labels.xid }} events (action "
            "{{ $labels.action }})",
            expected="no XID events",
            runbook="Look the XID up in NVIDIA's XID catalog; drained nodes need a GPU reset",
        ),
    ]


def _job_rules(hang_after_s: int) -> list[dict[str, Any]]:
    """GPUs labelled with the Slurm job holding them: the slurm role's prolog writes the job
    into DCGM exporter's HPC job mapping directory, so the exporter adds `hpc_job`."""
    return [
        _rule(
            "MyriadJobHang",
            # `max by` a job's GPUs on a node: one busy GPU means the job still works; `for`
            # makes "idle" continuous, so a job that started idle less than the limit ago, or
            # that computed once within it, does not fire.
            'max by (hpc_job, node) (DCGM_FI_DEV_GPU_UTIL{job="dcgm", hpc_job!=""}) == 0',
            hold=_seconds(hang_after_s),
            severity="warning",
            summary="Slurm job {{ $labels.hpc_job }} on {{ $labels.node }}: all its GPUs at 0 % "
            f"utilisation for {hang_after_s} s",
            expected=f"a running job's GPUs busy within {hang_after_s} s (health.hang_after_s)",
            runbook="The job may be stuck in a collective or on I/O: `py-spy dump --pid` its "
            "ranks, rerun with NCCL_DEBUG=INFO, attach `cuda-gdb -p`; then `scancel` it, or "
            "`scontrol requeue` it to restart from its last checkpoint",
        )
    ]


def _remediation_rules(policy: Remediation, hold: str) -> list[dict[str, Any]]:
    """`myriad remedy`'s textfile on the controller (myriad.ops.remedy.metrics_text)."""
    return [
        _rule(
            "MyriadRemediationBreakerTripped",
            "myriad_remediation_breaker_failing and on (instance) "
            "(myriad_remediation_breaker_tripped == 1)",
            hold="0s",
            severity="critical",
            summary="automatic remediation stopped: {{ $value }} nodes began failing within "
            f"{policy.breaker_window_s} s",
            expected=f"fewer than {policy.breaker_nodes} nodes failing together "
            "(health.remediation.breaker_nodes)",
            runbook="Many nodes at once is a shared fault (a leaf switch, a PDU, a bad image), "
            "not one reboots fix: `myriad health` lists them; find what they share",
        ),
        _rule(
            "MyriadRemediationBudgetExhausted",
            f"myriad_remediation_in_progress >= {policy.max_nodes}",
            hold=hold,
            severity="warning",
            summary="remediation's budget is used: {{ $value }} nodes in remediation",
            expected=f"fewer than {policy.max_nodes} nodes in remediation at once "
            "(health.remediation.max_nodes)",
            runbook="Further failing nodes wait; `myriad remedy SPEC --dry-run` shows which, "
            "and the reboots under way that hold the budget",
        ),
        _rule(
            "MyriadNodeNeedsHardware",
            "myriad_remediation_needs_hardware == 1",
            hold="0s",
            severity="warning",
            summary="{{ $labels.host }} needs hardware: kept drained, the repair hook ran",
            expected="no node waiting for repair",
            runbook="Reset, reboot and power cycle did not keep it well (the action log in "
            "`myriad health`); after the repair, `myriad resume` tests it again",
        ),
        _rule(
            "MyriadRemediationActionFailed",
            'increase(myriad_remediation_actions_total{result="failed"}[1h]) > 0',
            hold="0s",
            severity="warning",
            summary="remediation's {{ $labels.action }} failed in the last hour",
            expected="every remediation action succeeds",
            runbook="The action log in `myriad health` names the node and why; its next "
            "failure escalates",
        ),
    ]


def _power_rules(spec: Cluster, catalog: Catalog, plan: Plan, hold: str) -> list[dict[str, Any]]:
    if plan.power.gpu_kw <= 0:
        return []
    margin = spec.monitoring.power_margin
    cluster_w = round(plan.power.gpu_kw * 1000 * (1 + margin))
    rules = [
        _rule(
            "MyriadClusterPowerHigh",
            f'sum(DCGM_FI_DEV_POWER_USAGE{{job="dcgm"}}) > {cluster_w}',
            hold=hold,
            severity="warning",
            summary=f"GPU power of the cluster at {{{{ $value }}}} W, above the plan's "
            f"{plan.power.gpu_kw:g} kW by more than {margin:.0%} (monitoring.power_margin)",
            expected=f"at most {cluster_w} W (plan GPU power {plan.power.gpu_kw:g} kW "
            f"+ {margin:.0%})",
            runbook="Compare `myriad plan` power with the facility's; cap GPU power "
            "(nvidia-smi -pl) if the feed is at risk",
        )
    ]
    for name, profile in spec.profiles.items():
        if profile.gpu is None or not any(p.profile == name for p in spec.pools):
            continue
        fit = rack_fit(spec, catalog, name)
        planned_w = fit * profile.gpu.count * catalog.gpus[profile.gpu.model].board_power_w
        limit = round(planned_w * (1 + margin))
        rules.append(
            _rule(
                "MyriadRackPowerHigh",
                f'sum by (rack) (DCGM_FI_DEV_POWER_USAGE{{job="dcgm",profile="{name}"}}) > {limit}',
                hold=hold,
                severity="warning",
                summary="rack {{ $labels.rack }}: GPU power {{ $value }} W, above the plan's "
                f"{planned_w} W for {fit} {name} servers by more than {margin:.0%}",
                expected=f"at most {limit} W per rack of {fit} {name} servers",
                runbook="Check the rack's PDUs; cap GPU power if the rack feed is at risk",
            )
        )
    return rules


def _slurm_rules(spec: Cluster, hold: str) -> list[dict[str, Any]]:
    return [
        _rule(
            "MyriadSlurmControllerDown",
            "myriad_slurm_controller_up == 0",
            hold=hold,
            severity="critical",
            summary="slurmctld on {{ $labels.controller }} does not answer `scontrol ping` "
            "(seen from {{ $labels.node }})",
            expected="slurmctld up on every controller of the spec",
            runbook="systemctl status slurmctld on the controller; its log names the cause",
        )
    ]


# --- dashboards ---------------------------------------------------------------------------


def _panel(
    panel_id: int,
    title: str,
    exprs: Sequence[tuple[str, str]],
    *,
    x: int,
    y: int,
    unit: str = "short",
    reference: tuple[str, float] | None = None,
    width: int = 12,
) -> dict[str, Any]:
    """A time series panel; `reference` draws a plan figure as a threshold line."""
    defaults: dict[str, Any] = {"unit": unit}
    if reference is not None:
        label, value = reference
        defaults["custom"] = {"thresholdsStyle": {"mode": "line"}}
        defaults["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": "green", "value": None}, {"color": "red", "value": value}],
        }
        defaults["displayName"] = "${__field.displayName}"
        title = f"{title} (plan: {label})"
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": width, "h": 8},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _dashboard(
    uid: str, title: str, panels: list[dict[str, Any]], node_var: bool
) -> dict[str, Any]:
    variables: list[dict[str, Any]] = [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}
    ]
    if node_var:
        variables.append(
            {
                "name": "node",
                "type": "query",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "query": 'label_values(up{job="node"}, node)',
                "refresh": 1,
            }
        )
    return {
        "uid": uid,
        "title": title,
        "tags": ["myriad"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": variables},
        "panels": panels,
    }


def dashboards(spec: Cluster, catalog: Catalog, plan: Plan) -> dict[str, dict[str, Any]]:
    name = spec.metadata.name
    overview = [
        _panel(
            1,
            "Nodes up",
            [('sum(up{job="node"})', "up")],
            x=0,
            y=0,
            reference=("nodes", float(plan.nodes)),
        ),
        _panel(
            2,
            "GPUs seen by DCGM",
            [('count(DCGM_FI_DEV_GPU_TEMP{job="dcgm"})', "GPUs")],
            x=12,
            y=0,
            reference=("GPUs", float(plan.gpus)),
        ),
        _panel(
            3,
            "GPU power, kW",
            [('sum(DCGM_FI_DEV_POWER_USAGE{job="dcgm"}) / 1000', "GPU kW")],
            x=0,
            y=8,
            unit="kwatt",
            reference=("GPU kW", round(plan.power.gpu_kw, 3)),
        ),
        _panel(
            4,
            "GPU utilisation, %",
            [('avg(DCGM_FI_DEV_GPU_UTIL{job="dcgm"})', "average")],
            x=12,
            y=8,
            unit="percent",
        ),
        _panel(
            5,
            "Slurm nodes by state",
            [("sum by (state) (myriad_slurm_nodes)", "{{state}}")],
            x=0,
            y=16,
        ),
        _panel(
            6,
            "Slurm jobs and GPUs allocated",
            [
                ("sum by (state) (myriad_slurm_jobs)", "jobs {{state}}"),
                ("sum(myriad_slurm_gpus_allocated)", "GPUs allocated"),
            ],
            x=12,
            y=16,
            reference=("GPUs", float(plan.gpus)),
        ),
        _panel(
            7,
            "Nodes drained by health",
            [("sum(myriad_health_node_drained)", "drained")],
            x=0,
            y=24,
        ),
        _panel(
            8,
            "Failing health checks",
            [("sum by (check) (myriad_health_check_failed)", "{{check}}")],
            x=12,
            y=24,
        ),
    ]
    gpu_temperature = float(spec.monitoring.gpu_temperature_max_c)
    board_power = max(
        (
            catalog.gpus[p.gpu.model].board_power_w
            for p in spec.profiles.values()
            if p.gpu is not None
        ),
        default=0,
    )
    node_gpu = [
        _panel(
            1,
            "GPU utilisation, %",
            [('DCGM_FI_DEV_GPU_UTIL{job="dcgm",node="$node"}', "GPU {{gpu}}")],
            x=0,
            y=0,
            unit="percent",
        ),
        _panel(
            2,
            "GPU temperature, C",
            [('DCGM_FI_DEV_GPU_TEMP{job="dcgm",node="$node"}', "GPU {{gpu}}")],
            x=12,
            y=0,
            unit="celsius",
            reference=("limit C", gpu_temperature),
        ),
        _panel(
            3,
            "GPU power, W",
            [('DCGM_FI_DEV_POWER_USAGE{job="dcgm",node="$node"}', "GPU {{gpu}}")],
            x=0,
            y=8,
            unit="watt",
            reference=("board W", float(board_power)),
        ),
        _panel(
            4,
            "GPU memory used, MiB",
            [('DCGM_FI_DEV_FB_USED{job="dcgm",node="$node"}', "GPU {{gpu}}")],
            x=12,
            y=8,
            unit="mbytes",
        ),
        _panel(
            5,
            "NVLink bandwidth counter rate",
            [
                (
                    'rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{job="dcgm",node="$node"}[5m])',
                    "GPU {{gpu}}",
                )
            ],
            x=0,
            y=16,
        ),
        _panel(
            6,
            "XID, ECC and remapped rows",
            [
                ('DCGM_FI_DEV_XID_ERRORS{job="dcgm",node="$node"}', "last XID GPU {{gpu}}"),
                (
                    'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{job="dcgm",node="$node"}',
                    "DBE GPU {{gpu}}",
                ),
                (
                    'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{job="dcgm",node="$node"}',
                    "remapped GPU {{gpu}}",
                ),
            ],
            x=12,
            y=16,
        ),
    ]
    fabric_panels = _fabric_panels(spec, catalog)
    return {
        "myriad-overview.json": _dashboard(
            f"myriad-overview-{name}"[:40], f"Myriad {name}: cluster overview", overview, False
        ),
        "myriad-node-gpu.json": _dashboard(
            f"myriad-node-gpu-{name}"[:40], f"Myriad {name}: GPUs of a node", node_gpu, True
        ),
        "myriad-fabric.json": _dashboard(
            f"myriad-fabric-{name}"[:40], f"Myriad {name}: fabric", fabric_panels, False
        ),
    }


def _fabric_panels(spec: Cluster, catalog: Catalog) -> list[dict[str, Any]]:
    speeds = [
        p.speed_gbps
        for pool in spec.pools
        for p in ports(spec.profiles[pool.profile], catalog, "compute", spec.network.fabric)
    ]
    planned = max(speeds, default=0) * 1_000_000_000 / 8
    received = 'rate(node_infiniband_port_data_received_bytes_total{job="node"}[5m])'
    sent = 'rate(node_infiniband_port_data_transmitted_bytes_total{job="node"}[5m])'
    return [
        _panel(
            1,
            "Received per rail, B/s",
            [(f"sum by (rail) ({received})", "rail {{rail}}")],
            x=0,
            y=0,
            unit="Bps",
        ),
        _panel(
            2,
            "Received per island, B/s",
            [(f"sum by (island) ({received})", "island {{island}}")],
            x=12,
            y=0,
            unit="Bps",
        ),
        _panel(
            3,
            "Sent per rail, B/s",
            [(f"sum by (rail) ({sent})", "rail {{rail}}")],
            x=0,
            y=8,
            unit="Bps",
        ),
        _panel(
            4,
            "Port rate, B/s",
            [
                (
                    'min by (rail) (node_infiniband_rate_bytes_per_second{job="node"})',
                    "rail {{rail}}",
                )
            ],
            x=12,
            y=8,
            unit="Bps",
            reference=("port B/s", planned),
        ),
        _panel(
            5,
            "Ports not ACTIVE per island",
            [
                (
                    "count by (island) "
                    f'(node_infiniband_state_id{{job="node"}} != {IB_PORT_ACTIVE})',
                    "island {{island}}",
                )
            ],
            x=0,
            y=16,
        ),
        _panel(
            6,
            "Link errors per rail (5 m)",
            [
                (
                    'sum by (rail) (increase(node_infiniband_link_downed_total{job="node"}[5m]))',
                    "link downed rail {{rail}}",
                ),
                (
                    "sum by (rail) (increase("
                    'node_infiniband_port_errors_received_total{job="node"}[5m]))',
                    "receive errors rail {{rail}}",
                ),
            ],
            x=12,
            y=16,
        ),
    ]


# --- the files --------------------------------------------------------------------------------


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


HEADER = "# Written by `myriad render` from the cluster spec and plan; edits are overwritten.\n"


def monitoring_files(
    spec: Cluster,
    catalog: Catalog,
    plan: Plan,
    nodes: Sequence[NodeRecord] | None = None,
    addresses: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Relative path → text of every file the monitoring servers get (the `monitoring/` tree)."""
    nodes = list(iter_nodes(spec)) if nodes is None else list(nodes)
    addresses = _addresses(spec, nodes) if addresses is None else addresses
    servers = monitoring_servers(spec)
    found = targets(spec, catalog, plan, nodes, addresses)
    gpu_pools = _gpu_pools(spec)
    files = {
        "prometheus.yml": HEADER + _yaml(prometheus_config(spec, catalog, servers)),
        "alertmanager.yml": HEADER + _yaml(alertmanager_config(spec)),
        "rules/myriad.yml": HEADER + _yaml(alert_rules(spec, catalog, plan)),
        "targets/node.json": json.dumps(_file_sd(found, NODE_EXPORTER_PORT), indent=1) + "\n",
    }
    if gpu_pools:
        gpu_targets = [t for t in found if t.labels["pool"] in gpu_pools]
        files["targets/dcgm.json"] = (
            json.dumps(_file_sd(gpu_targets, DCGM_EXPORTER_PORT), indent=1) + "\n"
        )
    for file, dashboard in dashboards(spec, catalog, plan).items():
        files[f"dashboards/{file}"] = json.dumps(dashboard, indent=1) + "\n"
    return files


def monitoring_groups(spec: Cluster, nodes: Sequence[NodeRecord]) -> dict[str, list[str]]:
    """The `monitoring_server` group: the hosts that run Prometheus and Alertmanager."""
    if not spec.monitoring.enabled:
        return {}
    return {"monitoring_server": monitoring_servers(spec)}


def monitoring_group_vars(
    spec: Cluster, nodes: Sequence[NodeRecord], addresses: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Role variables by group: every node exports, controllers run the Slurm collector,
    GPU pools the DCGM exporter, the servers Prometheus and Alertmanager."""
    if not spec.monitoring.enabled:
        return {}
    monitoring = spec.monitoring
    servers = monitoring_servers(spec)
    result: dict[str, dict[str, Any]] = {
        "all": {"monitoring_enabled": True},
        "monitoring_server": {
            "monitoring_server": True,
            "monitoring_prometheus_retention_days": monitoring.retention_days,
            "monitoring_alertmanager_peers": [addresses[s] for s in servers],
            "monitoring_grafana_enabled": monitoring.grafana,
        },
    }
    if spec.software.orchestrator == "slurm":
        result["controller"] = {
            "monitoring_slurm_collector_enabled": True,
            "monitoring_slurm_collector_interval_seconds": monitoring.scrape_interval_seconds,
        }
    if spec.provider.kind != "local":
        for pool in _gpu_pools(spec):
            result[f"pool_{pool}"] = {"monitoring_dcgm_exporter_enabled": True}
    return result
