"""The whole flow on one machine, as the README's first command runs it.

`myriad up` builds the node image, starts four systemd containers as nodes, renders the
inventory, brings them up with the real roles (common, nccl, container runtime, Slurm)
and validates them. Then: Slurm runs a job across the compute containers, drift is
injected on two nodes, validation names those nodes, checks and expected-vs-actual
values, a second `up` repairs them, and `down` removes everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from run_names import free_subnet, unique_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "local" / "cluster.yaml"
MYRIAD = [sys.executable, "-m", "myriad.cli"]
UP_TIMEOUT_S = 1800


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


@dataclass(frozen=True)
class Cluster:
    """The local example under a name and subnet of this run's own: the user's `local`
    cluster, if one runs, is never touched."""

    name: str
    spec: Path
    state: Path


def run_spec(folder: Path) -> tuple[str, Path]:
    name = unique_name("it-local")
    text = EXAMPLE.read_text()
    for old, new in (("name: local\n", f"name: {name}\n"), ("172.31.77.0/24", free_subnet())):
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


@pytest.mark.docker
@pytest.mark.slow
def test_up_jobs_drift_repair_down(cluster: Cluster) -> None:
    spec, state = cluster.spec, cluster.state
    up = myriad("up", str(spec), state=state)
    assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-3000:]
    assert "the cluster matches its spec" in up.stdout

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

    down = myriad("down", str(spec), "--yes", state=state, timeout=300)
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
