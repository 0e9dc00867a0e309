"""Facts only the node health runner (myriad.node.health) reads, between its runs: no probe
of the gatherer's fills them, so a gathered document gives them `not-gathered` and the
runner sets them on the facts it read (dataclasses.replace).

XID events that count now (new in the kernel log since the last run, and draining ones
still held), each HCA's first port's error counter growth since the last run, the free
space of the spec's paths, and whether the runner could write under its paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from myriad.node.facts.declare import Declared, Reading
from myriad.node.facts.fact import NOT_GATHERED, Fact


@dataclass(frozen=True, slots=True)
class DiskSpace:
    """Free space of the file system a path is on (statvfs: what an unprivileged user gets)."""

    path: str
    free_percent: float
    free_bytes: int


def _between_runs(r: Reading) -> Fact[Any]:
    return NOT_GATHERED


def between_runs(name: str) -> Declared[Fact[Any]]:
    return Declared(name, (), _between_runs)


XID_EVENTS = between_runs("xid_events")
HCA_COUNTER_GROWTH = between_runs("hca_counter_growth")
DISK = between_runs("disk")
# Paths the runner tried to write a file under: None writable, else why not.
WRITABLE = between_runs("writable")
