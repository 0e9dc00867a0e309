"""netnames refuses installer-written netplan stanzas that would fight its renames.

Run with Ansible on this machine: the role's netplan_conflicts step, a temporary netplan
folder and the ports as the helper located them (current kernel name, new name, MAC).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCATED = [
    {"name": "rail0", "current": "enp23s0f0np0", "mac": "b8:ce:f6:a1:17:00"},
    {"name": "stor0", "current": "enp161s0f0np0", "mac": "b8:ce:f6:b2:a1:00"},
]

pytestmark = pytest.mark.slow


def run(tmp_path: Path, files: dict[str, object]) -> subprocess.CompletedProcess[str]:
    netplan = tmp_path / "netplan"
    netplan.mkdir()
    for name, content in files.items():
        (netplan / name).write_text(yaml.safe_dump(content))
    task = {
        "name": "Check the netplan files",
        "ansible.builtin.include_role": {"name": "netnames", "tasks_from": "netplan_conflicts"},
    }
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}])
    )
    (tmp_path / "vars.json").write_text(
        json.dumps(
            {
                "__netnames_located": LOCATED,
                "netnames_netplan_dir": str(netplan),
                "ansible_python_interpreter": sys.executable,
            }
        )
    )
    return subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c",
         "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip


def installer(ethernets: dict[str, object]) -> dict[str, object]:
    return {"network": {"version": 2, "ethernets": ethernets}}


def test_the_installers_stanzas_on_the_ports_stop_the_role(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        {
            # subiquity's file: the port under its kernel name, with DHCP.
            "00-installer-config.yaml": installer({"enp23s0f0np0": {"dhcp4": True}}),
            # cloud-init's: matched by MAC and renamed, as cloud-init writes it.
            "50-cloud-init.yaml": installer(
                {"ens2": {"match": {"macaddress": "B8:CE:F6:B2:A1:00"}, "set-name": "ens2"}}
            ),
        },
    )
    assert result.returncode != 0
    assert "00-installer-config.yaml: ethernets.enp23s0f0np0" in result.stdout
    assert "50-cloud-init.yaml: ethernets.ens2" in result.stdout
    assert "remove them from those files" in result.stdout


def test_other_interfaces_and_myriads_own_file_are_left_alone(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        {
            "00-installer-config.yaml": installer({"eno1": {"dhcp4": True}}),
            "60-myriad-rails.yaml": installer({"rail0": {"addresses": ["10.64.0.11/20"]}}),
            "01-empty.yaml": None,
        },
    )
    assert result.returncode == 0, result.stdout[-3000:]
