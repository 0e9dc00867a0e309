"""Two DOCA steps of the rdma role, run by Ansible on this machine with stand-ins for the node.

- The driver reload: the kernel's in-tree mlx5_core has no MODULE_VERSION, so
  /sys/module/mlx5_core/version is absent exactly when the inbox driver runs; the old check
  read that file and never fired when moving from inbox to DOCA. The role now compares the
  loaded module's srcversion with that of the file modprobe would load (`modinfo`), here a
  stub printing what modinfo prints for DOCA's DKMS build (updates/dkms/mlx5_core.ko).
- Secure Boot before DOCA's DKMS modules: the UEFI SecureBoot variable, here a file.
A real node adds the real modinfo, /sys/module and efivarfs (README, "Real-hardware readiness").
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

ROOT = Path(__file__).resolve().parents[2]
DOCA_FILE = "/lib/modules/6.8.0-45-generic/updates/dkms/mlx5_core.ko"
INBOX_FILE = (
    "/lib/modules/6.8.0-45-generic/kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.zst"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned files (needs root)"),
]


def run(
    tmp_path: Path, tasks_from: str, variables: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "play.yml"
    task = {
        "name": "Run one step",
        "ansible.builtin.include_role": {"name": "rdma", "tasks_from": tasks_from},
    }
    playbook.write_text(
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}])
    )
    (tmp_path / "vars.json").write_text(
        json.dumps({**variables, "ansible_python_interpreter": sys.executable})
    )
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    }
    return subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local",
         "-e", f"@{tmp_path / 'vars.json'}", str(playbook)],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip


def reload_with(tmp_path: Path, installed: str, srcversion: str, loaded: str | None) -> Path:
    """The reload step with `none` (mark, do not act); returns the reboot marker's path."""
    (tmp_path / "bin").mkdir()
    modinfo = tmp_path / "bin/modinfo"
    modinfo.write_text(
        "#!/bin/sh\n"
        f'case "$2" in filename) echo {installed};; srcversion) echo {srcversion};; esac\n'
    )
    modinfo.chmod(0o755)
    module = tmp_path / "sys/module/mlx5_core"
    module.mkdir(parents=True)
    if loaded is not None:
        (module / "srcversion").write_text(loaded + "\n")
    marker = tmp_path / "reboot-required"
    result = run(
        tmp_path,
        "doca_reload",
        {
            "rdma_doca_driver_reload": "none",
            "__rdma_mlx5_sysfs": str(module),
            "__rdma_reboot_required_file": str(marker),
        },
    )
    assert result.returncode == 0, result.stdout[-3000:]
    return marker


def test_the_inbox_driver_still_loaded_after_doca_is_installed_is_seen(tmp_path: Path) -> None:
    # In-tree mlx5_core loaded: no version file (and here no srcversion either).
    assert reload_with(tmp_path, DOCA_FILE, "1A2B3C4D5E6F7A8B9C0D1E2", None).exists()


def test_an_in_tree_module_with_a_srcversion_is_not_taken_for_docas(tmp_path: Path) -> None:
    assert reload_with(
        tmp_path, DOCA_FILE, "1A2B3C4D5E6F7A8B9C0D1E2", "FFEEDDCCBBAA998877665544"
    ).exists()


def test_docas_module_already_loaded_needs_nothing(tmp_path: Path) -> None:
    assert not reload_with(
        tmp_path, DOCA_FILE, "1A2B3C4D5E6F7A8B9C0D1E2", "1A2B3C4D5E6F7A8B9C0D1E2"
    ).exists()


def test_the_inbox_stack_needs_no_reload(tmp_path: Path) -> None:
    assert not reload_with(tmp_path, INBOX_FILE, "0011223344556677889900A", None).exists()


@pytest.mark.parametrize(
    ("efivar", "enrolled", "refused"),
    [
        (b"\x06\x00\x00\x00\x01", False, True),
        (b"\x06\x00\x00\x00\x01", True, False),
        (b"\x06\x00\x00\x00\x00", False, False),
        (None, False, False),  # legacy BIOS boot: no variable at all
    ],
)
def test_secure_boot_is_checked_before_docas_dkms_modules(
    tmp_path: Path, efivar: bytes | None, enrolled: bool, refused: bool
) -> None:
    variable = tmp_path / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    if efivar is not None:
        variable.write_bytes(efivar)
    (tmp_path / "bin").mkdir()
    result = run(
        tmp_path,
        "secure_boot",
        {
            "__rdma_secure_boot_efivar": str(variable),
            "__rdma_dkms_mok": "/var/lib/dkms/mok.pub",
            "rdma_secure_boot_mok_enrolled": enrolled,
        },
    )
    assert (result.returncode != 0) == refused, result.stdout[-3000:]
    if refused:
        assert "mokutil --import /var/lib/dkms/mok.pub" in result.stdout
        assert "without its ConnectX" in result.stdout
