"""The netnames role's helper (roles/netnames/files/myriad-netnames) against real interfaces:
veth pairs in a network namespace of their own (`unshare --net --mount`, a fresh sysfs), and
a stand-in class/infiniband tree laid out as the kernel lays it out. The renames are the
kernel's own (`ip link set name`); udev does not run in the namespace, so the helper takes
its fallback path, as in the hardware-in-a-box Molecule scenario."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "roles" / "netnames" / "files" / "myriad-netnames"
MAKE_SYSFS = ROOT / "roles" / "netnames" / "molecule" / "default" / "files" / "make-sysfs"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="needs root, unshare and ip to create interfaces in a namespace of its own",
)


def in_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    body = f"""
set -e
mount -t sysfs sysfs /sys
ip link add enp23s0f0np0 address b8:ce:f6:a1:17:00 type veth peer name swp1
ip link add enp58s0f0np0 address b8:ce:f6:a1:3a:00 type veth peer name swp2
ip link add enp161s0f0np0 address b8:ce:f6:b2:a1:00 type veth peer name swp3
ip link add enp161s0f1np1 address b8:ce:f6:b2:a1:01 type veth peer name swp4
ip link set dev swp2 up
ip link set dev enp58s0f0np0 up
{MAKE_SYSFS} {tmp_path}/sys
H="{HELPER} {tmp_path}/config.json"
{script}
"""
    return subprocess.run(
        ["unshare", "--net", "--mount", "bash", "-c", body],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def config(tmp_path: Path, ports: list[dict[str, str]], rename_up: bool = True) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "sysfs": str(tmp_path / "sys"),
                "record": str(tmp_path / "ports.json"),
                "rename_up": rename_up,
                "ports": ports,
            }
        )
    )


# What the role writes to netnames_record_path: the records of plan's answer.
RECORD = "import json, sys; print(json.dumps([p['record'] for p in json.load(sys.stdin)]))"

PORTS = [
    {"name": "rail0", "device": "mlx5_0"},
    {"name": "rail1", "device": "mlx5_1"},
    {"name": "stor0", "mac": "b8:ce:f6:b2:a1:00"},
    {"name": "stor1", "path": "pci-0000:a1:00.1"},
]


def test_plan_finds_each_port_by_device_and_mac_and_matches_it_at_boot(tmp_path: Path) -> None:
    config(tmp_path, PORTS[:3])
    result = in_namespace("$H plan", tmp_path)
    assert result.returncode == 0, result.stderr
    found = {p["name"]: p for p in json.loads(result.stdout)}
    assert found["rail0"]["current"] == "enp23s0f0np0"
    assert found["rail0"]["pending"] is True
    # A port found by its RDMA device is matched at boot by its PCI function.
    assert found["rail0"]["match"] == {"Path": "pci-0000:17:00.0"}
    assert found["rail0"]["record"] == {
        "name": "rail0",
        "device": "mlx5_0",
        "mac": "b8:ce:f6:a1:17:00",
        "pci": "0000:17:00.0",
    }
    # A port given by MAC keeps its MAC match.
    assert found["stor0"]["match"] == {"MACAddress": "b8:ce:f6:b2:a1:00"}
    assert found["stor0"]["current"] == "enp161s0f0np0"


def test_a_pci_path_no_interface_sits_at_is_refused(tmp_path: Path) -> None:
    # veths have no PCI device: nothing sits at pci-0000:a1:00.1 in the namespace.
    config(tmp_path, PORTS[3:])
    result = in_namespace("$H plan", tmp_path)
    assert result.returncode == 1
    assert "stor1: 0 interfaces sit at PCI 0000:a1:00.1" in result.stderr


def test_apply_renames_down_and_up_links_and_a_second_run_finds_them_settled(
    tmp_path: Path,
) -> None:
    ports = PORTS[:3]
    config(tmp_path, ports)
    result = in_namespace(
        # As the role does: record what plan found (before the rename), then rename.
        f"""$H plan | python3 -c "{RECORD}" > {tmp_path}/record.json
mv {tmp_path}/record.json {tmp_path}/ports.json
$H apply
$H check
$H apply
ip -br link | sort""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "renamed enp23s0f0np0 -> rail0 (ip link)" in lines
    assert "renamed enp58s0f0np0 -> rail1 (ip link, taken down and up again)" in lines
    assert "renamed enp161s0f0np0 -> stor0 (ip link)" in lines
    # The second apply renamed nothing: the record says the named ports are the same NICs.
    assert sum(line.startswith("renamed") for line in lines) == 3
    links = {line.split()[0].split("@")[0]: line.split() for line in lines if "@" in line}
    assert links["rail1"][1] in ("UP", "LOWERLAYERDOWN")
    assert links["rail0"][2] == "b8:ce:f6:a1:17:00"


def test_a_port_that_is_up_is_left_alone_when_renaming_up_links_is_off(tmp_path: Path) -> None:
    config(tmp_path, [{"name": "rail1", "device": "mlx5_1"}], rename_up=False)
    result = in_namespace("$H apply", tmp_path)
    assert result.returncode == 1
    assert "rail1: enp58s0f0np0 is up and netnames_rename_up_links is false" in result.stderr


def test_missing_and_ambiguous_ports_are_named_in_one_error(tmp_path: Path) -> None:
    config(
        tmp_path,
        [
            {"name": "rail9", "device": "mlx5_9"},
            {"name": "stor5", "mac": "00:11:22:33:44:55"},
        ],
    )
    result = in_namespace("$H check", tmp_path)
    assert result.returncode == 1
    assert "rail9: RDMA device mlx5_9 has 0 network interfaces" in result.stderr
    assert "stor5: 0 interfaces have MAC 00:11:22:33:44:55" in result.stderr


def test_a_storage_name_on_an_infiniband_port_is_refused_naming_the_device(tmp_path: Path) -> None:
    # What `stor1: mlx5_9` met on a DGX H100: mlx5_9 is a compute HCA in InfiniBand mode, so
    # its netdev is IPoIB (type 32, ARPHRD_INFINIBAND), and a bond member or rail name there
    # would be the wrong port. Here the veth behind mlx5_3 shows type 32 (a bind mount).
    config(tmp_path, [{"name": "stor1", "device": "mlx5_3"}])
    (tmp_path / "type").write_text("32\n")
    result = in_namespace(
        f"mount --bind {tmp_path}/type /sys/class/net/enp161s0f1np1/type\n$H plan", tmp_path
    )
    assert result.returncode == 1
    assert (
        "stor1: RDMA device mlx5_3 is an InfiniBand port (enp161s0f1np1 is IPoIB), not an "
        "Ethernet one" in result.stderr
    ), result.stderr
