"""Slurm's topology/block from the plan's NVLink domains: one block per NVL72 rack.

What Slurm 23.11 accepts, read in SchedMD's source at tag slurm-23-11-4-1 (the Slurm of
Ubuntu 24.04, src/myriad/catalog/os.yaml): topology.conf(5) gives `BlockName=` with `Nodes=`
(a hostlist) and an optional `BlockLevels=`, and no `BlockSizes=` (that came with 24.05);
src/plugins/topology/block/topology_block.c stops slurmctld on a block name given twice, a
node it does not know, and blocks of unequal node count ("children count no equal
bblock_node_cnt"). The role's template is rendered here with Jinja2 and the role's own
hostlist filter, from the inventory Myriad renders. Last, the rendered blocks are loaded into
a real slurmctld, Debian 13's 24.11 (the newest Debian packages; the twin's Debian 12 has
22.05, without topology/block), and jobs submitted to it land inside one rack each.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.render.tables import TABLE_VARIABLES
from tool_gate import unavailable

from spec_builder import example_text, load_example

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "slurm"


def _hostlist() -> Any:
    spec = importlib.util.spec_from_file_location(
        "slurm_hostlist_plugin", ROLE / "filter_plugins" / "slurm_hostlist.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["slurm_hostlist"]


def _variables(environment: str) -> dict[str, Any]:
    result = plan_loaded(load_example(environment))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    return {**inventory.group_vars["all"], **inventory.tables}


def topology_conf(variables: dict[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"), undefined=jinja2.StrictUndefined
    )
    env.filters["slurm_hostlist"] = _hostlist()
    # The role's defaults under what the inventory sets, as Ansible layers them.
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    topology = {k: v for k, v in defaults.items() if k.startswith("slurm_topology_")}
    return env.get_template("topology.conf.j2").render(**{**topology, **variables})


def _lines(conf: str) -> list[str]:
    return [line for line in conf.splitlines() if line and not line.startswith("#")]


def test_one_rack_is_one_block_of_its_18_trays() -> None:
    variables = _variables("gb200-nvl72")
    assert variables["slurm_topology_plugin"] == "topology/block"
    assert variables["slurm_topology_switches"] == []
    # 18 trays gpu01..gpu18 (the pool's names are padded to 2 digits): one NVLink domain.
    assert _lines(topology_conf(variables)) == ["BlockName=nvl01 Nodes=gpu[01-18]"]


def test_eight_racks_are_eight_equal_blocks_in_host_order() -> None:
    variables = _variables("gb300-nvl72-8")
    # 144 trays gpu001..gpu144, 18 to a rack: block n holds trays 18(n-1)+1 .. 18n.
    assert _lines(topology_conf(variables)) == [
        f"BlockName=nvl{n:02d} Nodes=gpu[{18 * (n - 1) + 1:03d}-{18 * n:03d}]" for n in range(1, 9)
    ]
    assert "slurm_topology_blocks" in TABLE_VARIABLES  # one entry per rack: a cluster table


def test_no_parameter_that_slurm_23_11_lacks() -> None:
    conf = topology_conf(_variables("gb300-nvl72-8"))
    for line in _lines(conf):
        keys = {word.split("=", 1)[0] for word in line.split()}
        assert keys == {"BlockName", "Nodes"}, line


def test_hgx_clusters_keep_the_switch_tree() -> None:
    variables = _variables("starter-64")
    assert variables.get("slurm_topology_plugin", "topology/tree") == "topology/tree"
    assert "slurm_topology_blocks" not in variables or not variables["slurm_topology_blocks"]
    assert _lines(topology_conf(variables))[0].startswith("SwitchName=")


@pytest.mark.parametrize("orchestrator", ["kubernetes"])
def test_no_blocks_without_slurm(orchestrator: str) -> None:
    from myriad.spec import load_spec_text

    text = example_text("gb200-nvl72").replace(
        "orchestrator: slurm", f"orchestrator: {orchestrator}"
    )
    text = text.replace("container_runtime: docker", "container_runtime: containerd")
    text = text.replace("  slurm:\n    no_containers: true\n", "")
    result = plan_loaded(load_spec_text(text, "cluster.yaml"))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    assert (
        "slurm_topology_blocks" not in inventory.tables
        or not inventory.tables["slurm_topology_blocks"]
    )


def test_servers_beside_the_racks_keep_the_switch_tree() -> None:
    from myriad.spec import load_spec_text

    text = example_text("gb200-nvl72").replace(
        "  - {name: gpu, profile: gb200-tray, count: 18, role: compute}\n",
        "  - {name: gpu, profile: gb200-tray, count: 18, role: compute}\n"
        "  - {name: hgx, profile: head, count: 2, role: compute}\n",
    )
    result = plan_loaded(load_spec_text(text, "cluster.yaml"))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    # 18 trays and 2 other nodes cannot be blocks of one size: the tree places all 20.
    assert inventory.tables["slurm_topology_blocks"] == []
    assert "slurm_topology_plugin" not in inventory.group_vars["all"]
    placed = [n for s in inventory.tables["slurm_topology_switches"] for n in s.get("nodes", [])]
    assert sorted(placed) == [f"gpu{i:02d}" for i in range(1, 19)] + ["hgx01", "hgx02"]


# Debian 13's slurmctld (24.11), unpacked by scripts/bootstrap (scripts/slurm-tree): the
# twin's Debian 12 ships 22.05, which has no topology/block, so its own slurmctld cannot load
# the blocks. Ubuntu 24.04's 23.11 is not packaged for Debian; its parser is read above.
SLURM_TREE = ROOT / ".venv" / "opt" / "slurm-24.11"
CONTROLLER = "myriad-blocks"
# The jobs submitted, in nodes, in order: each fits in one rack of 18 trays, and the second
# no longer fits beside the first.
JOBS = (10, 10, 4, 18, 12)

# Runs in new mount, UTS and PID namespaces (unshare), so every mount and the daemon end with
# it: the tree's /etc/slurm is this run's folder, its state and /run are empty tmpfs.
_SESSION = f"""set -eu
tree=$1 conf=$2; shift 2
mount --make-rprivate /
mount --rbind /dev "$tree/dev"
mount -t proc proc "$tree/proc"
mount --bind "$conf" "$tree/etc/slurm"
mount -t tmpfs tmpfs "$tree/var/lib/slurm/slurmctld"
mount -t tmpfs tmpfs "$tree/run"
hostname {CONTROLLER}
in_tree() {{ chroot "$tree" "$@"; }}
in_tree /usr/sbin/slurmctld -D -i >"$conf/slurmctld.log" 2>&1 &
tries=0
until in_tree /usr/bin/sinfo -h >/dev/null 2>&1; do
    tries=$((tries + 1)); [ "$tries" -lt 100 ] || {{ cat "$conf/slurmctld.log" >&2; exit 1; }}
    sleep 0.2
done
in_tree /usr/bin/scontrol show topology
for nodes in "$@"; do in_tree /usr/bin/sbatch -Q -N "$nodes" --wrap true; done
tries=0
while in_tree /usr/bin/squeue -h -t PENDING -o %i | grep -q .; do
    tries=$((tries + 1)); [ "$tries" -lt 100 ] || {{ in_tree /usr/bin/squeue >&2; exit 1; }}
    sleep 0.2
done
for job in $(in_tree /usr/bin/squeue -h -o %i | sort -n); do
    nodes=$(in_tree /usr/bin/squeue -h -j "$job" -o %N)
    echo "job $job: $(in_tree /usr/bin/scontrol show hostnames "$nodes" | tr '\\n' ' ')"
done
"""


def _slurmctld(
    tmp_path: Path, variables: dict[str, Any], plugin: str, jobs: tuple[int, ...]
) -> tuple[str, list[list[str]]]:
    """`scontrol show topology` of slurmctld 24.11 started on the rendered topology.conf,
    and the nodes each job got. The trays are power-saving cloud nodes: slurmctld allocates
    them as it would booted ones, and no slurmd is needed for a job to be placed."""
    conf = tmp_path / "etc-slurm"
    conf.mkdir(parents=True)
    (conf / "topology.conf").write_text(topology_conf(variables))
    key = conf / "slurm.key"
    key.write_bytes(os.urandom(64))
    key.chmod(0o600)
    power = conf / "power"
    power.write_text("#!/bin/sh\nexit 0\n")
    power.chmod(0o755)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nodes = [name for entry in variables["slurm_nodes"] for name in entry["names"]]
    (conf / "slurm.conf").write_text(
        f"ClusterName=blocks\nSlurmctldHost={CONTROLLER}(127.0.0.1)\n"
        f"SlurmctldPort={port}\nSlurmdPort={port + 1}\n"
        "AuthType=auth/slurm\nCredType=cred/slurm\nSlurmUser=root\n"
        "StateSaveLocation=/var/lib/slurm/slurmctld\nSlurmctldPidFile=/run/slurmctld.pid\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMailProg=/etc/slurm/power\n"
        f"TopologyPlugin={plugin}\n"
        "SuspendProgram=/etc/slurm/power\nResumeProgram=/etc/slurm/power\n"
        "SuspendTime=600\nResumeTimeout=600\n"
        f"NodeName={','.join(nodes)} NodeAddr=127.0.0.1 CPUs=4 State=CLOUD\n"
        "PartitionName=gpu Nodes=ALL Default=YES\n"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child",
         "sh", "-c", _SESSION, "session", str(SLURM_TREE), str(conf), *map(str, jobs)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown = [line for line in done.stdout.splitlines() if not line.startswith("job ")]
    placed = [
        line.split(": ", 1)[1].split()
        for line in done.stdout.splitlines()
        if line.startswith("job ")
    ]
    return "\n".join(shown), placed


@pytest.mark.slow
def test_slurmctld_loads_the_blocks_and_keeps_each_job_inside_one_rack(tmp_path: Path) -> None:
    if not SLURM_TREE.is_dir() or os.geteuid() != 0:
        # chroot, unshare and its mounts need root, as scripts/bootstrap does.
        unavailable(f"needs root and the Slurm 24.11 tree at {SLURM_TREE} (scripts/bootstrap)")
    variables = _variables("gb300-nvl72-8")
    racks = {b["name"]: set(b["nodes"]) for b in variables["slurm_topology_blocks"]}
    shown, placed = _slurmctld(tmp_path, variables, variables["slurm_topology_plugin"], JOBS)
    # slurmctld read each rendered block whole: 8 racks of 18 trays.
    for n in range(1, 9):
        first, last = 18 * (n - 1) + 1, 18 * n
        assert (
            f"BlockName=nvl{n:02d} BlockIndex={n - 1} Nodes=gpu[{first:03d}-{last:03d}] "
            "BlockSize=18"
        ) in shown.splitlines(), shown
    assert [len(nodes) for nodes in placed] == list(JOBS)
    for nodes in placed:
        assert any(set(nodes) <= rack for rack in racks.values()), (nodes, shown)

    # The README's account of this test names these jobs.
    sizes = ", ".join(map(str, JOBS[:-1])) + f" and {JOBS[-1]}"
    assert f"jobs of {sizes} nodes" in " ".join((ROOT / "README.md").read_text().split())

    # The control: without the blocks, slurmctld packs the second job across two racks.
    _, flat = _slurmctld(tmp_path / "flat", variables, "topology/default", JOBS)
    straddling = [n for n in flat if not any(set(n) <= rack for rack in racks.values())]
    assert straddling, flat
