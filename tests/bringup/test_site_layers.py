"""The site playbook's first play puts each node in the groups of the layers it needs.

That play lives in playbooks/layers.yml, which site.yml and image.yml both import first.
It runs that play for real (ansible-playbook, no node is contacted: group_by works on the
controller's inventory) on inventories rendered from the examples, and reads the groups back.
A layer play targets only its group, so a wrong group means a node skips a layer it needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.render.writer import write_inventory
from myriad.spec import load_spec_text

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"
LAYERS = ROOT / "playbooks" / "layers.yml"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def layer_groups(spec_text: str, tmp_path: Path) -> dict[str, list[str]]:
    done = run_sort_play(spec_text, tmp_path, tables=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "groups.json"
    return {name: sorted(hosts) for name, hosts in json.loads(out.read_text()).items()}


def run_sort_play(
    spec_text: str, tmp_path: Path, *, tables: bool
) -> subprocess.CompletedProcess[str]:
    """The first play of site.yml on the rendered spec, with the tables file or without."""
    result = plan_loaded(load_spec_text(spec_text))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    write_inventory(inventory, tmp_path / "inventory")
    sort_play = yaml.safe_load(LAYERS.read_text())[0]
    assert sort_play["name"] == "Sort the nodes by the layers they need"
    # Facts would need the nodes; the layers come from inventory variables only.
    sort_play = {**sort_play, "gather_facts": False}
    out = tmp_path / "groups.json"
    report = {
        "name": "Write the groups",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Write the layer groups",
                "ansible.builtin.copy": {
                    "content": "{{ groups | dict2items | selectattr('key', 'match', "
                    "'myriad_layer_') | items2dict | to_json }}",
                    "dest": str(out),
                    "mode": "0600",
                },
            }
        ],
    }
    playbook = tmp_path / "layers.yml"
    playbook.write_text(yaml.safe_dump([sort_play, report], sort_keys=False))
    # As the runner does: the cluster-wide tables as an extra-vars file.
    extra = ["-e", f"@{tmp_path / 'inventory' / 'cluster_tables.yml'}"] if tables else []
    return subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(tmp_path / "inventory" / "hosts.yml"),
            *extra,
            str(playbook),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"ANSIBLE_NOCOLOR": "1", "PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin"},
    )


def example(name: str, **replace: str) -> str:
    text = (ROOT / "inventories" / name / "cluster.yaml").read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


@pytest.mark.slow
def test_local_cluster_nodes_need_only_slurm(tmp_path: Path) -> None:
    groups = layer_groups(example("local"), tmp_path)
    everyone = ["ctl01", "node01", "node02", "node03"]
    # The health play itself narrows to compute nodes (hosts: compute:&myriad_layer_health).
    assert groups == {
        "myriad_layer_slurm": everyone,
        "myriad_layer_monitoring": everyone,
        "myriad_layer_health": everyone,
    }


@pytest.mark.slow
def test_infiniband_cluster_layers(tmp_path: Path) -> None:
    groups = layer_groups(example("starter-64"), tmp_path)
    gpus = [f"gpu{i:02d}" for i in range(1, 9)]
    everyone = sorted(groups["myriad_layer_slurm"])
    assert set(gpus) < set(everyone)
    assert groups["myriad_layer_gpu"] == gpus
    # Every node of an InfiniBand fabric runs the infiniband role (it turns stray OpenSMs off);
    # the RDMA stack goes where NCCL uses HCAs.
    assert groups["myriad_layer_infiniband"] == everyone
    assert groups["myriad_layer_rdma"] == gpus
    assert groups["myriad_layer_storage_net"] == everyone
    assert "myriad_layer_roce" not in groups
    assert "myriad_layer_kubernetes" not in groups


@pytest.mark.slow
def test_roce_cluster_layers(tmp_path: Path) -> None:
    spec = example(
        "roce-10k",
        **{
            "{name: ctl, profile: cpu-server, count: 3, role: controller}": (
                "{name: ctl, profile: cpu-server, count: 1, role: controller}"
            ),
            "{name: login, profile: cpu-server, count: 4, role: login}": (
                "{name: login, profile: cpu-server, count: 1, role: login}"
            ),
            "count: 1250, role: compute": "count: 3, role: compute",
        },
    )
    groups = layer_groups(spec, tmp_path)
    gpus = groups["myriad_layer_gpu"]
    assert len(gpus) == 3
    assert groups["myriad_layer_roce"] == gpus
    assert groups["myriad_layer_rdma"] == gpus
    assert "myriad_layer_infiniband" not in groups
    assert len(groups["myriad_layer_slurm"]) == 5


def test_site_and_image_playbooks_sort_first() -> None:
    """Both playbooks start with the shared sorting play (a layer play needs its group)."""
    for name in ("site.yml", "image.yml"):
        first = yaml.safe_load((ROOT / "playbooks" / name).read_text())[0]
        assert first["ansible.builtin.import_playbook"] == "layers.yml", name


@pytest.mark.slow
def test_a_run_without_the_tables_file_stops_before_any_layer(tmp_path: Path) -> None:
    """By hand, `ansible-playbook -i inv/hosts.yml site.yml` without `-e @inv/cluster_tables.yml`
    would converge every node with empty host and Slurm tables; the first play refuses."""
    done = run_sort_play(example("local"), tmp_path, tables=False)
    assert done.returncode != 0
    tables = tmp_path / "inventory" / "cluster_tables.yml"
    assert f"run ansible-playbook with -e @{tables}" in " ".join(done.stdout.split())
    # Stopped in the first task: no node was sorted into a layer, the report play never ran.
    assert "Put each node in the groups of its layers" not in done.stdout
    assert not (tmp_path / "groups.json").exists()
