"""Ports and rail addresses in the rendered inventory: what the netnames, roce and nccl roles
get, so that every name they use is one something creates and every rail has an address."""

from __future__ import annotations

import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.plan.ports import hardware_expectation, ports, ports_to_name
from myriad.render.inventory import Inventory, build_inventory
from myriad.spec import load_spec_text

from spec_builder import ROOT, cluster, gpu_profile, load_example


def inventory_of(name: str) -> Inventory:
    result = plan_loaded(load_example(name))
    assert result.plan is not None
    return build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)


def test_every_made_up_port_name_is_one_the_netnames_role_creates() -> None:
    inventory = inventory_of("roce-10k")
    gpu = inventory.group_vars["pool_gpu"]
    # Compute ports first (mlx5_0..3), then the two ports of the storage card (mlx5_4, 5).
    assert gpu["netnames_ports"] == [
        {"name": "rail0", "device": "mlx5_0"},
        {"name": "rail1", "device": "mlx5_1"},
        {"name": "rail2", "device": "mlx5_2"},
        {"name": "rail3", "device": "mlx5_3"},
        {"name": "stor0", "device": "mlx5_4"},
        {"name": "stor1", "device": "mlx5_5"},
    ]
    named = {p["name"] for p in gpu["netnames_ports"]}
    assert {nic["netdev"] for nic in gpu["roce_nics"]} <= named
    assert set(gpu["storage_net_bond_interfaces"]) <= named
    assert {h["netdev"] for h in gpu["nccl_hcas"]} <= named
    # The controllers have only the storage card, its ports are mlx5_0 and mlx5_1 there.
    assert inventory.group_vars["pool_ctl"]["netnames_ports"] == [
        {"name": "stor0", "device": "mlx5_0"},
        {"name": "stor1", "device": "mlx5_1"},
    ]


def test_rails_get_one_address_per_leaf_subnet_with_the_leaf_as_gateway() -> None:
    inventory = inventory_of("roce-10k")
    gpus = inventory.groups["pool_gpu"]
    first, island_1, last = (inventory.host_vars[gpus[i]] for i in (0, 128, 1249))
    # network.addressing.compute 10.64.0.0/18 cut into 4 rails of /20, each into a /24 per
    # leaf (one leaf per rail per island of 128); node i of a leaf is .10 + i, the leaf .1.
    assert first["roce_nics"] == [
        {
            "netdev": f"rail{rail}",
            "device": f"mlx5_{rail}",
            "address": f"10.64.{16 * rail}.10/24",
            "gateway": f"10.64.{16 * rail}.1",
            "rail_network": f"10.64.{16 * rail}.0/20",
        }
        for rail in range(4)
    ]
    assert first["myriad_leaves"][0] == "is00-leaf001"
    # Node 128 starts island 1: its leaf's subnet is the rail's second /24.
    assert island_1["myriad_leaves"][0] == "is01-leaf001"
    assert island_1["roce_nics"][0]["address"] == "10.64.1.10/24"
    assert island_1["roce_nics"][0]["gateway"] == "10.64.1.1"
    # Node 1250 (index 1249): island 9's 98th node, 10 + 97 = .107 of 10.64.(16 r + 9).0/24.
    assert [nic["address"] for nic in last["roce_nics"]] == [
        "10.64.9.107/24",
        "10.64.25.107/24",
        "10.64.41.107/24",
        "10.64.57.107/24",
    ]
    assert last["roce_nics"][3]["gateway"] == "10.64.57.1"
    addresses = [nic["address"] for host in gpus for nic in inventory.host_vars[host]["roce_nics"]]
    assert len(addresses) == len(set(addresses)) == 4 * 1250


def test_stretched_rails_get_one_subnet_per_rail_and_no_gateway() -> None:
    document = yaml.safe_load((ROOT / "inventories/roce-10k/cluster.yaml").read_text())
    document["network"]["addressing"]["rail_subnets"] = "stretched"
    result = plan_loaded(load_spec_text(yaml.safe_dump(document)))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    gpus = inventory.groups["pool_gpu"]
    first, last = inventory.host_vars[gpus[0]], inventory.host_vars[gpus[-1]]
    # 10.64.0.0/18 cut into 4 rails of /20; node i is .10 + i.
    assert first["roce_nics"] == [
        {"netdev": "rail0", "device": "mlx5_0", "address": "10.64.0.10/20"},
        {"netdev": "rail1", "device": "mlx5_1", "address": "10.64.16.10/20"},
        {"netdev": "rail2", "device": "mlx5_2", "address": "10.64.32.10/20"},
        {"netdev": "rail3", "device": "mlx5_3", "address": "10.64.48.10/20"},
    ]
    # Node 1250 (index 1249): 10 + 1249 = 1259 = 4 * 256 + 235.
    assert last["roce_nics"][0]["address"] == "10.64.4.235/20"


def test_nccl_names_the_management_interface_and_leaves_the_gid_to_nccl() -> None:
    inventory = inventory_of("roce-10k")
    host = inventory.groups["pool_gpu"][0]
    assert (
        inventory.host_vars[host]["nccl_socket_address"]
        == inventory.host_vars[host]["myriad_address"]
    )
    assert "nccl_roce_gid_index" not in inventory.group_vars["all"]
    # Controllers do not run the nccl role.
    assert "nccl_socket_address" not in inventory.host_vars[inventory.groups["controller"][0]]


def test_given_interface_names_and_ipoib_ports_are_not_renamed() -> None:
    profile = gpu_profile(nic="ConnectX-7", nics=2)
    loaded = cluster(
        profile=profile, fabric="roce", topology={"kind": "rail-optimized", "switch": "SN5600"}
    )
    shape = loaded.spec.profiles["node"]
    assert [p.interface for p in ports_to_name(shape, loaded.catalog, "roce")] == ["rail0", "rail1"]
    # IPoIB interfaces keep the kernel's names (ib0, ib1).
    assert ports_to_name(shape, loaded.catalog, "infiniband") == []
    profile["nics"]["compute"]["interfaces"] = ["ens1f0np0", "ens2f0np0"]
    given = cluster(
        profile=profile, fabric="roce", topology={"kind": "rail-optimized", "switch": "SN5600"}
    )
    assert ports_to_name(given.spec.profiles["node"], given.catalog, "roce") == []


def test_only_servers_get_ports_named() -> None:
    # The local cluster's containers and cloud instances have no NIC ports to name.
    for example in ("local", "aws-dev"):
        inventory = inventory_of(example)
        assert not any("netnames_ports" in values for values in inventory.group_vars.values())


def dgx_h100(**storage: object) -> dict[str, object]:
    profile = gpu_profile(server="DGX-H100")
    profile["nics"]["compute"]["model"] = "ConnectX-7"
    if storage:
        profile["nics"]["storage"] = storage
    return profile


def test_a_dgx_h100_gets_nvidias_table_6_names_not_mlx5_0_to_7() -> None:
    # DGX H100/H200 User Guide, Network Modules, Table 6 (the catalog's DGX-H100 port_map).
    loaded = cluster(profile=dgx_h100(model="ConnectX-7", count=2))
    shape = loaded.spec.profiles["node"]
    compute = ports(shape, loaded.catalog, "compute", "infiniband")
    assert [p.device for p in compute] == [
        "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"
    ]  # fmt: skip
    assert [p.device for p in ports(shape, loaded.catalog, "storage", "infiniband")] == [
        "mlx5_1",
        "mlx5_2",
    ]
    # Storage names the node's netnames role gets: stor0/stor1 on the slot 1 card, never an
    # HCA of the compute fabric (the old arithmetic gave stor1 mlx5_9, beside GPU 5).
    named = ports_to_name(shape, loaded.catalog, "infiniband")
    assert [(p.interface, p.device) for p in named] == [("stor0", "mlx5_1"), ("stor1", "mlx5_2")]


def test_the_spec_devices_override_the_vendor_map_and_other_servers_keep_enumeration() -> None:
    given = dgx_h100()
    given["nics"]["compute"]["devices"] = [f"ibp{i}" for i in range(8)]
    loaded = cluster(profile=given)
    shape = loaded.spec.profiles["node"]
    assert [p.device for p in ports(shape, loaded.catalog, "compute", "infiniband")] == [
        f"ibp{i}" for i in range(8)
    ]
    oem = cluster(profile=gpu_profile(server="HGX-H100-8GPU"))
    devices = [p.device for p in ports(oem.spec.profiles["node"], oem.catalog, "compute", "ib")]
    assert devices == [f"mlx5_{i}" for i in range(8)]


def test_the_node_expectation_carries_the_vendor_map_and_the_pci_names() -> None:
    loaded = cluster(profile=dgx_h100(model="ConnectX-7", count=2))
    expected = hardware_expectation(
        loaded.spec.profiles["node"], loaded.catalog, "infiniband", "profiles.node.nics"
    )
    assert expected["compute"] == {
        "beside_gpu": True,  # the profile has PCIe switches
        "model": "ConnectX-7",
        "count": 8,
        "speed_gbps": 400,
        "devices": ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10",
                    "mlx5_11"],
    }  # fmt: skip
    assert expected["storage"]["devices"] == ["mlx5_1", "mlx5_2"]
    assert expected["models"]["15b3:1021"] == "ConnectX-7"
    assert expected["models"]["10de:2330"] == "H100-SXM5-80GB"
    assert (expected["where"], expected["gpus"]) == ("profiles.node.nics", 8)


def test_an_oem_node_is_checked_against_the_names_the_roles_will_use() -> None:
    # No vendor table for HGX-H100-8GPU: the inventory uses the kernel's enumeration, and the
    # node must show those devices beside its GPUs before the firmware step touches them.
    loaded = cluster(profile=gpu_profile(server="HGX-H100-8GPU"))
    expected = hardware_expectation(
        loaded.spec.profiles["node"], loaded.catalog, "infiniband", "profiles.node.nics"
    )
    assert expected["compute"]["devices"] == [f"mlx5_{i}" for i in range(8)]
