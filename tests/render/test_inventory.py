"""`myriad render`: the inventory the roles read, built from the example specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from myriad.cli import main
from myriad.plan.machines import StackNode
from myriad.plan.pipeline import plan_loaded
from myriad.render import writer
from myriad.render.inventory import Inventory, build_inventory
from myriad.spec import load_spec_text

from spec_builder import load_example

ROOT = Path(__file__).resolve().parents[2]


def inventory_of(name: str, **kwargs: object) -> Inventory:
    result = plan_loaded(load_example(name))
    assert result.plan is not None
    return build_inventory(result.loaded.spec, result.loaded.catalog, result.plan, **kwargs)


def test_local_groups_connection_and_slurm_nodes() -> None:
    inventory = inventory_of("local")
    assert inventory.groups["controller"] == ["ctl01"]
    assert inventory.groups["compute"] == ["node01", "node02", "node03"]
    assert inventory.groups["island_00"] == ["node01", "node02", "node03"]
    node = inventory.host_vars["node01"]
    # Local containers are reached through Docker, named after the cluster and the node.
    assert node["ansible_connection"] == "docker"
    assert node["ansible_host"] == "local-node01"
    # Management addresses start at .10 of the spec's network, in node order.
    everything = inventory.group_vars["all"]
    assert inventory.tables["common_hosts"][:2] == [
        {"name": "ctl01", "address": "172.31.77.10"},
        {"name": "node01", "address": "172.31.77.11"},
    ]
    [node_set] = inventory.tables["slurm_nodes"]
    # 2 GiB x 1024 x 0.95 = 1945 MiB: a little under what slurmd measures.
    assert node_set == {
        "names": ["node01", "node02", "node03"],
        "sockets": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "real_memory": 1945,
    }
    assert everything["slurm_controllers"] == [{"name": "ctl01", "address": "172.31.77.10"}]
    assert everything["container_runtime_enroot_enabled"] is False  # no GPUs, no Pyxis


def test_rail_order_hcas_roce_nics_and_storage_bond_for_the_a800_cluster() -> None:
    inventory = inventory_of("roce-10k")
    pool = inventory.group_vars["pool_gpu"]
    assert [(h["name"], h["rail"]) for h in pool["nccl_hcas"]] == [
        ("mlx5_0", 0),
        ("mlx5_1", 1),
        ("mlx5_2", 2),
        ("mlx5_3", 3),
    ]
    assert pool["roce_nics"][0] == {"netdev": "rail0", "device": "mlx5_0"}
    # One dual-port ConnectX-6 Lx, bonded: two ports, named after the compute NICs' devices.
    assert pool["storage_net_bond_interfaces"] == ["stor0", "stor1"]
    assert pool["storage_net_bond_mode"] == "802.3ad"
    assert pool["nccl_net_gdr_level"] == "PXB"
    everything = inventory.group_vars["all"]
    assert (everything["roce_dscp"], everything["roce_priority"]) == (26, 3)
    # No GID index: NCCL 2.21+ picks the RoCEv2 GID of the rail address itself.
    assert "nccl_roce_gid_index" not in everything
    assert everything["nccl_conf_overrides"] == {"NCCL_IB_QPS_PER_CONNECTION": "4"}
    assert len(inventory.host_vars) == 1257
    last = inventory.host_vars["gpu1250"]
    # 1,250 nodes in islands of 128: node 1250 (index 1249) is in island 9.
    assert last["myriad_island"] == 9
    assert last["storage_net_address"].endswith("/20")


def test_slurm_topology_is_a_strict_tree_of_units_islands_and_core() -> None:
    switches = inventory_of("roce-10k").tables["slurm_topology_switches"]
    by_name = {s["name"]: s for s in switches}
    units = [s for s in switches if "nodes" in s]
    # SN5600-200G: 128 downlinks per leaf, islands of 128 nodes: one unit per island.
    assert len(units) == 10
    assert by_name["is00-su01"]["nodes"][:2] == ["gpu0001", "gpu0002"]
    assert len(by_name["is00-su01"]["nodes"]) == 128
    assert len(by_name["is09-su01"]["nodes"]) == 1250 - 9 * 128
    assert by_name["core"]["switches"] == [f"is{i:02d}" for i in range(10)]
    every_node = [n for s in units for n in s["nodes"]]
    assert len(every_node) == len(set(every_node)) == 1250


def test_subnet_managers_only_where_the_spec_names_them() -> None:
    # starter-64 leaves the subnet manager to its switches: no node runs OpenSM.
    hosts = inventory_of("starter-64").host_vars
    assert not [h for h, v in hosts.items() if v.get("infiniband_opensm_enabled")]
    text = (ROOT / "inventories" / "starter-64" / "cluster.yaml").read_text()
    text = text.replace(
        "subnet_manager: switch", "subnet_manager: opensm\n    sm_nodes: [gpu01, gpu05]"
    )
    result = plan_loaded(load_spec_text(text))
    assert result.plan is not None
    opensm = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan).host_vars
    enabled = [h for h, v in opensm.items() if v.get("infiniband_opensm_enabled")]
    assert enabled == ["gpu01", "gpu05"]


def test_addresses_from_the_stack_win(tmp_path: Path) -> None:
    machine = StackNode(
        name="node02",
        address="192.0.2.50",
        pool="node",
        role="compute",
        island=0,
        provider="local",
    )
    inventory = inventory_of("local", machines=[machine])
    assert inventory.host_vars["node02"]["myriad_address"] == "192.0.2.50"
    assert inventory.host_vars["node03"]["myriad_address"] == "172.31.77.13"


def test_render_writes_an_inventory_ansible_can_read(tmp_path: Path) -> None:
    out = tmp_path / "inv"
    assert (
        main(["render", str(ROOT / "inventories/starter-64/cluster.yaml"), "--out", str(out)]) == 0
    )
    hosts = yaml.safe_load((out / "hosts.yml").read_text())
    assert set(hosts["all"]["children"]["compute"]["hosts"]) == {f"gpu0{i}" for i in range(1, 9)}
    host = json.loads((out / "host_vars" / "gpu01.json").read_text())
    assert host["ansible_host"] == "10.10.0.13"
    assert (out / "group_vars" / "pool_gpu.yml").is_file()
    listed = __import__("subprocess").run(
        [
            str(Path(__import__("sys").executable).parent / "ansible-inventory"),
            "-i",
            str(out / "hosts.yml"),
            "--host",
            "gpu01",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    resolved = json.loads(listed.stdout)
    assert resolved["nccl_hcas"][7]["name"] == "mlx5_7"
    # The cluster-wide tables reach no host through the inventory (cluster_tables.yml).
    assert "common_hosts" not in resolved
    assert resolved["myriad_cluster_tables_file"] == "cluster_tables.yml"
    assert resolved["myriad_cluster"] == "starter-64"


def test_a_failed_write_leaves_the_old_inventory_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "inv"
    spec = str(ROOT / "inventories/local/cluster.yaml")
    assert main(["render", spec, "--out", str(out)]) == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*"))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(writer, "_write_vars", broken)
    with pytest.raises(OSError, match="disk full"):
        main(["render", spec, "--out", str(out)])
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["inv"]


def test_a_spec_with_lint_errors_is_not_rendered(tmp_path: Path) -> None:
    spec = tmp_path / "hot.yaml"
    spec.write_text(
        (ROOT / "inventories/starter-64/cluster.yaml")
        .read_text()
        .replace("rack_kw: 25", "rack_kw: 8")
    )
    assert main(["render", str(spec), "--out", str(tmp_path / "inv")]) == 1
    assert not (tmp_path / "inv").exists()
