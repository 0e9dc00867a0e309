"""Expectations: the right checks apply where the spec makes them meaningful, with values
from the spec, the catalog and the inventory (worked out by hand below from the example
specs and the catalog); /etc/nccl.conf is exactly what the role writes. Expected values are
plain JSON data: the node health runner reads them back from a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.node.checks import BY_ID, CHECKS, Expectation, NodeExpectations
from myriad.node.checks.nccl import SOCKET_PLACEHOLDER, nccl_conf
from myriad.plan.pipeline import PlanResult, plan_loaded
from myriad.render.inventory import Inventory, build_inventory
from myriad.validate.expectations import expect, load_role_defaults, node_variables

from spec_builder import load_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["local", "starter-64", "roce-10k", "h100-100k", "aws-dev"]


def planned(example: str) -> tuple[PlanResult, Inventory]:
    result = plan_loaded(load_example(example))
    assert result.plan is not None
    spec, catalog = result.loaded.spec, result.loaded.catalog
    return result, build_inventory(spec, catalog, result.plan)


def node_expectations(example: str, node: str) -> dict[str, Expectation]:
    result, inventory = planned(example)
    assert result.plan is not None
    cluster = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    return {e.check: e for e in cluster.node(node).expectations}


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_node_has_every_check_once_with_a_spec_field_and_a_fix(example: str) -> None:
    result, inventory = planned(example)
    assert result.plan is not None
    cluster = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    assert [n.node for n in cluster.nodes] == list(inventory.hosts)
    seen: set[int] = set()
    for node in cluster.nodes:
        checks = [e.check for e in node.expectations]
        assert checks == [c.id for c in CHECKS if not c.per_node] + [
            c.id for c in CHECKS if c.per_node
        ], node.node
        for exp in node.expectations:
            if id(exp) in seen:
                continue
            seen.add(id(exp))
            assert exp.check in BY_ID
            # Plain data: what a node reads back from its expectation file is the same.
            assert json.loads(json.dumps(exp.to_dict())) == exp.to_dict()
            assert Expectation.from_dict(json.loads(json.dumps(exp.to_dict()))) == exp
            assert exp.spec_field
            if exp.applies:
                assert exp.fix, (node.node, exp.check)
            else:
                assert exp.reason, (node.node, exp.check)


def _applies(exps: dict[str, Expectation]) -> set[str]:
    return {check for check, e in exps.items() if e.applies}


def test_local_cpu_only_nodes_get_no_gpu_or_fabric_checks_and_say_why() -> None:
    compute = node_expectations("local", "node02")
    controller = node_expectations("local", "ctl01")
    assert compute["gpu.count"].reason == "profile container has no GPUs"
    assert compute["hca.present"].reason == "profile container has no compute NICs"
    assert compute["roce.pfc"].reason == "fabric is not RoCE"
    assert compute["storage.mount"].reason == "storage.kind is none"
    assert "local containers" in compute["time.synchronised"].reason
    assert _applies(compute) == {
        "host.name",
        "hosts.file",
        "time.sync",
        "limits.memlock",
        "limits.memlock-session",
        "runtime.engine",
        "nccl.conf",
        "slurm.munge",
        "slurm.slurmd",
        "slurm.node-state",
        "slurm.topology",
        "slurm.munge-key",
        "slurm.config-files",
        "slurm.job",
        # The example turns node health on, and its section names the paths to keep free.
        "disk.space",
    }
    assert compute["slurm.config-files"].expected == [
        "/etc/slurm/slurm.conf",
        "/etc/slurm/cgroup.conf",
        "/etc/slurm/gres.conf",
        "/etc/slurm/topology.conf",
    ]
    assert _applies(controller) == {
        "host.name",
        "hosts.file",
        "time.sync",
        "limits.memlock",
        "limits.memlock-session",
        "runtime.engine",
        "slurm.munge",
        "slurm.slurmctld",
        "slurm.munge-key",
        "slurm.config-files",
        "disk.space",
    }
    assert controller["nccl.conf"].reason == "the nccl role configures compute nodes only"


def test_local_values_come_from_the_inventory_the_roles_were_given() -> None:
    _, inventory = planned("local")
    exps = node_expectations("local", "node02")
    hosts = [[h["address"], [h["name"]]] for h in inventory.tables["common_hosts"]]
    assert exps["hosts.file"].expected["entries"] == hosts
    # Byte for byte what roles/common/templates/hosts-block.j2 writes (checked live too).
    assert exps["hosts.file"].expected["text"] == (
        "172.31.77.10    ctl01\n172.31.77.11    node01\n"
        "172.31.77.12    node02\n172.31.77.13    node03"
    )
    switches = inventory.tables["slurm_topology_switches"]
    assert exps["slurm.topology"].expected == switches[0]["name"] == "is00-su01"
    assert exps["host.name"].expected == "node02"
    assert exps["time.sync"].expected == "chrony"
    assert exps["limits.memlock-session"].expected == {"value": "unlimited", "container": True}
    assert exps["runtime.engine"].expected == "docker"
    assert exps["nccl.conf"].expected == (
        "# Managed by Ansible (role nccl): local changes are overwritten.\n"
        "# NCCL defaults for every job on this node; a job's own environment overrides them.\n"
        "NCCL_IB_DISABLE=1\n"
        f"NCCL_SOCKET_IFNAME={SOCKET_PLACEHOLDER}\n"
    )


def test_a_roce_gpu_node_expects_its_hardware_and_fabric_settings() -> None:
    # inventories/roce-10k: a800-node = 8 x A800-SXM4-80GB (catalog: 80 GB, 8 NVLink links,
    # PCIe Gen4 x16), PCIe Gen4, 6 NVSwitches; 4 ConnectX-6 compute ports (200 Gb/s, Gen4
    # x16 slots) named mlx5_0-3 / rail0-3, 2 storage ports mlx5_4-5 in Gen4 x8 slots,
    # bonded 802.3ad at 25 Gb/s; DSCP 26 -> priority 3, CNP 48 -> 6.
    exps = node_expectations("roce-10k", "gpu0001")
    devices = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    rails = ["rail0", "rail1", "rail2", "rail3"]
    assert exps["gpu.count"].expected == 8
    assert exps["gpu.count"].spec_field == "profiles.a800-node.gpu.count"
    assert exps["gpu.model"].expected == {"model": "A800-SXM4-80GB", "token": "a800", "pcie": False}
    assert exps["gpu.memory"].expected == 80
    # The example's driver (a branch: every 5xx.y.z of it matches).
    driver = load_example("roce-10k").spec.software.nvidia_driver
    assert exps["gpu.driver"].expected == {"branch": driver, "version": None}
    assert exps["gpu.fabricmanager"].expected == "nvidia-fabricmanager"
    assert exps["gpu.nvlink"].expected == 8  # the A800's NVLink, cut to 8 links
    assert exps["gpu.pcie"].expected == {"gen": 4, "width": 16}
    # DMA-BUF with the open kernel modules (the role's default): no nvidia_peermem expected.
    assert not exps["gpudirect.peermem"].applies
    assert "DMA-BUF" in exps["gpudirect.peermem"].reason
    assert exps["hca.present"].expected == devices
    assert exps["hca.rate"].expected == {"names": devices, "value": 200}
    assert exps["hca.link-layer"].expected == {"names": devices, "value": "Ethernet"}
    x16, x8 = {"gen": 4, "width": 16}, {"gen": 4, "width": 8}
    assert exps["nic.pcie"].expected == [
        *([d, x16] for d in devices),
        ["mlx5_4", x8],
        ["mlx5_5", x8],
    ]
    assert exps["roce.trust"].expected == {"names": rails, "value": "dscp"}
    assert exps["roce.pfc"].expected == {"names": rails, "value": 3}
    assert exps["roce.dscp"].expected == {"names": rails, "value": [[26, 3], [48, 6]]}
    assert exps["roce.mtu"].expected == {"names": rails, "value": 9000}
    assert exps["bond.mode"].expected == {
        "name": "bond0",
        "mode": "802.3ad",
        "slaves": ["stor0", "stor1"],
        "speed_mbps": 25000,
        "mtu": 9000,
    }
    assert exps["storage.mount"].expected == {
        "path": "/ckpt",
        "kind": "nfs",
        "fstypes": ["nfs", "nfs4"],
        "source": "10.16.0.2:/srv/ckpt",
    }
    assert exps["runtime.nvidia"].expected == {"engine": "docker", "default": True}
    assert exps["slurm.gres"].expected == [{"name": "gpu", "type": "a800", "count": 8}]
    assert _applies(exps).isdisjoint({"k8s.kubelet", "k8s.node-ready", "k8s.gpu-allocatable"})
    conf = exps["nccl.conf"].expected
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1\n" in conf
    assert "NCCL_IB_TC=104\n" in conf and "NCCL_CROSS_NIC=0\n" in conf
    assert "NCCL_IB_QPS_PER_CONNECTION=4\n" in conf and "NCCL_NET_GDR_LEVEL=PXB\n" in conf


def test_controllers_of_a_gpu_cluster_get_the_bond_but_no_gpu_or_nccl_checks() -> None:
    exps = node_expectations("roce-10k", "ctl01")
    assert exps["bond.slaves"].applies and exps["slurm.slurmctld"].applies
    assert not exps["gpu.count"].applies and not exps["nccl.conf"].applies
    assert not exps["hca.present"].applies and not exps["roce.trust"].applies
    assert exps["runtime.nvidia"].reason == "profile cpu-server has no GPUs"


def test_kubernetes_clusters_check_the_api_not_slurm() -> None:
    exps = node_expectations("h100-100k", "gpu00001")
    assert exps["k8s.gpu-allocatable"].expected == 8
    assert exps["k8s.node-ready"].applies and exps["k8s.kubelet"].applies
    assert not exps["slurm.node-state"].applies
    assert exps["slurm.munge"].reason == "the orchestrator is kubernetes"
    assert exps["runtime.nvidia"].expected == {"engine": "containerd", "default": True}
    assert exps["storage.mount"].expected["source"] == "10.32.0.2@tcp:/scratch"
    assert exps["hca.rate"].expected["value"] == 400
    assert exps["gpu.nvlink"].expected == 18
    login = node_expectations("h100-100k", "login01")
    assert (
        login["k8s.node-ready"].reason == "the kubernetes role runs on controller and compute nodes"
    )


def test_infiniband_link_layer_and_service_level() -> None:
    exps = node_expectations("starter-64", "gpu01")
    assert exps["hca.link-layer"].expected["value"] == "InfiniBand"
    assert exps["roce.trust"].reason == "fabric is not RoCE"
    assert "NCCL_IB_SL=0\n" in exps["nccl.conf"].expected


def test_expectations_for_12500_nodes_are_shared() -> None:
    # How fast: benchmarks/validate_scale.py ("expectations (spec → nodes)"), not a timed test.
    result, inventory = planned("h100-100k")
    assert result.plan is not None
    cluster = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    gpu_nodes = [n for n in cluster.nodes if n.pool == "gpu"]
    assert len(gpu_nodes) == 12500
    # One tuple of shared expectations for the whole pool, not one per node.
    assert len({id(n.shared) for n in gpu_nodes}) == 1
    # Only the checks declared per node (host name, Slurm switch, ...) are the node's own.
    assert {len(n.own) for n in gpu_nodes} == {sum(c.per_node for c in CHECKS)}


def test_node_variables_merge_host_group_all_and_role_defaults_in_ansible_order() -> None:
    inventory = Inventory(
        cluster="c",
        groups={"pool_a": ["n1"], "pool_b": ["n1"], "compute": ["n1"]},
        group_vars={
            "all": {"x": "all", "y": "all", "z": "all"},
            "pool_a": {"x": "a", "y": "a"},
            "pool_b": {"x": "b"},
        },
        host_vars={"n1": {"w": "host"}},
        tables={"t": "tables"},
    )
    merged = node_variables(inventory, "n1", {"x": "default", "v": "default", "t": "default"})
    assert (merged["w"], merged["x"], merged["y"], merged["z"], merged["v"], merged["t"]) == (
        "host",
        "b",
        "a",
        "all",
        "default",
        "tables",
    )


# --- /etc/nccl.conf against the nccl role itself ---------------------------------------------


def _nccl_inputs(example: str, node: str) -> dict[str, Any]:
    """The nccl_* variables the inventory gives the node (role defaults left to the role)."""
    _, inventory = planned(example)
    merged = node_variables(inventory, node, {})
    # The role looks the management address up on the node; on this machine no interface
    # holds it, so the role is run without it and writes its fallback, ^docker,lo.
    return {k: merged[k] for k in merged if k.startswith("nccl_") and k != "nccl_socket_address"}


HAND_MADE: dict[str, dict[str, Any]] = {
    # HCAs without rails keep their order; a null override removes a derived key; the
    # layout puts one NIC on the CPU's root complex, so GDR is derived as PHB.
    "ib_layout": {
        "nccl_fabric": "infiniband",
        "nccl_ib_sl": 1,
        "nccl_hcas": [{"name": "mlx5_1"}, {"name": "mlx5_0", "port": 2}],
        "nccl_socket_ifname": "=eth0",
        "nccl_rail_optimized": True,
        "nccl_conf_overrides": {"NCCL_CROSS_NIC": None, "NCCL_IB_TIMEOUT": "22"},
        "nccl_topology": {
            "pcie_gen": 5,
            "cpus": [
                {
                    "numa_id": 0,
                    "pcie_switches": [
                        {
                            "busid": "0000:15:00.0",
                            "gpus": [{"busid": "0000:18:00.0", "dev": 0, "sm": 90}],
                            "nics": [{"busid": "0000:17:00.0", "name": "mlx5_1"}],
                        }
                    ],
                    "nics": [{"busid": "0000:20:00.0", "name": "mlx5_0"}],
                }
            ],
        },
    },
    # RoCE with rails given out of order, QPs above 1, an explicit GDR level and a bool.
    "roce_rails": {
        "nccl_fabric": "roce",
        "nccl_hcas": [
            {"name": "mlx5_3", "rail": 1},
            {"name": "mlx5_10", "rail": 0},
        ],
        "nccl_roce_gid_index": 5,
        "nccl_roce_dscp": 34,
        "nccl_ib_qps_per_connection": 8,
        "nccl_net_gdr_level": "SYS",
        "nccl_conf_overrides": {"NCCL_DEBUG": "WARN"},
    },
}


def _role_outputs(cases: dict[str, dict[str, Any]], tmp: Path) -> dict[str, str]:
    """Run roles/nccl on this machine, one inventory host per case, writing into `tmp`."""
    hosts = {}
    for name, variables in cases.items():
        hosts[name] = {
            **variables,
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "nccl_conf_path": str(tmp / f"{name}.conf"),
            "nccl_topology_path": str(tmp / f"{name}-topo.xml"),
        }
    inventory = tmp / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    playbook = tmp / "nccl.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Render the NCCL files",
                    "hosts": "all",
                    "gather_facts": False,
                    "roles": ["nccl"],
                }
            ]
        )
    )
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "false",
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            str(inventory),
            str(playbook),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return {name: (tmp / f"{name}.conf").read_text() for name in cases}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the nccl role writes its files owned by root")
def test_expected_nccl_conf_is_byte_for_byte_what_the_nccl_role_writes(tmp_path: Path) -> None:
    cases = {
        "local": _nccl_inputs("local", "node01"),
        "starter": _nccl_inputs("starter-64", "gpu01"),
        "roce10k": _nccl_inputs("roce-10k", "gpu0001"),
        "h100k": _nccl_inputs("h100-100k", "gpu00001"),
        "aws": _nccl_inputs("aws-dev", next(iter(planned("aws-dev")[1].groups["compute"]))),
        **HAND_MADE,
    }
    defaults = load_role_defaults()
    written = _role_outputs(cases, tmp_path)
    for name, variables in cases.items():
        topology = {"nccl_topology_path": str(tmp_path / f"{name}-topo.xml")}
        expected = nccl_conf({**defaults, **variables, **topology})
        if "nccl_socket_ifname" not in variables:
            expected = expected.replace(SOCKET_PLACEHOLDER, "^docker,lo")
        assert expected == written[name], name
    # The hand-made cases really exercise what they say.
    assert "NCCL_IB_HCA==mlx5_1:1,mlx5_0:2\n" in written["ib_layout"]
    assert "NCCL_NET_GDR_LEVEL=PHB\n" in written["ib_layout"]
    assert "NCCL_CROSS_NIC" not in written["ib_layout"]
    assert "NCCL_IB_HCA==mlx5_10:1,mlx5_3:1\n" in written["roce_rails"]
    assert "NCCL_IB_TC=136\n" in written["roce_rails"]


def test_pool_expectations_do_not_depend_on_which_node_is_asked() -> None:
    result, inventory = planned("roce-10k")
    assert result.plan is not None
    cluster = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    first, last = cluster.node("gpu0001"), cluster.node("gpu1250")
    assert isinstance(first, NodeExpectations)
    # Per node: its name, its Slurm switch, its rail addresses, the GIDs they give and its
    # leaf's gateway on each rail.
    own = ("host.name", "slurm.topology", "roce.address", "roce.gid_index", "roce.route")
    shared = [e for e in first.expectations if e.check not in own]
    assert shared == [e for e in last.expectations if e.check not in own]
    switch = {e.check: e for e in last.expectations}["slurm.topology"].expected
    members = {s["name"]: s.get("nodes", []) for s in inventory.tables["slurm_topology_switches"]}
    assert "gpu1250" in members[switch]


def _with_nvlink_fabric(example: str, node: str, fabric: str | None) -> dict[str, Expectation]:
    """A node's expectations with the GPU pool's nvidia_driver_nvlink_fabric set as the
    renderer will for platforms the catalog does not name yet (NVL72 trays, HGX B200)."""
    result, inventory = planned(example)
    assert result.plan is not None
    if fabric is not None:
        group_vars = {
            group: {**values, "nvidia_driver_nvlink_fabric": fabric}
            if "nvidia_driver_nvlink_fabric" in values
            else values
            for group, values in inventory.group_vars.items()
        }
        inventory = replace(inventory, group_vars=group_vars)
    cluster = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    return {e.check: e for e in cluster.node(node).expectations}


def test_the_nvlink_fabric_software_decides_the_fabric_checks() -> None:
    # roce-10k's a800-node has 6 NVSwitches: the renderer says fabricmanager.
    plain = _with_nvlink_fabric("roce-10k", "gpu0001", None)
    assert plain["gpu.fabricmanager"].expected == "nvidia-fabricmanager"
    for check in ("gpu.fabric-state", "gpu.imex-service", "gpu.imex-domain"):
        assert not plain[check].applies, check
    assert "nvidia_driver_nvlink_fabric: fabricmanager" in plain["gpu.fabric-state"].reason
    # Fourth-generation NVSwitch (HGX B200/B300): Fabric Manager, and the GPUs' registration
    # with the fabric, which has no domain beyond the board.
    nvlsm = _with_nvlink_fabric("roce-10k", "gpu0001", "fabricmanager-nvlsm")
    assert nvlsm["gpu.fabricmanager"].expected == "nvidia-fabricmanager"
    assert nvlsm["gpu.fabric-state"].expected == {"domain": False}
    assert not nvlsm["gpu.imex-domain"].applies
    # An NVL72 compute tray: IMEX and one NVLink domain, no host Fabric Manager.
    tray = _with_nvlink_fabric("roce-10k", "gpu0001", "imex")
    assert not tray["gpu.fabricmanager"].applies
    assert tray["gpu.fabric-state"].expected == {"domain": True}
    assert tray["gpu.fabric-state"].spec_field == "profiles.a800-node.gpu.model"
    assert tray["gpu.imex-service"].expected == "nvidia-imex"
    assert tray["gpu.imex-domain"].expected == "UP"
    assert "nvidia-imex-ctl -N" in tray["gpu.imex-domain"].fix


def test_a_gb200_tray_of_the_example_expects_its_domain_and_no_fabric_manager() -> None:
    # inventories/gb200-nvl72: 18 GB200-NVL72-tray nodes, one rack, one NVLink domain; the
    # renderer gives them nvidia_driver_nvlink_fabric: imex.
    exps = node_expectations("gb200-nvl72", "gpu01")
    assert exps["gpu.fabric-state"].expected == {"domain": True}
    assert exps["gpu.fabric-state"].spec_field == "profiles.gb200-tray.gpu.model"
    assert exps["gpu.imex-service"].expected == "nvidia-imex"
    assert exps["gpu.imex-domain"].expected == "UP"
    assert not exps["gpu.fabricmanager"].applies
