"""playbooks/image.yml for real: the local example's profile baked into a throwaway container.

The local example has one profile (`container`) for its controller pool and its compute pool,
so its build host is in both parts' groups and gets the union: munge, slurmctld and slurmd,
chrony, Docker, the node exporter, and Prometheus (the controller hosts the monitoring
server). The build inventory is written here the way `myriad image build` describes it: one
host, image-build, in every group of the profile's nodes, with one node's host variables per
pool, over the group variables `myriad render` writes. The image must hold no munge key and
no cluster configuration.

Then a node started from such an image gets the cluster's key from a file delivered to it
(slurm_munge_key_file), as it does when it converges itself and cannot reach the key host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.provision.local import SYSTEMD_RUN_OPTIONS
from myriad.provision.node_image import IMAGE_TAG
from myriad.render.inventory import build_inventory
from myriad.render.writer import write_inventory
from myriad.spec import load_spec_text

from run_names import unique_name

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
# The groups a node of the local example's one profile belongs to (hosts.yml of the render).
BUILD_GROUPS = ["controller", "compute", "pool_ctl", "pool_node", "island_00", "monitoring_server"]
SEED_KEY = "/var/lib/myriad/seed/munge.key"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=300, check=check
    )


def in_node(container: str, script: str) -> str:
    return docker("exec", container, "sh", "-c", script).stdout.strip()


def build_inventory_for(container: str, folder: Path) -> Path:
    """The rendered group variables and a hand-written build host, as `myriad image build`."""
    result = plan_loaded(load_spec_text((ROOT / "inventories/local/cluster.yaml").read_text()))
    assert result.plan is not None
    write_inventory(build_inventory(result.loaded.spec, result.loaded.catalog, result.plan), folder)
    rendered = yaml.safe_load((folder / "hosts.yml").read_text())["all"]["children"]
    assert sorted(rendered) == sorted(BUILD_GROUPS), "the local example's groups changed"
    hosts = {"all": {"children": {g: {"hosts": {"image-build": None}} for g in BUILD_GROUPS}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump(hosts))
    node_vars = {}
    for path in sorted((folder / "host_vars").iterdir()):
        if path.stem in ("ctl01", "node01"):
            node_vars.update(yaml.safe_load(path.read_text()))
        path.unlink()
    node_vars.update(myriad_image_build=True, ansible_connection="docker", ansible_host=container)
    (folder / "host_vars" / "image-build.yml").write_text(yaml.safe_dump(node_vars))
    return folder / "hosts.yml"


def play(inventory: Path, playbook: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook), *extra],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={
            **os.environ,
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{ANSIBLE_PLAYBOOK.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )


def recap(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return done.stdout[done.stdout.index("PLAY RECAP") :]


@pytest.fixture(scope="module")
def image(
    docker_available: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A container from the node image after playbooks/image.yml: (container, inventory)."""
    container = unique_name("myriad-image")
    inventory = build_inventory_for(container, tmp_path_factory.mktemp("build"))
    docker("run", "-d", "--name", container, *SYSTEMD_RUN_OPTIONS, IMAGE_TAG)
    try:
        recap(play(inventory, ROOT / "playbooks" / "image.yml"))
        yield container, inventory
    finally:
        docker("rm", "-f", container, check=False)


def test_image_holds_every_part_of_the_profile(image: tuple[str, Path]) -> None:
    container, _ = image
    packages = [
        "munge", "slurm-client", "slurmctld", "slurmd", "chrony", "docker.io",
        "prometheus-node-exporter", "prometheus", "prometheus-alertmanager",
    ]  # fmt: skip
    status = in_node(
        container, "dpkg-query -W -f='${Package} ${db:Status-Status}\\n' " + " ".join(packages)
    )
    assert sorted(status.splitlines()) == sorted(f"{p} installed" for p in packages)
    held = in_node(container, "apt-mark showhold").split()
    assert {"munge", "slurm-client", "slurmctld", "slurmd", "docker.io"} <= set(held)
    # Cluster-wide files without a node in them are baked in.
    assert in_node(container, "cat /etc/security/limits.d/90-myriad.conf").count("memlock") == 2
    assert '"storage-driver": "vfs"' in in_node(container, "cat /etc/docker/daemon.json")
    assert in_node(container, "test -x /usr/local/sbin/myriad-slurm-metrics && echo yes") == "yes"


def test_image_leaves_each_part_s_daemons_to_the_node(image: tuple[str, Path]) -> None:
    """The image serves the controller and the compute nodes: neither's daemons start at boot."""
    container, _ = image
    units = ["slurmctld", "slurmd", "prometheus", "prometheus-alertmanager"]
    enabled = in_node(container, f"systemctl is-enabled {' '.join(units)}; true").split()
    assert enabled == ["disabled"] * len(units)
    # What every node of the profile runs stays on.
    assert in_node(container, "systemctl is-enabled prometheus-node-exporter") == "enabled"


def test_image_holds_no_key_and_no_cluster_configuration(image: tuple[str, Path]) -> None:
    container, _ = image
    absent = "/etc/munge/munge.key /etc/slurm/slurm.conf /etc/prometheus/targets/node.json"
    assert in_node(container, f"for f in {absent}; do test -e $f && echo $f; done; true") == ""
    assert "MYRIAD MANAGED BLOCK" not in in_node(container, "cat /etc/hosts")
    assert "172.31.77.10" not in in_node(container, "cat /etc/chrony/chrony.conf")


def test_a_node_takes_the_munge_key_delivered_to_it(
    image: tuple[str, Path], tmp_path: Path
) -> None:
    container, inventory = image
    in_node(
        container,
        f"mkdir -p {Path(SEED_KEY).parent} && "
        f"dd if=/dev/urandom of={SEED_KEY} bs=1024 count=1 status=none && chmod 0400 {SEED_KEY}",
    )
    playbook = tmp_path / "munge.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Install the munge key the node was given",
                    "hosts": "all",
                    "gather_facts": True,
                    "tasks": [
                        {
                            "name": "Run the slurm role's munge tasks",
                            "ansible.builtin.include_role": {
                                "name": "slurm",
                                "tasks_from": "munge",
                            },
                        }
                    ],
                }
            ]
        )
    )
    first = recap(play(inventory, playbook, "-e", f"slurm_munge_key_file={SEED_KEY}"))
    assert "changed=0" not in first
    sums = in_node(container, f"sha256sum < {SEED_KEY}; sha256sum < /etc/munge/munge.key")
    assert len(set(sums.splitlines())) == 1, sums
    assert (
        in_node(container, "stat -c '%a %U %G %s' /etc/munge/munge.key") == "400 munge munge 1024"
    )
    assert in_node(container, "systemctl is-active munge") == "active"
    assert "STATUS:          Success (0)" in in_node(container, "munge -n | unmunge")
    # The same key again: nothing changes, munge is not restarted.
    assert "changed=0" in recap(play(inventory, playbook, "-e", f"slurm_munge_key_file={SEED_KEY}"))
