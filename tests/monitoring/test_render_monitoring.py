"""What `myriad render` gives the monitoring servers, for every example spec: promtool and
amtool accept it, targets carry the inventory's labels, rails map to ports, dashboards are
valid JSON with the plan's figures, and every query names only metrics some exporter emits."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
import yaml

from myriad.plan.nodes import iter_nodes
from myriad.plan.pipeline import PlanResult, plan_loaded
from myriad.plan.ports import hardware_expectation
from myriad.render.inventory import build_inventory
from myriad.render.monitoring import monitoring_files, prometheus_config, prometheus_url
from myriad.render.role_vars import slurm_blocks
from myriad.render.writer import write_inventory
from myriad.spec import load_spec_text

from spec_builder import cluster, example_text, gpu_profile, load_example

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
EXAMPLES = sorted(p.parent.name for p in (ROOT / "inventories").glob("*/cluster.yaml"))
COLLECTOR = ROOT / "roles" / "monitoring" / "files" / "myriad-slurm-metrics"
COUNTERS = ROOT / "roles" / "monitoring" / "files" / "dcgm-counters.csv"


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: scripts/bootstrap installs it (apt prometheus)")
    return found


@cache
def planned(example: str) -> PlanResult:
    result = plan_loaded(load_example(example))
    assert result.plan is not None
    return result


@cache
def rendered(example: str) -> dict[str, str]:
    result = planned(example)
    assert result.plan is not None
    return monitoring_files(result.loaded.spec, result.loaded.catalog, result.plan)


def write_tree(example: str, folder: Path) -> Path:
    for relative, text in rendered(example).items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


@cache
def collector() -> ModuleType:
    loader = SourceFileLoader("myriad_slurm_metrics", str(COLLECTOR))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# --- promtool and amtool ------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES)
def test_promtool_and_amtool_accept_what_is_rendered(example: str, tmp_path: Path) -> None:
    tree = write_tree(example, tmp_path)
    for argv in (
        [tool("promtool"), "check", "config", "prometheus.yml"],
        [tool("promtool"), "check", "rules", "rules/myriad.yml"],
        [tool("amtool"), "check-config", "alertmanager.yml"],
    ):
        done = subprocess.run(
            argv, cwd=tree, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, f"{example}: {argv}\n{done.stdout}{done.stderr}"
    config = yaml.safe_load((tree / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        for sd in job.get("file_sd_configs", []):
            for file in sd["files"]:
                assert (tree / file).is_file(), f"{example}: {job['job_name']} reads {file}"


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    """The check above can fail: a rule with a bad expression is refused."""
    tree = write_tree("local", tmp_path)
    rules = tree / "rules" / "myriad.yml"
    rules.write_text(rules.read_text().replace('up{job="node"} == 0', 'up{job="node"} ==='))
    done = subprocess.run(
        [tool("promtool"), "check", "rules", str(rules)], capture_output=True, check=False
    )
    assert done.returncode != 0


# --- targets and labels --------------------------------------------------------------------


def test_starter_targets_carry_pool_island_rack_and_role() -> None:
    targets = json.loads(rendered("starter-64")["targets/node.json"])
    by_node = {t["labels"]["node"]: t for t in targets}
    assert len(targets) == 11
    # 10.10.0.0/24 from .10 in pool order: ctl01 .10, ctl02 .11, login01 .12, gpu01 .13 ...
    assert by_node["gpu03"]["targets"] == ["10.10.0.15:9100"]
    assert by_node["gpu03"]["labels"] == {
        "node": "gpu03",
        "pool": "gpu",
        "profile": "h100-node",
        "role": "compute",
        # 25 kW racks hold 2 HGX H100 (10.2 kW); the 3 head nodes fill r0001.
        "rack": "r0003",
        "island": "0",
    }
    assert by_node["ctl01"]["labels"] == {
        "node": "ctl01",
        "pool": "ctl",
        "profile": "head",
        "role": "controller",
        "rack": "r0001",
    }
    dcgm = json.loads(rendered("starter-64")["targets/dcgm.json"])
    assert [t["targets"] for t in dcgm] == [[f"10.10.0.{13 + i}:9400"] for i in range(8)]


def test_rails_are_labels_of_each_ports_series() -> None:
    config = yaml.safe_load(rendered("starter-64")["prometheus.yml"])
    node_job = next(job for job in config["scrape_configs"] if job["job_name"] == "node")
    relabels = node_job["metric_relabel_configs"]
    # 8 x ConnectX-7 on the GPU pool: mlx5_0..7 (IPoIB ib0..7) are rails 0..7.
    assert [(r["regex"], r["replacement"]) for r in relabels] == [
        (f"gpu;(mlx5_{i}|ib{i})", str(i)) for i in range(8)
    ]
    assert {r["target_label"] for r in relabels} == {"rail"}


def test_islands_of_a_large_fabric() -> None:
    targets = json.loads(rendered("h100-100k")["targets/node.json"])
    islands = {t["labels"].get("island") for t in targets if t["labels"]["role"] == "compute"}
    assert len(islands) > 1 and None not in islands


def test_local_intervals_and_url() -> None:
    result = planned("local")
    config = yaml.safe_load(rendered("local")["prometheus.yml"])
    assert config["global"]["scrape_interval"] == "30s"
    assert config["global"]["evaluation_interval"] == "30s"
    # No GPU: no DCGM job, no GPU or fabric rules; the controller runs Prometheus (.10).
    assert [job["job_name"] for job in config["scrape_configs"]] == [
        "node",
        "prometheus",
        "alertmanager",
    ]
    rules = yaml.safe_load(rendered("local")["rules/myriad.yml"])
    assert [g["name"] for g in rules["groups"]] == ["myriad-nodes", "myriad-health", "myriad-slurm"]
    assert prometheus_url(result.loaded.spec) == "http://172.31.77.10:9090"


def test_inventory_holds_the_files_and_the_server_group_only_when_enabled(
    tmp_path: Path,
) -> None:
    result = planned("local")
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    assert inventory.groups["monitoring_server"] == ["ctl01"]
    assert inventory.group_vars["all"]["monitoring_enabled"] is True
    assert inventory.group_vars["controller"]["monitoring_slurm_collector_enabled"] is True
    out = write_inventory(inventory, tmp_path / "inventory")
    assert (out / "monitoring" / "rules" / "myriad.yml").is_file()
    assert (out / "monitoring" / "targets" / "node.json").is_file()
    starter = plan_loaded(load_spec_text(example_text("starter-64", without=("monitoring",))))
    assert starter.plan is not None
    off = build_inventory(starter.loaded.spec, starter.loaded.catalog, starter.plan)
    assert "monitoring_server" not in off.groups
    assert off.files == {}
    assert "monitoring_enabled" not in off.group_vars["all"]


def test_spec_figures_reach_the_rules() -> None:
    text = example_text("starter-64", without=("monitoring",))
    text += (
        "monitoring: {enabled: true, servers: [login01], gpu_temperature_max_c: 80,"
        " power_margin: 0.25, scrape_interval_seconds: 90, evaluation_interval_seconds: 90,"
        " alert_for_seconds: 60, webhooks: ['http://alerts.example:5001/hook']}\n"
    )
    result = plan_loaded(load_spec_text(text))
    assert result.plan is not None
    files = monitoring_files(result.loaded.spec, result.loaded.catalog, result.plan)
    rules = {
        r["alert"]: r
        for g in yaml.safe_load(files["rules/myriad.yml"])["groups"]
        for r in g["rules"]
    }
    assert rules["MyriadGpuTemperatureHigh"]["expr"] == 'DCGM_FI_DEV_GPU_TEMP{job="dcgm"} > 80'
    # 44.8 kW x 1.25 = 56,000 W; the counter window is 4 scrapes of 90 s = 360 s.
    assert rules["MyriadClusterPowerHigh"]["expr"].endswith("> 56000")
    assert "[360s]" in rules["MyriadGpuEccUncorrectable"]["expr"]
    assert rules["MyriadNodeDown"]["for"] == "60s"
    alertmanager = yaml.safe_load(files["alertmanager.yml"])
    assert alertmanager["receivers"][0]["webhook_configs"] == [
        {"url": "http://alerts.example:5001/hook", "send_resolved": True}
    ]
    # login01 is the third node: 10.10.0.12.
    assert prometheus_url(result.loaded.spec) == "http://10.10.0.12:9090"


# --- dashboards --------------------------------------------------------------------------------


def dashboards(example: str) -> dict[str, dict[str, Any]]:
    return {
        path: json.loads(text)
        for path, text in rendered(example).items()
        if path.startswith("dashboards/")
    }


@pytest.mark.parametrize("example", EXAMPLES)
def test_dashboards_are_grafana_json(example: str) -> None:
    boards = dashboards(example)
    assert sorted(boards) == [
        "dashboards/myriad-fabric.json",
        "dashboards/myriad-node-gpu.json",
        "dashboards/myriad-overview.json",
    ]
    for path, board in boards.items():
        assert board["uid"] and len(board["uid"]) <= 40, path
        ids = [panel["id"] for panel in board["panels"]]
        assert len(ids) == len(set(ids)), path
        for panel in board["panels"]:
            assert panel["type"] == "timeseries" and panel["targets"], (path, panel["title"])
            assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), (path, panel["title"])


def test_overview_draws_the_plans_figures() -> None:
    overview = dashboards("starter-64")["dashboards/myriad-overview.json"]
    lines = {
        panel["title"]: panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"]
        for panel in overview["panels"]
        if "thresholds" in panel["fieldConfig"]["defaults"]
    }
    # 11 nodes, 64 GPUs, 64 x 700 W = 44.8 kW.
    assert lines == {
        "Nodes up (plan: nodes)": 11.0,
        "GPUs seen by DCGM (plan: GPUs)": 64.0,
        "GPU power, kW (plan: GPU kW)": 44.8,
        "Slurm jobs and GPUs allocated (plan: GPUs)": 64.0,
    }
    fabric = dashboards("starter-64")["dashboards/myriad-fabric.json"]
    rate = next(p for p in fabric["panels"] if p["title"].startswith("Port rate"))
    # ConnectX-7: 400 Gb/s = 5e10 B/s.
    assert rate["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 5e10


# --- metric names ------------------------------------------------------------------------------

_STRIP = (
    re.compile(r'"(?:[^"\\]|\\.)*"'),  # strings (label values)
    re.compile(r"\{[^}]*\}"),  # label matchers
    re.compile(r"\[[^\]]*\]"),  # ranges
    re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"),
)
_KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    for pattern in _STRIP:
        expr = pattern.sub(" ", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        following = expr[match.end() :].lstrip()
        if following.startswith("(") or match.group() in _KEYWORDS:
            continue
        if re.fullmatch(r"\d+(?:e\d+)?", match.group()):
            continue
        names.add(match.group())
    return names


def test_metric_names_are_read_from_an_expression() -> None:
    expr = (
        'sum by (rack) (DCGM_FI_DEV_POWER_USAGE{job="dcgm",profile="x"}) > 12320 or '
        'increase(node_infiniband_link_downed_total{device=~"a|b"}[300s]) > 0'
    )
    assert metric_names(expr) == {"DCGM_FI_DEV_POWER_USAGE", "node_infiniband_link_downed_total"}


@cache
def known_metrics() -> dict[str, set[str]]:
    document = yaml.safe_load((HERE / "known_metrics.yaml").read_text())
    known = {name: set(entry["metrics"]) for name, entry in document.items()}
    known["dcgm"] = {
        line.split()[0]
        for line in (HERE / "dcgm_fields.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    known["slurm_collector"] = set(collector().METRICS)
    return known


def counters() -> set[str]:
    return {
        line.split(",")[0].strip()
        for line in COUNTERS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }


def expressions(example: str) -> Iterator[tuple[str, str]]:
    rules = yaml.safe_load(rendered(example)["rules/myriad.yml"])
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield f"rule {rule['alert']}", rule["expr"]
    for path, board in dashboards(example).items():
        for panel in board["panels"]:
            for target in panel["targets"]:
                yield f"{path} {panel['title']}", target["expr"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_query_uses_only_emitted_metrics(example: str) -> None:
    known = known_metrics()
    everything = set().union(*known.values())
    installed = counters()
    for where, expr in expressions(example):
        for name in metric_names(expr):
            assert name in everything, f"{example} {where}: {name} is emitted by no exporter"
            if name.startswith("DCGM_FI_"):
                assert name in installed, f"{where}: {name} is not in {COUNTERS.name}"


def test_the_dcgm_counters_are_documented_fields() -> None:
    assert counters() <= known_metrics()["dcgm"]
    assert len(counters()) == 19


# --- the Slurm collector -----------------------------------------------------------------------

SINFO_NODES = """\
node01|idle|none
node02|allocated|none
node03|drained|Kill task failed
node03|drained|Kill task failed
node04|mixed*|none
node05|draining|gpu.ecc: 2 volatile uncorrectable
"""


def test_collector_counts_nodes_by_state_once_each() -> None:
    module = collector()
    nodes = module.parse_nodes(SINFO_NODES)
    assert nodes["node03"] == ("drained", "Kill task failed")
    assert nodes["node04"] == ("mixed", "")
    text = module.render(nodes, (16, 5), {"pending": 2, "running": 1}, {"ctl01": 1}, 100.0)
    assert 'myriad_slurm_nodes{state="drained"} 1' in text
    assert 'myriad_slurm_nodes{state="idle"} 1' in text
    drained = 'myriad_slurm_node_drained{slurm_node="node05",reason="gpu.ecc: 2 volatile'
    assert f'{drained} uncorrectable"}} 1' in text
    assert 'myriad_slurm_node_drained{slurm_node="node04"' not in text
    assert "myriad_slurm_gpus_allocated 5" in text
    assert 'myriad_slurm_jobs{state="pending"} 2' in text
    assert "myriad_slurm_collector_success 1" in text


def test_collector_reads_gres_of_a_real_capture() -> None:
    module = collector()
    capture = ROOT / "tests" / "samples" / "slurm-sinfo" / "sinfo_node-gres_gpu8-socket-bound.txt"
    assert module.gpu_count("gpu:h100:8(S:0-1)") == 8
    assert module.gpu_count("gpu:4") == 4
    assert module.gpu_count("(null)") == 0
    assert module.gpu_count("gpu:h100:3(IDX:0-2),gpu:a100:1(IDX:4)") == 4
    # "<node> <gres>" lines: 20 nodes gpu:8(S:0-1), one gpu:4, the rest (null): 164 GPUs.
    total = sum(module.gpu_count(line.split()[1]) for line in capture.read_text().splitlines())
    assert total == 164
    # "<nodes> <gres used>": 98 x gpu:0, 3 x gpu:2, 1 x gpu:1 = 7 GPUs allocated.
    used = ROOT / "tests" / "samples" / "slurm-sinfo"
    lines = (used / "sinfo_slurm-20.11.8_nodes-gresused_allocated.txt").read_text().splitlines()
    allocated = sum(int(n) * module.gpu_count(gres) for n, gres in (x.split() for x in lines))
    assert allocated == 7


def test_collector_leaves_out_what_it_could_not_read() -> None:
    module = collector()
    ping = "Slurmctld(primary) at ctl01 is UP\nSlurmctld(backup) at ctl02 is DOWN\n"
    assert module.parse_ping(ping) == {"ctl01": 1, "ctl02": 0}
    text = module.render(None, None, None, {}, 5.0)
    assert "myriad_slurm_nodes" not in text
    assert 'myriad_slurm_controller_up{controller="unknown"} 0' in text
    assert "myriad_slurm_collector_success 0" in text


def test_collector_output_is_valid_exposition_format(tmp_path: Path) -> None:
    module = collector()
    text = module.render(
        module.parse_nodes(SINFO_NODES), (8, 0), {"pending": 0, "running": 0}, {"ctl01": 1}, 1.5
    )
    (tmp_path / "slurm.prom").write_text(text)
    done = subprocess.run(
        [tool("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- the DCGM exporter's unit (cannot run here) ------------------------------------------------


def test_dcgm_exporter_unit_is_written_for_real_use() -> None:
    """No GPU and no NVIDIA repository here: the unit cannot start, so its text is checked.
    It runs NVIDIA's pinned exporter with Myriad's counters on the port the targets name."""
    role = ROOT / "roles" / "monitoring"
    unit = (role / "templates" / "myriad-dcgm-exporter.service.j2").read_text()
    assert (
        "ExecStart=/usr/bin/dcgm-exporter --collectors /etc/dcgm-exporter/myriad-counters.csv "
        "--address {{ monitoring_dcgm_exporter_listen }}" in unit
    )
    assert "Restart=on-failure" in unit and "WantedBy=multi-user.target" in unit
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+-\d+", defaults["monitoring_dcgm_exporter_version"])
    assert defaults["monitoring_dcgm_exporter_listen"] == ":9400"
    # The install steps (also the image phase's) and the node's own.
    tasks = "".join(
        (role / "tasks" / name).read_text()
        for name in ("dcgm_exporter_install.yml", "dcgm_exporter.yml")
    )
    assert "datacenter-gpu-manager-exporter={{ monitoring_dcgm_exporter_version }}" in tasks
    assert "selection: hold" in tasks


def test_the_dcgm_exporter_reads_the_job_mapping_the_slurm_prolog_writes() -> None:
    """`--hpc-job-mapping-dir` (dcgm-exporter 4.2.3-4.1.3, pkg/cmd/app.go) on the directory the
    slurm role's Prolog keeps, created before the exporter starts; empty turns it off."""
    monitoring = yaml.safe_load((ROOT / "roles/monitoring/defaults/main.yml").read_text())
    slurm = yaml.safe_load((ROOT / "roles/slurm/defaults/main.yml").read_text())
    job_dir = monitoring["monitoring_dcgm_exporter_job_dir"]
    assert job_dir == slurm["slurm_gpu_job_dir"] == "/run/myriad/gpu-jobs"
    unit = jinja2.Template(
        (ROOT / "roles/monitoring/templates/myriad-dcgm-exporter.service.j2").read_text()
    )
    settings = {**monitoring, "ansible_managed": "test"}
    lines = unit.render(settings).splitlines()
    assert "ExecStartPre=/usr/bin/mkdir -p /run/myriad/gpu-jobs" in lines
    assert [line for line in lines if line.startswith("ExecStart=")] == [
        "ExecStart=/usr/bin/dcgm-exporter --collectors /etc/dcgm-exporter/myriad-counters.csv "
        "--address :9400 --hpc-job-mapping-dir /run/myriad/gpu-jobs"
    ]
    off = unit.render({**settings, "monitoring_dcgm_exporter_job_dir": ""})
    assert "hpc-job-mapping-dir" not in off and "ExecStartPre" not in off


# --- the README ------------------------------------------------------------------------------


def test_the_readme_names_every_alert_and_the_local_url() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Monitoring") :]
    section = section[: section.index("\n## ", 1)]
    for example in EXAMPLES:
        rules = yaml.safe_load(rendered(example)["rules/myriad.yml"])
        for group in rules["groups"]:
            for rule in group["rules"]:
                assert f"`{rule['alert']}`" in section, f"{example}: {rule['alert']}"
    url = prometheus_url(planned("local").loaded.spec)
    assert f"Prometheus: {url}" in section


def test_rail_labels_follow_the_vendor_port_map_the_node_is_checked_against() -> None:
    # DGX H100 (User Guide, Network Modules, Table 6): rail 1 is mlx5_3, and the storage ports
    # mlx5_1/2 are no rail. The rdma role refuses a node whose discovered map differs from
    # these names (hardware_expectation), so the labels and the node's names are one source.
    profile = gpu_profile(server="DGX-H100")
    profile["nics"]["storage"] = {"model": "ConnectX-7", "count": 2}
    loaded = cluster(profile=profile)
    config = prometheus_config(loaded.spec, loaded.catalog, [])
    node_job = next(job for job in config["scrape_configs"] if job["job_name"] == "node")
    devices = [r["regex"].split(";(")[1].split("|")[0] for r in node_job["metric_relabel_configs"]]
    assert devices == [f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11)]
    shape = loaded.spec.profiles["node"]
    expected = hardware_expectation(shape, loaded.catalog, "infiniband", "profiles.node.nics")
    assert expected["compute"]["devices"] == devices


def test_nvl72_trays_carry_their_nvlink_domain_as_slurm_names_its_block() -> None:
    targets = json.loads(rendered("gb300-nvl72-8")["targets/node.json"])
    by_node = {t["labels"]["node"]: t["labels"] for t in targets}
    trays = sorted(name for name in by_node if by_node[name]["pool"] == "gpu")
    # 144 trays, 18 to a GB300 NVL72 rack: 144 / 18 = 8 domains, nvl01..nvl08, in host order.
    assert len(trays) == 144
    assert {by_node[name]["nvlink_domain"] for name in trays[:18]} == {"nvl01"}
    assert by_node[trays[18]]["nvlink_domain"] == "nvl02"
    assert by_node[trays[143]]["nvlink_domain"] == "nvl08"
    # Head nodes are in no NVLink domain; the label is absent, not empty.
    assert "nvlink_domain" not in by_node["ctl01"]
    result = planned("gb300-nvl72-8")
    assert result.plan is not None
    nodes = list(iter_nodes(result.loaded.spec))
    blocks = slurm_blocks(result.loaded.spec, result.plan, nodes)
    assert {b["name"]: b["nodes"] for b in blocks} == {
        domain: sorted(n for n in trays if by_node[n]["nvlink_domain"] == domain)
        for domain in {by_node[n]["nvlink_domain"] for n in trays}
    }


def test_servers_with_nvswitch_carry_no_nvlink_domain() -> None:
    # An HGX H100 server's NVLink domain is the server itself: the node label already names it.
    targets = json.loads(rendered("starter-64")["targets/node.json"])
    assert all("nvlink_domain" not in t["labels"] for t in targets)
