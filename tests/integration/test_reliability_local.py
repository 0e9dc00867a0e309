"""Fault injection on a real local cluster: what an operator does to a run, and what Myriad
must say and record (issue #13).

One small cluster (a controller and two compute containers, the node image, no roles but
`common`) for the whole module, under a name and subnet of this run's own. The bring-up
runs `--tags common` only: each case needs a real Ansible run on real nodes, not the whole
stack. In order:

1. a baseline run converges `common` (later runs change nothing and are quick);
2. two runs at once: the second refuses, naming the first; Ctrl-C (SIGINT) stops the first
   with exit 130, "interrupted during ...", every process it started ended, recorded so;
3. SIGKILL of `myriad`: `myriad status` says the run is incomplete, the lock is free;
4. a node frozen mid-run (`docker pause`): its task times out after the spec's
   bringup.task_timeout_s, the others finish, the message says it did not answer and its
   container is paused, and `--retry-failed` picks it up once it is resumed;
5. one node holding another munge key: `myriad validate` fails that node's
   slurm.munge-key check, naming both digests, and passes the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.bringup.lock import is_locked
from myriad.runner import _alive, descendants, end_processes

from run_names import free_subnet, unique_name

ROOT = Path(__file__).resolve().parents[2]
MYRIAD = [sys.executable, "-m", "myriad.cli"]
TASK_TIMEOUT_S = 20


@dataclass(frozen=True)
class Cluster:
    name: str
    spec: Path
    state: Path

    @property
    def root(self) -> Path:
        return self.state / self.name

    def env(self) -> dict[str, str]:
        return {**os.environ, "MYRIAD_STATE_DIR": str(self.state), "COLUMNS": "160"}

    def myriad(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*MYRIAD, *args], cwd=ROOT, env=self.env(), capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    def start(self, *args: str) -> subprocess.Popen[str]:
        # Its own session: the signals the test sends reach only this run.
        return subprocess.Popen(
            [*MYRIAD, *args], cwd=ROOT, env=self.env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip

    def container(self, node: str) -> str:
        return f"{self.name}-{node}"

    def last(self) -> dict[str, Any]:
        status: dict[str, Any] = json.loads((self.root / "status.json").read_text())
        return dict(status.get("last_bringup") or {})


def spec_text(name: str, subnet: str, task_timeout_s: int) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "myriad/v1",
            "kind": "Cluster",
            "metadata": {"name": name, "description": "reliability integration test"},
            "provider": {"kind": "local"},
            "profiles": {
                "container": {
                    "cpu": {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 1},
                    "memory_gib": 2,
                }
            },
            "pools": [
                {"name": "ctl", "profile": "container", "count": 1, "role": "controller"},
                {"name": "node", "profile": "container", "count": 2, "role": "compute"},
            ],
            "network": {
                "fabric": "ethernet",
                "topology": {"kind": "fat-tree", "switch": "SN3420"},
                "addressing": {"management": subnet},
            },
            "software": {"os": "debian-12", "container_runtime": "docker", "orchestrator": "slurm"},
            "bringup": {"task_timeout_s": task_timeout_s, "connect_timeout_s": 10},
        }
    )


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=120, check=True
    )


@pytest.fixture(scope="module")
def cluster(docker_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from myriad.provision import local
    from myriad.spec import load_spec_text

    folder = tmp_path_factory.mktemp("reliability")
    name = unique_name("it-rel")
    spec, subnet = folder / f"{name}.yaml", free_subnet()
    # The baseline's first apt update may take minutes; the cases after it change nothing,
    # so the spec then gets the short task timeout a frozen node is caught by.
    spec.write_text(spec_text(name, subnet, 600))
    loaded = load_spec_text(spec.read_text(), str(spec))
    try:
        local.converge(loaded.spec)
        made = Cluster(name, spec, folder / "state")
        baseline = made.myriad("bringup", str(spec), "--tags", "common", timeout=900)
        assert baseline.returncode == 0, baseline.stdout[-4000:] + baseline.stderr[-2000:]
        spec.write_text(spec_text(name, subnet, TASK_TIMEOUT_S))
        yield made
    finally:
        for node in ("ctl01", "node01", "node02"):
            subprocess.run(
                ["docker", "unpause", f"{name}-{node}"], capture_output=True, check=False
            )
        local.remove(loaded.spec)


def wait_for_a_task(cluster: Cluster, process: subprocess.Popen[str], timeout: float = 120) -> None:
    """Until the run is recorded as running and Ansible has started a task on a node."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            last = cluster.last()
        except (OSError, ValueError):
            last = {}
        if last.get("status") == "running" and last.get("pid") == process.pid:
            events = Path(str(last["run_dir"])) / "artifacts"
            for path in events.glob("*/job_events/*.json"):
                if "runner_on_start" in path.read_text(errors="replace"):
                    return
        time.sleep(0.3)
    raise AssertionError("no task started within the time")


@pytest.mark.docker
@pytest.mark.slow
def test_a_second_run_refuses_and_ctrl_c_stops_everything_with_130(cluster: Cluster) -> None:
    first = cluster.start("bringup", str(cluster.spec), "--tags", "common")
    try:
        wait_for_a_task(cluster, first)
        second = cluster.myriad("bringup", str(cluster.spec), "--tags", "common", timeout=120)
        assert second.returncode == 1
        assert f"the cluster is busy: `myriad bringup` (pid {first.pid}, " in second.stderr
        assert "since 20" in second.stderr
        started = descendants(first.pid)
        assert started, "Ansible runs under myriad"
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=90)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, out[-3000:] + err[-3000:]
    assert "error: interrupted during " in err
    print("interrupt:", err.strip().splitlines()[-1])
    assert "matched no hosts" not in out + err
    time.sleep(1)
    assert [pid for pid in started if _alive(pid)] == []
    last = cluster.last()
    assert last["status"] == "interrupted"
    status = " ".join(cluster.myriad("status", str(cluster.spec)).stdout.split())
    assert "last bring-up interrupted at" in status, status


@pytest.mark.docker
@pytest.mark.slow
def test_after_a_sigkill_status_shows_the_run_incomplete(cluster: Cluster) -> None:
    run = cluster.start("bringup", str(cluster.spec), "--tags", "common")
    orphans: list[int] = []
    try:
        wait_for_a_task(cluster, run)
        orphans = descendants(run.pid)
        run.kill()
        run.wait(timeout=30)
    finally:
        # SIGKILL leaves ansible-playbook behind (nothing can stop that); end it here.
        end_processes(orphans)
    status = cluster.myriad("status", str(cluster.spec))
    assert status.returncode == 0
    text = " ".join(status.stdout.split())
    assert "last bring-up incomplete: started at" in text, text
    assert f"(pid {run.pid}) and never finished" in text
    assert not is_locked(cluster.root)


@pytest.mark.docker
@pytest.mark.slow
def test_a_frozen_node_times_out_the_others_finish_and_retry_picks_it_up(
    cluster: Cluster,
) -> None:
    run = cluster.start("bringup", str(cluster.spec), "--tags", "common")
    try:
        wait_for_a_task(cluster, run)
        docker("pause", cluster.container("node02"))
        start = time.monotonic()
        out, err = run.communicate(timeout=300)
        seconds = time.monotonic() - start
    finally:
        if run.poll() is None:
            run.kill()
        docker("unpause", cluster.container("node02"))
    assert run.returncode == 1, out[-3000:] + err[-3000:]
    last = cluster.last()
    assert last["status"] == "failed"
    assert last["failed_hosts"] == ["node02"], out[-3000:]
    # Bounded by the task timeout, not by the hour-long run limit.
    assert seconds < 240, seconds
    text = " ".join(out.split())
    # What the operator saw (kept in the test log: a timeout or Docker refusing the paused node).
    print(f"frozen node: {seconds:.1f} s;", [line for line in out.splitlines() if "node02" in line])
    assert f"node02 did not answer: its container {cluster.container('node02')} is paused" in text
    assert f"`docker unpause {cluster.container('node02')}`" in text
    retry = cluster.myriad("bringup", str(cluster.spec), "--tags", "common", "--retry-failed")
    assert retry.returncode == 0, retry.stdout[-3000:] + retry.stderr[-2000:]
    assert cluster.last()["failed_hosts"] == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_node_with_another_munge_key_fails_validation(cluster: Cluster) -> None:
    for node in ("ctl01", "node01", "node02"):
        source = "/dev/urandom" if node == "node02" else "/tmp/cluster.key"
        script = (
            "id munge >/dev/null 2>&1 || useradd --system munge; mkdir -p /etc/munge; "
            f"[ -f /tmp/cluster.key ] || printf %1024s key > /tmp/cluster.key; "
            f"head -c 1024 {source} > /etc/munge/munge.key; "
            "chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key"
        )
        docker("exec", cluster.container(node), "sh", "-c", script)
    report = cluster.myriad("validate", str(cluster.spec), "--json", "--no-jobs")
    assert report.returncode == 1, report.stderr[-3000:]
    results = {(r["node"], r["check"]): r for r in json.loads(report.stdout)["results"]}
    key = results[("node02", "slurm.munge-key")]
    assert key["status"] == "fail", key["actual"]
    assert key["actual"].startswith("/etc/munge/munge.key differs from ctl01's (sha256 ")
    assert results[("node01", "slurm.munge-key")]["status"] == "pass"
    assert results[("node01", "slurm.job")]["status"] == "not-applicable"
