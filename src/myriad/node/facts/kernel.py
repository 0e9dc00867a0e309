"""The kernel release the node booted.

A container boots no kernel: the twin's nodes record, at every start, the kernel their boot
loader would have booted (the common role's `common_container_boot`), and that record
stands in for the running kernel where it exists. A real node has no such file.
"""

from __future__ import annotations

from collections.abc import Mapping

from myriad.node.facts.declare import fact, files, text_files
from myriad.node.parsers import ParseFailure

RUNNING = "/proc/sys/kernel/osrelease"
BOOT_RECORD = "/run/myriad/kernel-release"
_FILES = text_files("kernel release")


def booted_release(contents: Mapping[str, str]) -> str:
    """The boot record where the node has one, else the running kernel's release."""
    for path in (BOOT_RECORD, RUNNING):
        release = contents.get(path, "").strip()
        if release:
            return release
    raise ParseFailure("kernel release", f"neither {BOOT_RECORD} nor {RUNNING} names a release")


def _parse(text: str) -> str:
    return booted_release(_FILES(text))


KERNEL_RELEASE = fact(
    "kernel_release", files("kernel_release", RUNNING, BOOT_RECORD), "kernel release", _parse
)
