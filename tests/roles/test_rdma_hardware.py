"""The rdma role's hardware step, run by Ansible on this machine against a built DGX H100 tree.

The role copies the node package (myriad-node.pyz, as `myriad bringup` writes it) to the
node and runs its hardware command there: it checks the node against the profile's
expectation (as `myriad render` writes it), records the map and writes the udev rule that
pins RDMA names. Here "the node" is this machine with every path under a temporary folder
and `rdma_sysfs` at the DGX H100 tree of tests/samples/sysfs-tree (NVIDIA's Table 6); what a
real node adds is its own /sys and udev applying the rule at boot (README, "Hardware").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import hardware_trees as trees
from myriad.node import artefact
from myriad.node.hardware.tree import materialise
from myriad.plan.ports import hardware_expectation

from spec_builder import cluster, gpu_profile

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests/samples/sysfs-tree/dgx-h100_table6_constructed.tree"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned files (needs root)"),
]


def expectation(**compute: Any) -> dict[str, Any]:
    profile = gpu_profile(server="DGX-H100")
    profile["nics"]["storage"] = {"model": "ConnectX-7", "count": 2}
    profile["nics"]["compute"].update(compute)
    loaded = cluster(profile=profile)
    return hardware_expectation(
        loaded.spec.profiles["node"], loaded.catalog, "infiniband", "profiles.node.nics"
    )


def run_role(
    tmp_path: Path,
    expected: dict[str, Any],
    tree: str | None = None,
    nccl: dict[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    sysfs = tmp_path / "sys"
    if not sysfs.exists():
        materialise(tree or TREE.read_text(), str(sysfs))
    variables = {
        "rdma_hardware_expectation": expected,
        "rdma_node_artefact": str(artefact.write(tmp_path / "state" / artefact.NAME)),
        "rdma_node_install_dir": str(tmp_path / "usr/local/lib/myriad"),
        "__rdma_hardware_earlier_copy": str(tmp_path / "opt/myriad/lib/myriad"),
        "rdma_hardware_record_path": str(tmp_path / "etc/myriad/hardware.json"),
        "rdma_udev_rules_dir": str(tmp_path / "etc/udev/rules.d"),
        "rdma_sysfs": str(sysfs),
        "ansible_python_interpreter": sys.executable,
    }
    tasks: list[dict[str, Any]] = [
        {
            "name": "Run the hardware step",
            "ansible.builtin.include_role": {"name": "rdma", "tasks_from": "hardware"},
        }
    ]
    if nccl is not None:
        variables.update(nccl)
        tasks.append(
            {"name": "Run the nccl role", "ansible.builtin.include_role": {"name": "nccl"}}
        )
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": tasks,
                }
            ]
        )
    )
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"@{tmp_path / 'vars.json'}",
            str(playbook),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
        cwd=tmp_path,
    )


def test_the_role_records_table_6_and_pins_the_names(tmp_path: Path) -> None:
    # What an earlier release copied file by file: gone once the one artefact is in place.
    earlier = tmp_path / "opt/myriad/lib/myriad/node/hardware"
    earlier.mkdir(parents=True)
    (earlier / "discover.py").write_text("# an earlier release's copy\n")
    result = run_role(tmp_path, expectation())
    assert result.returncode == 0, result.stdout[-3000:]
    installed = tmp_path / "usr/local/lib/myriad" / artefact.NAME
    assert installed.read_bytes() == artefact.build()
    assert not (tmp_path / "opt/myriad/lib/myriad").exists()
    record = json.loads((tmp_path / "etc/myriad/hardware.json").read_text())
    assert [a["rdma_device"] for a in record["assignment"]["compute"]] == [
        "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"
    ]  # fmt: skip
    rules = (tmp_path / "etc/udev/rules.d/60-rdma-persistent-naming.rules").read_text()
    assert 'KERNELS=="0000:c0:00.0", PROGRAM="rdma_rename %k NAME_FIXED mlx5_9"' in rules
    # A second run changes nothing.
    again = run_role(tmp_path, expectation())
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-3000:]


def test_the_old_mapping_stops_the_role_before_anything_is_written(tmp_path: Path) -> None:
    result = run_role(tmp_path, expectation(devices=[f"mlx5_{i}" for i in range(8)]))
    assert result.returncode != 0
    assert "profiles.node.nics.compute.devices[1] names mlx5_1" in result.stdout
    assert "which shares no PCIe switch with a GPU" in result.stdout
    assert not (tmp_path / "etc/myriad/hardware.json").exists()
    assert not (tmp_path / "etc/udev/rules.d/60-rdma-persistent-naming.rules").exists()


def test_a_node_rdma_core_already_renamed_is_judged_by_its_pinned_names(tmp_path: Path) -> None:
    # After a reboot under rdma-core's own rule the devices are ibp24s0f0, ...: the role
    # checks and records the names the pinning rule gives them (Table 6's), not those.
    renamed = trees.renamed_by_rdma_core(trees.dgx_h100()).text()
    result = run_role(tmp_path, expectation(), renamed)
    assert result.returncode == 0, result.stdout[-3000:]
    record = json.loads((tmp_path / "etc/myriad/hardware.json").read_text())
    devices = {p["bdf"]: p["rdma_device"] for p in record["ports"]}
    assert (devices["0000:18:00.0"], devices["0000:c0:00.0"]) == ("mlx5_0", "mlx5_9")


def test_nccl_writes_the_topology_discovery_found(tmp_path: Path) -> None:
    expected = expectation()
    nccl = {
        "nccl_topology_from_map": True,
        "nccl_node_install_dir": str(tmp_path / "usr/local/lib/myriad"),
        "nccl_hardware_expectation_file": str(tmp_path / "etc/myriad/hardware-expected.json"),
        "nccl_hardware_sysfs": str(tmp_path / "sys"),
        "nccl_conf_path": str(tmp_path / "etc/nccl.conf"),
        "nccl_topology_path": str(tmp_path / "etc/nccl/topo.xml"),
        "nccl_enroot_mounts_dir": str(tmp_path / "etc/enroot/mounts.d"),
        "nccl_cdi_dir": str(tmp_path / "etc/cdi"),
        "nccl_hcas": [
            {"name": d, "port": 1, "rail": i} for i, d in enumerate(expected["compute"]["devices"])
        ],
    }
    result = run_role(tmp_path, expected, nccl=nccl)
    assert result.returncode == 0, result.stdout[-4000:]
    topo = (tmp_path / "etc/nccl/topo.xml").read_text()
    # GPU 5 and its HCA mlx5_9 under their switch (Table 6), on CPU 1, PCIe Gen5 links.
    switch = topo.index('<pci busid="0000:be:00.0" class="0x060400" link_speed="32.0 GT/s PCIe"')
    block = topo[switch : topo.index("</pci>\n    <pci", switch)]
    assert '<pci busid="0000:c3:00.0" class="0x030200"' in block
    assert '<gpu dev="5" sm="90" rank="5"/>' in block
    assert '<net name="mlx5_9" speed="400000" port="1" guid="0xa088c20300ddc000"/>' in block
    assert topo.count("<gpu ") == 8 and topo.count("<net ") == 8
    assert (
        "NCCL_TOPO_FILE=" + str(tmp_path / "etc/nccl/topo.xml")
        in (tmp_path / "etc/nccl.conf").read_text()
    )
