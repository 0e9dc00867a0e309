"""Slurm's topology/block from the plan's NVLink domains: one block per NVL72 rack.

What Slurm 23.11 accepts, read in SchedMD's source at tag slurm-23-11-4-1 (the Slurm of
Ubuntu 24.04, src/myriad/catalog/os.yaml): topology.conf(5) gives `BlockName=` with `Nodes=`
(a hostlist) and an optional `BlockLevels=`, and no `BlockSizes=` (that came with 24.05);
src/plugins/topology/block/topology_block.c stops slurmctld on a block name given twice, a
node it does not know, and blocks of unequal node count ("children count no equal
bblock_node_cnt"). The role's template is rendered here with Jinja2 and the role's own
hostlist filter, from the inventory Myriad renders.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.render.tables import TABLE_VARIABLES

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
