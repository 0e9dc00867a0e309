"""The whole flow on one machine, as the README's first command runs it: one cluster
lifecycle for the module.

`myriad up` builds the node image, starts four systemd containers as nodes, renders the
inventory, brings them up with the real roles (common, nccl, container runtime, Slurm,
monitoring) and validates them. Then: Slurm runs a job across the compute containers, drift is
injected on two nodes, validation names those nodes, checks and expected-vs-actual values, and
a second `up` repairs them. Monitoring on the same cluster (the example's, with short scrape,
evaluation and `for:` times so an alert can be watched here): Prometheus on the controller
container, queried from the host at the URL `myriad status` prints, reports every node's
exporter up; the Slurm collector's metrics match `sinfo`; a paused node raises MyriadNodeDown
in Alertmanager (its API) and the alert resolves once the node runs again. Last, `down`
removes everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from run_names import free_subnet, unique_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "local" / "cluster.yaml"
MYRIAD = [sys.executable, "-m", "myriad.cli"]
UP_TIMEOUT_S = 1800
NODES = ["ctl01", "node01", "node02", "node03"]
# Seconds: scrape and evaluate every 2 s, an alert fires after 4 s of a down node.
FAST = (
    "monitoring: {enabled: true, scrape_interval_seconds: 2, evaluation_interval_seconds: 2,"
    " alert_for_seconds: 4}\n"
)
T = TypeVar("T")


def myriad(
    *args: str, state: Path, timeout: float = UP_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYRIAD_STATE_DIR": str(state), "COLUMNS": "160"}
    return subprocess.run(
        [*MYRIAD, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Cluster:
    """The local example under a name and subnet of this run's own: the user's `local`
    cluster, if one runs, is never touched."""

    name: str
    spec: Path
    state: Path
    # Set by the first test: the later ones need the cluster it brought up.
    up: subprocess.CompletedProcess[str] | None = None
    up_seconds: float = 0.0


def run_spec(folder: Path) -> tuple[str, Path]:
    name = unique_name("it-local")
    text = EXAMPLE.read_text()
    for old, new in (
        ("name: local\n", f"name: {name}\n"),
        ("172.31.77.0/24", free_subnet()),
        ("monitoring: {enabled: true}\n", FAST),
    ):
        assert old in text, old
        text = text.replace(old, new)
    spec = folder / f"{name}.yaml"
    spec.write_text(text)
    return name, spec


def in_node(cluster: Cluster, node: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "exec", f"{cluster.name}-{node}", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def cluster(docker_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    state = tmp_path_factory.mktemp("state")
    name, spec = run_spec(state)
    try:
        yield Cluster(name, spec, state)
    finally:
        myriad("down", str(spec), "--yes", state=state, timeout=300)


def require_up(cluster: Cluster) -> None:
    assert cluster.up is not None, "the first test did not bring the cluster up"
    assert cluster.up.returncode == 0, cluster.up.stdout[-6000:] + cluster.up.stderr[-3000:]


@pytest.mark.docker
@pytest.mark.slow
def test_up_jobs_drift_repair(cluster: Cluster) -> None:
    spec, state = cluster.spec, cluster.state
    start = time.monotonic()
    cluster.up = myriad("up", str(spec), state=state)
    cluster.up_seconds = time.monotonic() - start
    print(f"myriad up with monitoring: {cluster.up_seconds:.0f} s")
    require_up(cluster)
    assert "the cluster matches its spec" in cluster.up.stdout

    job = in_node(cluster, "ctl01", "timeout", "120", "srun", "-N3", "hostname")
    assert job.returncode == 0, job.stderr
    assert sorted(job.stdout.split()) == ["node01", "node02", "node03"]
    sinfo = in_node(cluster, "ctl01", "sinfo", "-h", "-N", "-o", "%N %T")
    assert sorted(sinfo.stdout.split("\n")[:-1]) == [f"node0{i} idle" for i in (1, 2, 3)]

    # Drift: slurmd stopped on one node, a hand edit of the NCCL defaults on another.
    assert in_node(cluster, "node02", "systemctl", "stop", "slurmd").returncode == 0
    edit = in_node(cluster, "node03", "sh", "-c", "echo NCCL_DEBUG=INFO >> /etc/nccl.conf")
    assert edit.returncode == 0

    drifted = myriad("validate", str(spec), "--json", state=state, timeout=600)
    assert drifted.returncode == 1, drifted.stderr[-3000:]
    report = json.loads(drifted.stdout)
    failures = {(r["node"], r["check"]): r for r in _results(report) if r["status"] == "fail"}
    assert ("node02", "slurm.slurmd") in failures
    slurmd = failures[("node02", "slurm.slurmd")]
    assert (slurmd["expected"], slurmd["actual"]) == ("slurmd active", "slurmd inactive")
    assert ("node03", "nccl.conf") in failures
    assert "NCCL_DEBUG=INFO" in str(failures[("node03", "nccl.conf")]["actual"])
    assert all(node in ("node02", "node03") for node, _ in failures), failures.keys()
    assert all(r["fix"] for r in failures.values())

    repaired = myriad("up", str(spec), state=state)
    assert repaired.returncode == 0, repaired.stdout[-6000:] + repaired.stderr[-3000:]
    assert "the cluster matches its spec" in repaired.stdout
    assert "NCCL_DEBUG" not in in_node(cluster, "node03", "cat", "/etc/nccl.conf").stdout


@pytest.mark.docker
@pytest.mark.slow
def test_the_quick_start_shows_node_health(cluster: Cluster) -> None:
    """The local example turns node health on: the runner judged each compute container at
    the end of its role, with nothing failing on a healthy CPU-only node."""
    require_up(cluster)
    shown = myriad("health", str(cluster.spec), "--json", state=cluster.state, timeout=300)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    nodes = {n["node"]: n for n in json.loads(shown.stdout)["nodes"]}
    assert sorted(nodes) == ["node01", "node02", "node03"]
    for name, node in nodes.items():
        assert node["healthy"] and node["last_run"] is not None, (name, node)
        assert (node["failing"], node["unknown"]) == ([], []), (name, node)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 90.0) -> T:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if last is not None and last is not False:
                return last
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def prometheus(cluster: Cluster) -> str:
    require_up(cluster)
    status = myriad("status", str(cluster.spec), state=cluster.state, timeout=120)
    assert status.returncode == 0, status.stderr
    found = re.search(r"Prometheus: (http://[\d.]+:9090)", status.stdout)
    assert found, status.stdout
    return found.group(1)


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    url = f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    answer = get_json(url)
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


@pytest.mark.docker
@pytest.mark.slow
def test_prometheus_scrapes_every_node(cluster: Cluster, prometheus: str) -> None:
    subnet_prefix = prometheus.split("//")[1].rsplit(".", 1)[0]
    # The controller is the first node: .10 of the management network.
    assert prometheus == f"http://{subnet_prefix}.10:9090"

    def all_up() -> list[dict[str, Any]] | None:
        # Targets from Myriad's file only: Debian's package first runs Prometheus with its own
        # configuration (job "node", localhost:9100), whose series stays in instant queries
        # for the 5-minute lookback.
        result = query(prometheus, 'up{job="node",node!=""} == 1')
        return result if len(result) == len(NODES) else None

    result = wait_for("every node exporter up", all_up)
    labels = {r["metric"]["node"]: r["metric"] for r in result}
    assert sorted(labels) == NODES
    assert labels["ctl01"]["role"] == "controller" and labels["ctl01"]["pool"] == "ctl"
    assert labels["node02"]["role"] == "compute" and labels["node02"]["island"] == "0"
    rules = get_json(f"{prometheus}/api/v1/rules")["data"]["groups"]
    names = {rule["name"] for group in rules for rule in group["rules"]}
    assert {"MyriadNodeDown", "MyriadSlurmControllerDown", "MyriadNodeDrainedByHealth"} <= names


@pytest.mark.docker
@pytest.mark.slow
def test_slurm_collector_matches_sinfo(cluster: Cluster, prometheus: str) -> None:
    sinfo = in_node(cluster, "ctl01", "sinfo", "-h", "-N", "-o", "%N %T")
    assert sinfo.returncode == 0, sinfo.stderr
    states = dict(line.split() for line in sinfo.stdout.splitlines() if line.strip())
    expected = Counter(state.rstrip("*~#!%$@^-+") for state in states.values())
    assert sum(expected.values()) == 3

    def matches() -> dict[str, int] | None:
        seen = {
            r["metric"]["state"]: int(float(r["value"][1]))
            for r in query(prometheus, "myriad_slurm_nodes")
        }
        return seen if seen == dict(expected) else None

    wait_for(f"myriad_slurm_nodes == {dict(expected)}", matches)
    controller = query(prometheus, "myriad_slurm_controller_up")
    assert [(r["metric"]["controller"], r["value"][1]) for r in controller] == [("ctl01", "1")]
    jobs = {r["metric"]["state"]: r["value"][1] for r in query(prometheus, "myriad_slurm_jobs")}
    assert jobs == {"pending": "0", "running": "0"}
    success = query(prometheus, "myriad_slurm_collector_success")
    assert [r["value"][1] for r in success] == ["1"]


def _node_down_alerts(alertmanager: str, node: str) -> list[dict[str, Any]]:
    alerts = get_json(f"{alertmanager}/api/v2/alerts")
    return [
        a
        for a in alerts
        if a["labels"].get("alertname") == "MyriadNodeDown" and a["labels"].get("node") == node
    ]


def _active(alert: dict[str, Any]) -> bool:
    ends = datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))
    return alert["status"]["state"] == "active" and ends > datetime.now(UTC)


@pytest.mark.docker
@pytest.mark.slow
def test_a_paused_node_raises_node_down_and_it_resolves(cluster: Cluster, prometheus: str) -> None:
    alertmanager = prometheus.replace(":9090", ":9093")
    wait_for("node03 up", lambda: query(prometheus, 'up{job="node",node="node03"} == 1') or None)
    assert not any(_active(a) for a in _node_down_alerts(alertmanager, "node03"))
    container = f"{cluster.name}-node03"
    paused = subprocess.run(["docker", "pause", container], capture_output=True, check=False)
    assert paused.returncode == 0, paused.stderr
    try:
        fired = wait_for(
            "MyriadNodeDown for node03 in Alertmanager",
            lambda: [a for a in _node_down_alerts(alertmanager, "node03") if _active(a)] or None,
        )
    finally:
        subprocess.run(["docker", "unpause", container], capture_output=True, check=False)
    alert = fired[0]
    assert alert["labels"]["severity"] == "critical"
    assert alert["labels"]["pool"] == "node"
    assert alert["annotations"]["summary"].startswith("node03 is down")
    assert alert["annotations"]["expected"] == "every node of the spec answers (4 nodes)"
    assert "README.md#monitoring" in alert["annotations"]["runbook"]
    wait_for(
        "MyriadNodeDown for node03 resolved",
        lambda: not any(_active(a) for a in _node_down_alerts(alertmanager, "node03")),
    )


@pytest.mark.docker
@pytest.mark.slow
def test_down_removes_every_container(cluster: Cluster) -> None:
    require_up(cluster)
    down = myriad("down", str(cluster.spec), "--yes", state=cluster.state, timeout=300)
    assert down.returncode == 0, down.stderr
    left = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=org.myriad.cluster={cluster.name}", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert left.stdout.strip() == ""


def test_down_refuses_without_a_terminal_or_yes(tmp_path: Path) -> None:
    # Under a name of its own: were the refusal broken, the user's `local` cluster stays.
    spec = tmp_path / "never-started.yaml"
    spec.write_text(EXAMPLE.read_text().replace("name: local\n", f"name: {unique_name('it')}\n"))
    result = myriad("down", str(spec), state=tmp_path, timeout=120)
    assert result.returncode == 2
    assert "--yes" in result.stdout + result.stderr


def _results(report: dict[str, object]) -> list[dict[str, str]]:
    results = report.get("results")
    assert isinstance(results, list), sorted(report)
    return results
