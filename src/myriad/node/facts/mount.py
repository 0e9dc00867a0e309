"""The storage mount the spec names (`findmnt -J --mountpoint PATH`), when it names one."""

from __future__ import annotations

from dataclasses import dataclass

from myriad.node.facts.declare import Probe, ProbeRecord, fact, json_object
from myriad.node.facts.probe import run
from myriad.node.parsers import ParseFailure


@dataclass(frozen=True, slots=True)
class Mount:
    target: str
    source: str
    fstype: str
    options: str


def _mount(text: str) -> Mount | None:
    if not text.strip():
        return None
    data = json_object("findmnt", text)
    systems = data.get("filesystems")
    if not isinstance(systems, list) or not systems or not isinstance(systems[0], dict):
        raise ParseFailure("findmnt", "no filesystems list")
    entry = systems[-1]  # the last mount on a mount point is the one that is visible

    def text_of(key: str) -> str:
        value = entry.get(key)
        return value if isinstance(value, str) else ""

    return Mount(text_of("target"), text_of("source"), text_of("fstype"), text_of("options"))


def _answered(probe: ProbeRecord) -> bool:
    # findmnt exits 1 with no output when nothing is mounted there: an answer, not a fault.
    return probe.rc in (0, 1)


FINDMNT = Probe(
    "findmnt",
    lambda o: run(["findmnt", "-J", "--mountpoint", o.mount], o.timeout),
    when=lambda o: bool(o.mount),
)
MOUNT = fact("mount", FINDMNT, "findmnt", _mount, accept_rc=_answered)
