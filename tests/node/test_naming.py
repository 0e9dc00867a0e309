"""RDMA names pinned by PCI address: the rule file, and real udev parsing it.

The packaged rule this file replaces was read in Debian 12's rdma-core 44.0-2 (`apt-get
download rdma-core`, `dpkg-deb -x`): /lib/udev/rules.d/60-rdma-persistent-naming.rules runs
`rdma_rename %k NAME_FALLBACK` on "add", and the postinst only triggers "change" events.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import hardware_trees as trees
from myriad.node.hardware.discover import discover
from myriad.node.hardware.naming import kernel_names, udev_rules
from myriad.node.hardware.sysfs import Sysfs
from myriad.node.hardware.tree import materialise
from tool_gate import unavailable

TABLE6 = {
    "0000:18:00.0": "mlx5_0",
    "0000:40:00.0": "mlx5_3",
    "0000:4f:00.0": "mlx5_4",
    "0000:5e:00.0": "mlx5_5",
    "0000:9a:00.0": "mlx5_6",
    "0000:c0:00.0": "mlx5_9",
    "0000:ce:00.0": "mlx5_10",
    "0000:dc:00.0": "mlx5_11",
}


def rules_of(tmp_path: Path, tree: trees.Tree) -> str:
    materialise(tree.text(), str(tmp_path / "sys"))
    return udev_rules(kernel_names(discover(Sysfs(str(tmp_path / "sys")))))


def test_the_dgx_devices_are_pinned_to_table_6_names_by_pci_address(tmp_path: Path) -> None:
    rules = rules_of(tmp_path, trees.dgx_h100())
    pinned = [line for line in rules.splitlines() if not line.startswith("#")]
    assert len(pinned) == 12
    for bdf, name in TABLE6.items():
        line = (
            f'ACTION=="add", SUBSYSTEM=="infiniband", KERNELS=="{bdf}", '
            f'PROGRAM="rdma_rename %k NAME_FIXED {name}"'
        )
        assert line in pinned


def test_a_node_already_renamed_by_rdma_core_gets_the_same_rules(tmp_path: Path) -> None:
    # After the first reboot with the inbox rule: mlx5_0 is ibp24s0 and so on. The pins come
    # from PCI order, not from the current names, so the rules (and NCCL's list) stay.
    renamed = trees.renamed_by_rdma_core(trees.dgx_h100())
    assert rules_of(tmp_path / "a", renamed) == rules_of(tmp_path / "b", trees.dgx_h100())


# scripts/bootstrap unpacks Debian's udev package there (installing it would start udevd).
UNPACKED_UDEVADM = Path(__file__).resolve().parents[2] / ".venv/opt/udev/bin/udevadm"


def _udevadm() -> str | None:
    for found in (
        os.environ.get("MYRIAD_UDEVADM"),
        shutil.which("udevadm"),
        str(UNPACKED_UDEVADM) if UNPACKED_UDEVADM.is_file() else None,
    ):
        if found:
            return found
    return None


def test_real_udev_reads_the_rules_without_an_error(tmp_path: Path) -> None:
    """udevadm test parses every rules file and names each bad line (udev 252: no `verify`)."""
    udevadm = _udevadm()
    missing = ("udevadm" if udevadm is None else "root" if os.geteuid() != 0 else None) or (
        "unshare" if shutil.which("unshare") is None else None
    )
    if missing is not None:
        unavailable(f"needs {missing} (scripts/bootstrap unpacks Debian's udev for udevadm)")
    rules_dir = tmp_path / "rules.d"
    rules_dir.mkdir()
    (rules_dir / "60-rdma-persistent-naming.rules").write_text(rules_of(tmp_path, trees.dgx_h100()))
    # The check can fail: a rule with `=` for `==` is refused by the same parser.
    (rules_dir / "61-control.rules").write_text(
        'ACTION=="add", SUBSYSTEM=="infiniband", KERNELS="0000:18:00.0", '
        'PROGRAM="rdma_rename %k NAME_FIXED x"\n'
    )
    script = (
        f"mkdir -p /etc/udev/rules.d && mount --bind {rules_dir} /etc/udev/rules.d && "
        f"{udevadm} test --action=add /sys/class/net/lo"
    )
    result = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    log = result.stdout + result.stderr
    assert "Reading rules file: /etc/udev/rules.d/60-rdma-persistent-naming.rules" in log
    assert "/etc/udev/rules.d/60-rdma-persistent-naming.rules:" not in log, log
    assert "/etc/udev/rules.d/61-control.rules:1 Invalid operator for KERNELS." in log
