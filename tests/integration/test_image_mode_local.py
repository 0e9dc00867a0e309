"""Image mode on the local cluster, end to end: one lifecycle for the whole module.

`myriad up` of the local example with `bringup: {mode: image}` builds the profile's image
once with the roles' image phase, starts the four containers from it, and each node
converges itself from its seed; validation passes (image.current included). A second `up`
with nothing changed builds nothing and changes nothing. A role variable that belongs in the
image (common_packages_extra, in a copy of the project) rebuilds it, and `up` rolls every
node onto the new image through the day-2 roll, one at a time; `down` removes the images.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from run_names import free_subnet, unique_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "local" / "cluster.yaml"
NODES = ("ctl01", "node01", "node02", "node03")
UP_TIMEOUT_S = 1800


@dataclass
class Imaged:
    name: str
    spec: Path
    state: Path
    home: Path | None = None

    def myriad(self, *args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "MYRIAD_STATE_DIR": str(self.state), "COLUMNS": "200"}
        if self.home is not None:
            env["MYRIAD_HOME"] = str(self.home)
        return subprocess.run(
            [sys.executable, "-m", "myriad.cli", *args],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def record(self) -> dict[str, object]:
        path = self.state / self.name / "images" / "container.json"
        data: dict[str, object] = json.loads(path.read_text())
        return data

    def node(self, node: str, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "exec", f"{self.name}-{node}", *command],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def image_of(self, node: str) -> str:
        """The id of the image the node's container was made from."""
        return docker("inspect", "--format", "{{.Image}}", f"{self.name}-{node}")


def docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()


def image_id(tag: object) -> str:
    return docker("image", "inspect", "--format", "{{.Id}}", str(tag))


@pytest.fixture(scope="module")
def imaged(docker_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Imaged]:
    state = tmp_path_factory.mktemp("image-state")
    name = unique_name("it-image")
    text = EXAMPLE.read_text()
    for old, new in (("name: local\n", f"name: {name}\n"), ("172.31.77.0/24", free_subnet())):
        assert old in text, old
        text = text.replace(old, new)
    spec = state / f"{name}.yaml"
    spec.write_text(text + "bringup: {mode: image}\n")
    cluster = Imaged(name, spec, state)
    try:
        yield cluster
    finally:
        cluster.home = None
        cluster.myriad("down", str(spec), "--yes", timeout=600)


def phase(output: str, name: str) -> str:
    match = re.search(rf"^[✓✗] {name} — (.*) \([0-9.]+ s\)$", output, re.MULTILINE)
    assert match is not None, f"no phase {name!r} in:\n{output[-4000:]}"
    return match[1]


@pytest.mark.docker
@pytest.mark.slow
def test_first_up_builds_once_and_every_node_converges_itself(imaged: Imaged) -> None:
    up = imaged.myriad("up", str(imaged.spec))
    assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-3000:]
    record = imaged.record()
    assert phase(up.stdout, "image container") == f"built {record['tag']}"
    assert phase(up.stdout, "containers") == "4 created"
    assert phase(up.stdout, "node-local converge").startswith("4 nodes, 4 changed")
    assert "the cluster matches its spec" in up.stdout
    # Every node runs the image, and knows which one it runs.
    for node in NODES:
        assert imaged.image_of(node) == image_id(record["tag"])
        on_node = json.loads(imaged.node(node, "cat", "/etc/myriad/image.json").stdout)
        assert on_node["content_hash"] == record["content_hash"]
    packages = record["packages"]
    assert isinstance(packages, dict) and {"slurmd", "slurmctld", "munge"} <= set(packages)
    # The image as committed: every part's packages, no secret, no cluster configuration, and
    # neither part's daemons on at boot (one image serves the controller and compute nodes).
    baked = docker(
        "run", "--rm", "--entrypoint", "sh", str(record["tag"]), "-c",
        "for f in /etc/munge/munge.key /etc/slurm/slurm.conf; do test -e $f && echo $f; done;"
        " systemctl is-enabled slurmctld slurmd prometheus myriad-converge; true",
    )  # fmt: skip
    assert baked.split() == ["disabled", "disabled", "disabled", "enabled"], baked
    # The image holds no secret: the cluster's munge key came with each node's seed.
    keys = {imaged.node(n, "sha256sum", "/etc/munge/munge.key").stdout.split()[0] for n in NODES}
    assert len(keys) == 1
    job = imaged.node("ctl01", "timeout", "120", "srun", "-N3", "hostname")
    assert sorted(job.stdout.split()) == ["node01", "node02", "node03"], job.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_a_second_up_with_nothing_changed_builds_nothing_and_changes_nothing(
    imaged: Imaged,
) -> None:
    before = imaged.record()
    again = imaged.myriad("up", str(imaged.spec))
    assert again.returncode == 0, again.stdout[-6000:] + again.stderr[-3000:]
    assert phase(again.stdout, "image container").startswith("current")
    assert phase(again.stdout, "containers") == "4 running"
    assert phase(again.stdout, "node-local converge") == "4 nodes, 0 changed"
    assert imaged.record() == before


@pytest.mark.docker
@pytest.mark.slow
def test_an_image_variable_rebuilds_the_image_and_the_roll_moves_every_node(
    imaged: Imaged, tmp_path: Path
) -> None:
    # A copy of the project whose common role installs one package more.
    home = tmp_path / "project"
    for folder in ("roles", "playbooks", "templates"):
        shutil.copytree(ROOT / folder, home / folder)
    defaults = home / "roles" / "common" / "defaults" / "main.yml"
    text = defaults.read_text()
    assert "common_packages_extra: []\n" in text
    defaults.write_text(
        text.replace("common_packages_extra: []\n", "common_packages_extra: [tree]\n")
    )
    old = imaged.record()
    imaged.home = home
    rolled = imaged.myriad("up", str(imaged.spec))
    assert rolled.returncode == 0, rolled.stdout[-8000:] + rolled.stderr[-3000:]
    new = imaged.record()
    assert new["content_hash"] != old["content_hash"]
    assert phase(rolled.stdout, "image container") == f"built {new['tag']}"
    assert phase(rolled.stdout, "containers") == "4 stale"
    assert "the cluster matches its spec" in rolled.stdout
    # The compute nodes went through the day-2 roll one at a time; then the controller.
    [log] = (imaged.state / imaged.name / "runs").glob("*-roll/roll.log")
    events = [line.split()[1:3] for line in log.read_text().splitlines()]
    order = [node for node, event in events if event == "drained"]
    assert order == ["node01", "node02", "node03"]
    for node in order:
        drained, resumed = events.index([node, "drained"]), events.index([node, "resumed"])
        assert [node, "converged"] in events[drained:resumed]
        later = [n for n in order if order.index(n) > order.index(node)]
        assert all(events.index([n, "drained"]) > resumed for n in later)
    packages = new["packages"]
    assert isinstance(packages, dict) and "tree" in packages
    for node in NODES:
        assert imaged.image_of(node) == image_id(new["tag"])
        assert imaged.node(node, "dpkg-query", "-W", "tree").returncode == 0, node


@pytest.mark.docker
@pytest.mark.slow
def test_down_removes_the_nodes_and_the_clusters_images(imaged: Imaged) -> None:
    imaged.home = None
    down = imaged.myriad("down", str(imaged.spec), "--yes", timeout=600)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "baked image(s)" in down.stdout
    left = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}",
         "--filter", f"reference=myriad-image-{imaged.name}-*"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    assert left == []
