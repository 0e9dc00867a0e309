"""Parser for /proc/net/bonding/bondN: mode, hashing, LACP and each slave's link."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from myriad.node.parsers.common import (
    ParseFailure,
    first_line,
    guarded,
    require_text,
    to_int,
)

__all__ = ["Bond", "BondSlave", "parse_bonding"]

TOOL = "/proc/net/bonding"

# The kernel's bond_mode_name() descriptions, mapped to the names used to configure a
# bond (mode=802.3ad); the spec speaks the latter.
_MODES = {
    "load balancing (round-robin)": "balance-rr",
    "fault-tolerance (active-backup)": "active-backup",
    "load balancing (xor)": "balance-xor",
    "fault-tolerance (broadcast)": "broadcast",
    "IEEE 802.3ad Dynamic link aggregation": "802.3ad",
    "transmit load balancing": "balance-tlb",
    "adaptive load balancing": "balance-alb",
}
_MII_STATES = frozenset({"up", "down", "going down", "going back"})
_DUPLEX = frozenset({"full", "half"})
_MAC = re.compile(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){19}")
_LINE = re.compile(r"(?P<key>[^:]+):\s*(?P<value>.*)")


@dataclass(frozen=True, slots=True)
class BondSlave:
    name: str
    mii_status: str
    speed_mbps: int | None
    duplex: str | None
    link_failure_count: int | None
    permanent_hw_addr: str | None
    aggregator_id: int | None

    @property
    def up(self) -> bool:
        return self.mii_status == "up"


@dataclass(frozen=True, slots=True)
class Bond:
    driver_version: str | None
    mode: str
    mode_description: str
    xmit_hash_policy: str | None
    mii_status: str
    miimon_ms: int | None
    up_delay_ms: int | None
    down_delay_ms: int
    lacp_rate: str | None
    active_aggregator_id: int | None
    primary_slave: str | None
    active_slave: str | None
    slaves: tuple[BondSlave, ...]


@dataclass(slots=True)
class _Builder:
    master: dict[str, str] = field(default_factory=dict)
    active_aggregator: dict[str, str] = field(default_factory=dict)
    slaves: list[dict[str, str]] = field(default_factory=list)
    # Title of the indented block being read ("Active Aggregator Info", "details actor
    # lacp pdu"); its lines belong to it, not to the bond or slave around it.
    subsection: str | None = None


def _mii(value: str, where: str) -> str:
    if value not in _MII_STATES:
        raise ParseFailure(TOOL, f"{where}: unknown MII status {value!r}")
    return value


def _speed(value: str | None, where: str) -> int | None:
    if value is None or value == "Unknown":
        return None
    match = re.fullmatch(r"(\d+) Mbps", value)
    if match is None:
        raise ParseFailure(TOOL, f"{where}: unexpected speed {value!r}")
    return int(match.group(1))


def _duplex(value: str | None, where: str) -> str | None:
    if value is None or value == "Unknown":
        return None
    if value not in _DUPLEX:
        raise ParseFailure(TOOL, f"{where}: unexpected duplex {value!r}")
    return value


def _mac(value: str | None, where: str) -> str | None:
    if not value:
        return None
    if not _MAC.fullmatch(value):
        raise ParseFailure(TOOL, f"{where}: not a hardware address: {value!r}")
    return value.lower()


def _optional_int(value: str | None, what: str) -> int | None:
    return to_int(TOOL, value, what) if value is not None else None


def _slave(fields: dict[str, str]) -> BondSlave:
    name = fields["Slave Interface"]
    where = f"slave {name}"
    if "MII Status" not in fields:
        raise ParseFailure(TOOL, f"{where}: no MII Status line; the output looks truncated")
    return BondSlave(
        name=name,
        mii_status=_mii(fields["MII Status"], where),
        speed_mbps=_speed(fields.get("Speed"), where),
        duplex=_duplex(fields.get("Duplex"), where),
        link_failure_count=_optional_int(fields.get("Link Failure Count"), where),
        permanent_hw_addr=_mac(fields.get("Permanent HW addr"), where),
        aggregator_id=_optional_int(fields.get("Aggregator ID"), where),
    )


def _hash_policy(value: str | None) -> str | None:
    if value is None:
        return None
    match = re.fullmatch(r"(\S+) \(\d+\)", value)
    if match is None:
        raise ParseFailure(TOOL, f"unexpected transmit hash policy {value!r}")
    return match.group(1)


def _lacp_rate(value: str | None) -> str | None:
    if value is not None and value not in ("slow", "fast"):
        raise ParseFailure(TOOL, f"unexpected LACP rate {value!r}")
    return value


def _feed(b: _Builder, number: int, raw: str) -> None:
    line = raw.strip()
    if line == "802.3ad info":
        return
    match = _LINE.fullmatch(line)
    if match is None:
        raise ParseFailure(TOOL, f"line {number}: unexpected line {line!r}")
    key, value = match.group("key").strip(), match.group("value").strip()
    indented = raw[:1].isspace()
    if indented and b.subsection is not None:
        if b.subsection == "Active Aggregator Info":
            b.active_aggregator.setdefault(key, value)
        return
    b.subsection = None
    if key == "Slave Interface":
        b.slaves.append({key: value})
    elif not value and line.endswith(":"):
        b.subsection = key
    else:
        (b.slaves[-1] if b.slaves else b.master).setdefault(key, value)


def _check_aggregator_complete(b: _Builder) -> None:
    """The active aggregator counts its own ports: fewer slaves listed in it means the file
    was cut at a line boundary, which otherwise reads as a bond with fewer members."""
    active = b.active_aggregator.get("Aggregator ID")
    ports = b.active_aggregator.get("Number of ports")
    if active is None or ports is None:
        return
    listed = sum(1 for slave in b.slaves if slave.get("Aggregator ID") == active)
    declared = to_int(TOOL, ports, "active aggregator Number of ports")
    if listed < declared:
        raise ParseFailure(
            TOOL,
            f"the active aggregator {active} has {declared} port(s) but {listed} of its "
            "slaves are listed; the output looks truncated",
        )


def _required(fields: dict[str, str], key: str) -> str:
    if key not in fields:
        raise ParseFailure(TOOL, f"no {key!r} line; not a complete bonding status file")
    return fields[key]


@guarded(TOOL)
def parse_bonding(text: str) -> Bond:
    """Parse one /proc/net/bonding/<bond> file."""
    body = require_text(TOOL, text)
    b = _Builder()
    for number, raw in enumerate(body.splitlines(), start=1):
        if raw.strip():
            _feed(b, number, raw)
    m = b.master
    if "Bonding Mode" not in m:
        raise ParseFailure(TOOL, f"no 'Bonding Mode' line: {first_line(body)!r}")
    description = m["Bonding Mode"]
    # Down Delay follows MII Polling Interval and Up Delay in every kernel version; its
    # presence shows those lines were not cut.
    down_delay = _required(m, "Down Delay (ms)")
    driver = m.get("Ethernet Channel Bonding Driver")
    primary = m.get("Primary Slave")
    slaves = tuple(_slave(s) for s in b.slaves)
    _check_aggregator_complete(b)
    return Bond(
        driver_version=driver.split(" ", 1)[0] if driver else None,
        mode=_MODES.get(description, description),
        mode_description=description,
        xmit_hash_policy=_hash_policy(m.get("Transmit Hash Policy")),
        mii_status=_mii(_required(m, "MII Status"), "bond"),
        miimon_ms=_optional_int(m.get("MII Polling Interval (ms)"), "MII Polling Interval"),
        up_delay_ms=_optional_int(m.get("Up Delay (ms)"), "Up Delay"),
        down_delay_ms=to_int(TOOL, down_delay, "Down Delay"),
        lacp_rate=_lacp_rate(m.get("LACP rate")),
        active_aggregator_id=_optional_int(
            b.active_aggregator.get("Aggregator ID"), "active Aggregator ID"
        ),
        primary_slave=primary.split(" ", 1)[0] if primary else None,
        active_slave=m.get("Currently Active Slave") or None,
        slaves=slaves,
    )
