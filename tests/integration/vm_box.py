"""A small QEMU machine made from the node image, whose NICs are real PCI functions, so that
udev at boot names them as it names a server's ports.

The Docker hardware-in-a-box (roles/netnames/molecule/default) cannot be rebooted: its ports
are veths, which have no PCI parent, so udev's path_id never sets ID_PATH and the role's
`Path=pci-…` .link files cannot match. Here the ports are vmxnet3 functions placed behind
PCIe expander bridges at chosen bus numbers (QEMU's pxb-pcie `bus_nr`), so the guest sees
them at the addresses the scenario uses (0000:17:00.0, 0000:3a:00.0, 0000:a1:00.0/1).
vmxnet3 rather than virtio-net: a virtio netdev's `device` is the virtio device, not the PCI
function (the role reads the PCI address from /sys/class/net/NAME/device), and Debian's cloud
kernel has no e1000e or igb.

The disk is the node image (`docker export`) plus Debian's cloud kernel, initramfs-tools,
udev and OpenSSH installed with apt inside a container of it, written into an ext4 image
without loop devices (`mkfs.ext4 -d`). It is cached by the image id and this recipe.

Boots are real: the guest's own `reboot` ends QEMU (-no-reboot) and `Firmware` starts it again
with the kernel and initramfs read from the disk's /boot (debugfs, no mount), as a boot
loader would, so an initramfs the role rebuilt is the one that boots.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from myriad.provision.node_image import IMAGE_TAG

# Bump when the steps below change what ends up on the disk.
DISK_RECIPE_VERSION = 1
GUEST_PACKAGES = ("linux-image-cloud-amd64", "initramfs-tools", "udev", "openssh-server")
DISK_SIZE = "1536M"
# The management NIC: QEMU's user-mode network, DHCP from its built-in server.
MGMT_MAC = "52:54:00:12:34:56"
# Units the node image masks for containers; a VM has devices for udev to manage.
UDEV_UNITS = (
    "systemd-udevd.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-udev-trigger.service",
    "systemd-udev-settle.service",
)
APT_TIMEOUT_S = 600
SSH_OPTIONS = (
    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", "-o", "BatchMode=yes",
)  # fmt: skip


@dataclass(frozen=True)
class Port:
    """One NIC port of the box: its PCI address in the guest and its MAC."""

    bus: int
    function: int
    mac: str

    @property
    def pci(self) -> str:
        return f"0000:{self.bus:02x}:00.{self.function}"


@dataclass(frozen=True)
class Disk:
    """The cached disk image, the key that logs in as root, and the kernel it boots."""

    image: Path
    key: Path
    kernel_version: str


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "myriad" / "vm"


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True)


def ensure_disk() -> Disk:
    """The box's disk, built once per node image and recipe and reused after."""
    image_id = _run(["docker", "image", "inspect", "--format", "{{.Id}}", IMAGE_TAG], 60).stdout
    recipe = json.dumps(
        {"image": image_id.strip(), "packages": GUEST_PACKAGES, "version": DISK_RECIPE_VERSION},
        sort_keys=True,
    )
    folder = cache_root() / hashlib.sha256(recipe.encode()).hexdigest()[:16]
    done = folder / "disk.json"
    if done.is_file():
        kernel = json.loads(done.read_text())["kernel_version"]
        return Disk(folder / "disk.img", folder / "key", kernel)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        disk = _build_disk(Path(work), folder)
    done.write_text(json.dumps({"kernel_version": disk.kernel_version, "recipe": recipe}))
    return disk


def _build_disk(work: Path, folder: Path) -> Disk:
    root = work / "root"
    root.mkdir()
    container = f"myriad-vmdisk-{uuid.uuid4().hex[:8]}"
    install = (
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
        f"--no-install-recommends {' '.join(GUEST_PACKAGES)} >/dev/null"
    )
    try:
        _run(["docker", "run", "--name", container, IMAGE_TAG, "sh", "-c", install], APT_TIMEOUT_S)
        export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(root)], stdin=export.stdout, check=True, timeout=300)
        if export.wait(timeout=60) != 0:
            raise RuntimeError(f"docker export {container} failed")
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, timeout=60)
    kernels = sorted(p.name.removeprefix("vmlinuz-") for p in (root / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise RuntimeError(f"expected one kernel in the disk's /boot, found {kernels}")
    key = folder / "key"
    key.unlink(missing_ok=True)
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], 60)
    _configure(root, key.with_suffix(".pub").read_text())
    image = folder / "disk.img"
    _run(["mkfs.ext4", "-q", "-F", "-L", "myriad-vm", "-d", str(root), str(image), DISK_SIZE], 300)
    return Disk(image, key, kernels[0])


def _configure(root: Path, public_key: str) -> None:
    etc = root / "etc"
    for unit in UDEV_UNITS:
        (etc / "systemd/system" / unit).unlink(missing_ok=True)
    (etc / "hostname").write_text("vmbox\n")
    (etc / "fstab").write_text("LABEL=myriad-vm / ext4 defaults 0 1\n")
    network = etc / "systemd/network"
    network.mkdir(parents=True, exist_ok=True)
    (network / "05-mgmt.network").write_text(
        f"[Match]\nMACAddress={MGMT_MAC}\n\n[Network]\nDHCP=ipv4\n"
    )
    wants = etc / "systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "systemd-networkd.service").unlink(missing_ok=True)
    (wants / "systemd-networkd.service").symlink_to("/lib/systemd/system/systemd-networkd.service")
    ssh = root / "root/.ssh"
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    (ssh / "authorized_keys").write_text(public_key)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Firmware:
    """Runs QEMU, and starts it again each time the guest reboots, until `stop`."""

    disk: Disk
    image: Path
    ports: tuple[Port, ...]
    work: Path
    accel: str
    ssh_port: int = field(default_factory=free_port)
    boots: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _proc: subprocess.Popen[bytes] | None = None
    _thread: threading.Thread | None = None
    failure: str = ""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                kernel, initrd = self._read_boot_files()
            except subprocess.CalledProcessError as exc:
                self.failure = f"reading /boot from the disk failed: {exc.stderr}"
                return
            self.boots += 1
            serial = self.work / f"serial-{self.boots}.log"
            with (self.work / f"qemu-{self.boots}.log").open("wb") as log:
                self._proc = subprocess.Popen(
                    [*self._qemu_args(kernel, initrd), "-serial", f"file:{serial}"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                code = self._proc.wait()
            if code != 0 and not self._stop.is_set():
                self.failure = f"QEMU exited {code}; see {serial}"
                return

    def _read_boot_files(self) -> tuple[Path, Path]:
        # As a boot loader does: the kernel and initramfs the disk holds now. -c (read-only,
        # bitmaps not read): the guest leaves its block bitmaps' checksums to be fixed at
        # mount, and debugfs refuses to open such a file system otherwise.
        version = self.disk.kernel_version
        files = []
        for name in (f"vmlinuz-{version}", f"initrd.img-{version}"):
            out = self.work / name
            out.unlink(missing_ok=True)
            _run(["debugfs", "-c", "-R", f"dump /boot/{name} {out}", str(self.image)], 120)
            if not out.is_file() or out.stat().st_size == 0:
                raise subprocess.CalledProcessError(1, "debugfs", stderr=f"no /boot/{name}")
            files.append(out)
        return files[0], files[1]

    def _qemu_args(self, kernel: Path, initrd: Path) -> list[str]:
        args = [
            "qemu-system-x86_64", "-machine", f"q35,accel={self.accel}", "-smp", "2",
            "-m", "1024", "-display", "none", "-monitor", "none", "-no-reboot",
            "-kernel", str(kernel), "-initrd", str(initrd),
            "-append", "root=LABEL=myriad-vm rw console=ttyS0",
            "-drive", f"file={self.image},if=none,id=disk,format=raw",
            "-device", "virtio-blk-pci,drive=disk,bus=pcie.0",
            "-netdev", f"user,id=mgmt,hostfwd=tcp:127.0.0.1:{self.ssh_port}-:22",
            "-device", f"virtio-net-pci,netdev=mgmt,mac={MGMT_MAC},bus=pcie.0,romfile=",
        ]  # fmt: skip
        for bus in sorted({p.bus for p in self.ports}):
            # The expander's own bus is bus_nr; its root port's secondary bus is the next one.
            args += ["-device", f"pxb-pcie,id=pxb{bus:02x},bus=pcie.0,bus_nr={bus - 1}"]
            args += ["-device", f"pcie-root-port,id=rp{bus:02x},bus=pxb{bus:02x},chassis={bus}"]
        for index, port in enumerate(self.ports):
            multi = ",multifunction=on" if port.function == 0 else ""
            args += ["-netdev", f"user,id=nic{index},restrict=on"]
            args += [
                "-device",
                f"vmxnet3,netdev=nic{index},mac={port.mac},bus=rp{port.bus:02x},"
                f"addr=0x0.{port.function}{multi},romfile=",
            ]
        return args

    def ssh(self, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", "-i", str(self.disk.key), *SSH_OPTIONS, "-p", str(self.ssh_port),
             "root@127.0.0.1", command],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def wait_for_ssh(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.failure:
                raise RuntimeError(self.failure)
            if self.ssh("true", timeout=20).returncode == 0:
                return
            time.sleep(2)
        raise TimeoutError(f"no ssh to the VM after {timeout:.0f}s; see {self.work}/serial-*.log")


def copy_disk(disk: Disk, dest: Path) -> Path:
    """A copy of the cached disk for one run (sparse; the cache stays as built)."""
    target = dest / "disk.img"
    _run(["cp", "--sparse=always", str(disk.image), str(target)], 300)
    return target


def qemu_available() -> bool:
    return shutil.which("qemu-system-x86_64") is not None and shutil.which("debugfs") is not None
