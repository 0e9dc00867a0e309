"""The hardware-in-a-box through a real reboot: the netnames role names PCI NICs, the machine
boots again, and udev at boot gives the same names from the role's .link files.

What is real here: a Debian 12 guest (the node image, with Debian's cloud kernel) booted by
QEMU; its ports are PCI functions (vmxnet3) at the scenario's addresses 0000:17:00.0,
0000:3a:00.0 (rails) and 0000:a1:00.0/.1 (one dual-function storage card), with Mellanox-OUI
MACs; Ansible over ssh runs the role as a site run does; the reboot is the guest's own
(ansible.builtin.reboot), and the next boot's kernel and initramfs are those on the guest's
disk, so the initramfs the role rebuilt (with its copies of the .link files) is the one
that boots; systemd-udevd at boot matches the files by `Path=pci-…` (udev's path_id) and
names the ports, which `udevadm info` shows as ID_NET_LINK_FILE.

What is not: the NICs are not ConnectX. The ports are given to the role by PCI path (what
the spec's `interfaces:` override renders), not by RDMA device: a vmxnet3 function has no
RDMA device, and a soft-RoCE (rxe) device has no PCI parent, so the RDMA side of the naming
(rdma_rename NAME_FIXED) cannot be shown on this machine. Addressing (roce), RoCE QoS and
NCCL's HCA list are not run here; the Docker box (roles/netnames/molecule/default) covers
them on veths.

The guest runs under TCG by default: on this project's CI hosts /dev/kvm is a nested KVM
whose guest decompressed the kernel at about 1 MB/s (measured 2026-12-05 from QEMU's
registers), slower than TCG, which reaches ssh in about 25 s. MYRIAD_VM_ACCEL=kvm uses KVM.
Under TCG the whole test took 380 s on a 2-core host (2026-12-05; the disk cached, two boots,
three Ansible runs and the role's initramfs rebuild inside the guest), over what CI can spend,
so it runs only when asked: MYRIAD_VM_BOOT=1.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vm_box import Firmware, Port, copy_disk, ensure_disk, qemu_available

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
BOOT_TIMEOUT_S = 240.0
PLAY_TIMEOUT_S = 600.0

# The scenario's ports (roles/netnames/molecule/default/molecule.yml), at its PCI addresses:
# 0x17 = 23, 0x3a = 58, 0xa1 = 161, as in enp23s0f0np0, enp58s0f0np0, enp161s0f{0,1}np{0,1}.
PORTS = {
    "rail0": Port(bus=0x17, function=0, mac="b8:ce:f6:00:17:00"),
    "rail1": Port(bus=0x3A, function=0, mac="b8:ce:f6:00:3a:00"),
    "stor0": Port(bus=0xA1, function=0, mac="b8:ce:f6:00:a1:00"),
    "stor1": Port(bus=0xA1, function=1, mac="b8:ce:f6:00:a1:01"),
}
LINK_PREFIX = "10-myriad-"  # roles/netnames/vars/main.yml: __netnames_link_prefix

CONVERGE = """\
- name: Name the box's ports
  hosts: box
  gather_facts: false
  roles:
    - role: netnames
"""
REBOOT = """\
- name: Reboot the box
  hosts: box
  gather_facts: false
  tasks:
    - name: Reboot and wait for ssh
      ansible.builtin.reboot:
        reboot_timeout: 300
"""


@pytest.fixture()
def box(tmp_path: Path) -> Iterator[Firmware]:
    if os.environ.get("MYRIAD_VM_BOOT") != "1":
        pytest.skip("a QEMU boot test (about 6 min under TCG): set MYRIAD_VM_BOOT=1 to run it")
    if not qemu_available():
        pytest.skip("needs qemu-system-x86_64 (Debian: qemu-system-x86) and debugfs (e2fsprogs)")
    accel = os.environ.get("MYRIAD_VM_ACCEL", "tcg")
    if accel == "kvm" and not os.access("/dev/kvm", os.R_OK | os.W_OK):
        pytest.skip("MYRIAD_VM_ACCEL=kvm but /dev/kvm is not usable")
    disk = ensure_disk()
    firmware = Firmware(
        disk=disk,
        image=copy_disk(disk, tmp_path),
        ports=tuple(PORTS.values()),
        work=tmp_path,
        accel=accel,
    )
    firmware.start()
    try:
        firmware.wait_for_ssh(BOOT_TIMEOUT_S)
        yield firmware
    finally:
        firmware.stop()


def _inventory(box: Firmware, path: Path) -> Path:
    ports = "\n".join(
        f"          - {{name: {name}, path: pci-{port.pci}}}" for name, port in PORTS.items()
    )
    path.write_text(
        f"""\
all:
  hosts:
    box:
      ansible_host: 127.0.0.1
      ansible_port: {box.ssh_port}
      ansible_user: root
      ansible_ssh_private_key_file: {box.disk.key}
      ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
      ansible_python_interpreter: /usr/bin/python3
      netnames_ports:
{ports}
"""
    )
    return path


def _play(inventory: Path, playbook: Path) -> str:
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PLAY_TIMEOUT_S,
        check=False,
        cwd=REPO,
        env={
            **os.environ,
            "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_HOST_KEY_CHECKING": "False",
        },
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return result.stdout


def _changed(recap: str) -> int:
    found = re.search(r"^box\s*:.*\bchanged=(\d+)", recap, re.MULTILINE)
    assert found, recap[-2000:]
    return int(found.group(1))


def _links(box: Firmware) -> dict[str, tuple[str, str]]:
    """Each interface's (MAC, PCI address) as the guest's kernel shows them now."""
    out = box.ssh(
        "for n in /sys/class/net/*; do echo $(basename $n) $(cat $n/address) "
        "$(basename $(readlink -f $n/device 2>/dev/null || echo -)); done"
    )
    assert out.returncode == 0, out.stderr
    return {
        name: (mac, pci) for name, mac, pci in (line.split() for line in out.stdout.splitlines())
    }


def _boot_id(box: Firmware) -> str:
    return box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()


def test_names_survive_a_real_reboot(box: Firmware, tmp_path: Path) -> None:
    started = time.monotonic()
    before = _links(box)
    # udev's own names before the role: 99-default.link's path names, not ours.
    for name, port in PORTS.items():
        assert name not in before
        assert (port.mac, port.pci) in before.values(), before
    inventory = _inventory(box, tmp_path / "hosts.yml")
    converge = tmp_path / "converge.yml"
    converge.write_text(CONVERGE)
    reboot = tmp_path / "reboot.yml"
    reboot.write_text(REBOOT)

    assert _changed(_play(inventory, converge)) > 0
    named = _links(box)
    first_boot = _boot_id(box)
    files = {
        name: box.ssh(f"cat /etc/systemd/network/{LINK_PREFIX}{name}.link").stdout for name in PORTS
    }

    _play(inventory, reboot)
    assert box.boots == 2, box.failure
    assert _boot_id(box) != first_boot

    # The boot named them: same name, MAC and PCI function as the role's rename gave.
    after = _links(box)
    for name, port in PORTS.items():
        assert after[name] == (port.mac, port.pci) == named[name]
        # ... by the role's file, matched on udev's ID_PATH, not by a fallback.
        props = box.ssh(f"udevadm info --query=property /sys/class/net/{name}").stdout
        assert f"ID_PATH=pci-{port.pci}\n" in props, props
        assert f"ID_NET_LINK_FILE=/etc/systemd/network/{LINK_PREFIX}{name}.link\n" in props
        assert f"[Match]\nPath=pci-{port.pci}\n" in files[name], files[name]
        assert f"[Link]\nName={name}\n" in files[name]
    # The initramfs that booted carries the same files (the role's handler rebuilt it).
    initramfs = box.ssh(f"lsinitramfs /boot/initrd.img-{box.disk.kernel_version}").stdout
    for name in PORTS:
        assert f"{LINK_PREFIX}{name}.link" in initramfs
    # Nothing left to do, and the role's own check (every name present) passes.
    assert _changed(_play(inventory, converge)) == 0
    check = box.ssh("/usr/local/sbin/myriad-netnames /etc/myriad/netnames.json check")
    assert check.returncode == 0, check.stdout + check.stderr
    print(f"netnames through a real reboot: {time.monotonic() - started:.0f}s after first boot")
