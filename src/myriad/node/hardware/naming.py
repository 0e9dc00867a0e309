"""RDMA device names pinned to PCI addresses, so they are the same before and after a reboot.

rdma-core's own rule (`60-rdma-persistent-naming.rules`, Debian 12's rdma-core 44.0-2 ships
it in /lib/udev/rules.d) renames every RDMA device on its "add" event:

    ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"

(by PCI path, else by GUID: mlx5_0 becomes ibp24s0 or rocep24s0). The package's postinst only
runs `udevadm trigger --action=change`, so the names change at the first reboot after the
package is installed, not when it is: NCCL_IB_HCA==mlx5_0:1,... then matches nothing. A
file of the same name in /etc/udev/rules.d replaces the packaged one (udev(7)); ours names
each device by the PCI function it sits on (`KERNELS==`, which matches the device's parents)
with rdma_rename's NAME_FIXED mode (the packaged file's own commented example); a device not
listed keeps the kernel's name, as no rule renames it.

The names pinned are the kernel's own enumeration (mlx5_core probes functions in PCI order,
so the N-th mlx5 function is mlx5_N), derived from the PCI addresses, not from the names the
devices carry now: a node that has already been rebooted into ibp... names gets mlx5_N back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from myriad.node.hardware.discover import HardwareMap

RULES_FILE = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"


def kernel_names(hw: HardwareMap, driver_prefix: str = "mlx5") -> list[tuple[str, str]]:
    """(PCI address, mlx5_N) of every RDMA function, N counted in PCI order."""
    functions = sorted({p.bdf for p in hw.ports if p.rdma_device is not None})
    return [(bdf, f"{driver_prefix}_{i}") for i, bdf in enumerate(functions)]


def with_names(hw: HardwareMap, names: Mapping[str, str]) -> HardwareMap:
    """The map with each RDMA device under the name pinned to its PCI function.

    A node that rdma-core has already renamed (ibp24s0) is checked and recorded under the
    names it carries once the pinning rule has run, not under the ones it has this minute.
    """
    ports = tuple(
        replace(p, rdma_device=names.get(p.bdf, p.rdma_device)) if p.rdma_device else p
        for p in hw.ports
    )
    return replace(hw, ports=ports)


def udev_rules(pins: Sequence[tuple[str, str]]) -> str:
    lines = [
        "# Managed by Myriad (hardware discovery); replaces rdma-core's file of this name.",
        "# Each RDMA device keeps one name, chosen by the PCI function it sits on.",
    ]
    for bdf, name in pins:
        lines.append(
            f'ACTION=="add", SUBSYSTEM=="infiniband", KERNELS=="{bdf}", '
            f'PROGRAM="rdma_rename %k NAME_FIXED {name}"'
        )
    return "\n".join(lines) + "\n"
