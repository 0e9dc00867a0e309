"""Time synchronisation: chrony's tracking, or timedatectl where chrony is not installed."""

from __future__ import annotations

from dataclasses import dataclass

from myriad.node.facts.declare import Declared, Reading, command
from myriad.node.facts.fact import Fact
from myriad.node.parsers import ParseFailure
from myriad.node.parsers.common import first_line


@dataclass(frozen=True, slots=True)
class TimeSync:
    synchronised: bool
    source: str


def _chrony(text: str) -> TimeSync:
    fields_ = dict(
        (key.strip(), value.strip())
        for key, sep, value in (line.partition(":") for line in text.splitlines())
        if sep
    )
    leap = fields_.get("Leap status")
    if leap is None:
        raise ParseFailure("chronyc tracking", f"no Leap status line: {first_line(text)!r}")
    return TimeSync(
        synchronised=leap == "Normal", source=f"chrony: {fields_.get('Reference ID', '?')}"
    )


def _timedatectl(text: str) -> TimeSync:
    values = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    if "NTPSynchronized" not in values:
        raise ParseFailure("timedatectl show", "no NTPSynchronized property")
    return TimeSync(values["NTPSynchronized"] == "yes", "timedatectl")


CHRONY = command("chrony_tracking", "chronyc", "-n", "tracking")
TIMEDATECTL = command("timedatectl", "timedatectl", "show")


def _read(r: Reading) -> Fact[TimeSync]:
    chrony = r.read(CHRONY.name, "chronyc tracking", _chrony)
    if chrony.ok or chrony.state != "missing":
        return chrony
    return r.read(TIMEDATECTL.name, "timedatectl show", _timedatectl)


TIME: Declared[Fact[TimeSync]] = Declared("time", (CHRONY, TIMEDATECTL), _read)
