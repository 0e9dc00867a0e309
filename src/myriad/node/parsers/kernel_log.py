"""NVIDIA XID events in kernel log text, and what NVIDIA's XID catalog says each one means.

The driver logs every XID as one kernel message, `NVRM: Xid (PCI:<bus id>): <xid>, <text>`,
whatever prefix the reader adds (dmesg's `[uptime]` or `[ctime]`, journald's
`<date> <host> kernel:`, /dev/kmsg's `<prio>,<seq>,<usec>,<flags>;`). Standard library only:
the node health runner reads the kernel log with this on the node.

Classification (NVIDIA "XID Errors", r590 catalog, and the GPU memory error management
guide): an XID whose recovery needs a GPU reset, a node reboot or a hardware inspection takes
the node out of service (`drain`); an XID caused by the application (a bad instruction, an
illegal address, a channel torn down because the job was killed) is `record`: it is counted,
never a reason to drain. An XID the catalog has not got here is recorded, not drained.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

XidAction = Literal["drain", "record"]

# XID → what it means, for the ones that take a node out of service.
DRAIN_XIDS: dict[int, str] = {
    48: "double-bit ECC error (DBE)",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
# Application faults and their aftermath: the job failed, the GPU did not.
RECORD_XIDS: dict[int, str] = {
    13: "graphics engine exception (application fault)",
    31: "GPU memory page fault (application fault)",
    43: "GPU stopped processing (application fault)",
    45: "preemptive cleanup, due to previous errors (application ended)",
    109: "context switch timeout",
}

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)(?:, ?(?P<text>.*))?"
)


@dataclass(frozen=True, slots=True)
class XidEvent:
    xid: int
    pci: str
    text: str

    @property
    def action(self) -> XidAction:
        return classify(self.xid)

    @property
    def meaning(self) -> str:
        return DRAIN_XIDS.get(self.xid) or RECORD_XIDS.get(self.xid) or "not in the catalog here"

    def describe(self) -> str:
        return f"XID {self.xid} on {self.pci} ({self.meaning})"

    def to_dict(self) -> dict[str, object]:
        return {"xid": self.xid, "pci": self.pci, "text": self.text}


def classify(xid: int) -> XidAction:
    return "drain" if xid in DRAIN_XIDS else "record"


def parse_xid_lines(text: str) -> tuple[XidEvent, ...]:
    """Every XID event in kernel log text, in order; lines without one are skipped."""
    events = []
    for line in text.splitlines():
        match = _XID.search(line)
        if match is not None:
            events.append(
                XidEvent(
                    xid=int(match.group("xid")),
                    pci=match.group("pci"),
                    text=(match.group("text") or "").strip(),
                )
            )
    return tuple(events)
