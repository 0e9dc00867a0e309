"""Slurm's topology.conf from the discovered fabric, and where its tree differs from the
planned switch tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from ibsim_fabric import discovered_without_sim, planned, swap
from myriad.cli import main
from myriad.plan.fabric import iter_switch_tree
from myriad.plan.ibnet import links_from_cables
from myriad.plan.pipeline import plan_spec
from myriad.validate.fabric_topology import discovered_tree, topology_conf, tree_differences

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
FAT_TREE = ROOT / "tests" / "fabric" / "fat-tree-512.yaml"
MISWIRED = ROOT / "tests" / "fabric" / "starter-64-miswired.ibnetdiscover"


def _planned_tree(path: Path) -> list:
    loaded = plan_spec(path).loaded
    return list(iter_switch_tree(loaded.spec, loaded.catalog))


def test_the_fat_tree_as_built_is_the_planned_tree() -> None:
    cables, _ = planned(FAT_TREE)
    found = discovered_tree(discovered_without_sim(links_from_cables(cables)))
    assert [s.tier for s in found].count("leaf") == 26
    assert [s.tier for s in found].count("spine") == 13
    assert tree_differences(_planned_tree(FAT_TREE), found) == []
    conf = topology_conf(found)
    # 512 endpoints, 20 per leaf, 8 per node: leaf 1 holds gpu01-gpu03 (slots 0-19).
    assert "SwitchName=is00-leaf001 Nodes=gpu01,gpu02,gpu03\n" in conf
    assert conf.count("SwitchName=is00-spine") == 13


def test_a_node_cable_on_another_leaf_shows_in_the_tree() -> None:
    # Cable 1 (gpu01 mlx5_0, leaf 1) and cable 512 (gpu64 mlx5_7, leaf 26) swap leaf ports.
    cables, _ = planned(FAT_TREE)
    found = discovered_tree(discovered_without_sim(swap(links_from_cables(cables), 0, 511)))
    assert tree_differences(_planned_tree(FAT_TREE), found) == [
        "is00-leaf001: nodes missing -; not planned gpu64",
        "is00-leaf026: nodes missing -; not planned gpu01",
    ]


def test_validate_writes_topology_conf_and_names_the_intruder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "topology.conf"
    args = ["validate", str(STARTER), "--fabric", "--from", str(MISWIRED), "--speed-cap", "HDR"]
    assert main([*args, "--topology-conf", str(out)]) == 1
    assert out.read_text().splitlines()[1] == (
        "SwitchName=is00-leaf001 Nodes=gpu01,gpu02,gpu03,gpu04,gpu05,gpu06,gpu07,gpu08,intruder"
    )
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "is00-leaf001: nodes missing -; not planned intruder"
