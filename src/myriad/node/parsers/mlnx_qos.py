"""Parser for `mlnx_qos -i IF`: trust state, PFC, DSCP to priority map, traffic classes.

The RoCE lossless checks read three things from it: trust is dscp, PFC is on for the
RoCE priority only, and the RoCE DSCP maps to that priority.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from myriad.node.parsers.common import ParseFailure, first_line, guarded, require_text

__all__ = ["MlnxQos", "TrafficClass", "parse_mlnx_qos"]

TOOL = "mlnx_qos"


@dataclass(frozen=True, slots=True)
class TrafficClass:
    tc: int
    tsa: str
    bandwidth_percent: int | None
    rate_limit: str
    priorities: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MlnxQos:
    dcbx_mode: str | None
    trust: str
    pfc_enabled: tuple[int, ...]
    pfc_buffer: tuple[int, ...] | None
    dscp_to_priority: dict[int, int]
    cable_length: int | None
    traffic_classes: tuple[TrafficClass, ...]

    def pfc_on(self, priority: int) -> bool:
        return priority in self.pfc_enabled


_DCBX = re.compile(r"DCBX mode:\s*(.*)")
# Older MLNX_OFED releases print "trust mode", newer ones "trust state".
_TRUST = re.compile(r"Priority trust (?:state|mode):\s*(\S*)")
_DSCP_ROW = re.compile(r"prio:\s*(\d+)\s+dscp:\s*((?:\d+,)*\d*)")
_CABLE = re.compile(r"Cable len:\s*(\d*)")
_PFC_ROW = re.compile(r"(priority|enabled|buffer)((?:\s+\d+)*)")
_TC = re.compile(r"tc:\s*(\d+)\s+ratelimit:\s*([^,]+),\s*tsa:\s*(\w+)(?:,\s*bw:\s*(\d+)%)?")
_TC_PRIORITY = re.compile(r"priority:\s*(\d+)")
_TSAS = frozenset({"vendor", "ets", "strict"})


@dataclass(slots=True)
class _Builder:
    dcbx_mode: str | None = None
    trust: str | None = None
    dscp: dict[int, int] = field(default_factory=dict)
    cable: int | None = None
    pfc_rows: dict[str, list[int]] = field(default_factory=dict)
    tcs: list[tuple[int, str, int | None, str, list[int]]] = field(default_factory=list)


def _fail(number: int, what: str, line: str) -> ParseFailure:
    return ParseFailure(TOOL, f"line {number}: {what}: {line!r}")


def _dscp_row(b: _Builder, number: int, line: str) -> None:
    match = _DSCP_ROW.fullmatch(line)
    if match is None:
        raise _fail(number, "malformed dscp2prio row", line)
    priority = int(match.group(1))
    for dscp in filter(None, match.group(2).split(",")):
        if int(dscp) in b.dscp:
            raise _fail(number, f"DSCP {int(dscp)} mapped twice", line)
        b.dscp[int(dscp)] = priority


def _pfc_row(b: _Builder, number: int, line: str) -> None:
    match = _PFC_ROW.fullmatch(line)
    if match is None:
        raise _fail(number, "malformed PFC row", line)
    b.pfc_rows[match.group(1)] = [int(v) for v in match.group(2).split()]


def _tc_line(b: _Builder, number: int, line: str) -> None:
    match = _TC.fullmatch(line)
    if match is None or match.group(3) not in _TSAS:
        raise _fail(number, "malformed traffic class line", line)
    bw = int(match.group(4)) if match.group(4) is not None else None
    b.tcs.append((int(match.group(1)), match.group(3), bw, match.group(2).strip(), []))


def _tc_priority(b: _Builder, number: int, line: str) -> None:
    match = _TC_PRIORITY.fullmatch(line)
    if match is None or not b.tcs:
        raise _fail(number, "priority line outside a traffic class", line)
    b.tcs[-1][4].append(int(match.group(1)))


def _line(b: _Builder, number: int, line: str) -> None:
    if dcbx := _DCBX.fullmatch(line):
        b.dcbx_mode = dcbx.group(1).strip() or None
    elif line.startswith("Priority trust"):
        trust = _TRUST.fullmatch(line)
        if trust is None or trust.group(1) not in ("pcp", "dscp"):
            raise _fail(number, "unknown trust state", line)
        b.trust = trust.group(1)
    elif line.startswith("prio:"):
        _dscp_row(b, number, line)
    elif line.startswith("Cable len"):
        cable = _CABLE.fullmatch(line)
        if cable is None or not cable.group(1):
            raise _fail(number, "malformed cable length", line)
        b.cable = int(cable.group(1))
    elif line.startswith(("enabled", "buffer")) or re.match(r"priority\s+\d", line):
        _pfc_row(b, number, line)
    elif line.startswith("tc:"):
        _tc_line(b, number, line)
    elif line.startswith("priority:"):
        _tc_priority(b, number, line)
    # Other lines (section titles, receive buffer sizes, newer additions) carry nothing
    # the checks read.


def _pfc(b: _Builder) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    header, enabled = b.pfc_rows.get("priority"), b.pfc_rows.get("enabled")
    if header is None or enabled is None:
        raise ParseFailure(TOOL, "no PFC configuration; the output looks truncated")
    if len(enabled) != len(header) or any(v not in (0, 1) for v in enabled):
        raise ParseFailure(TOOL, f"PFC 'enabled' row {enabled} does not match priorities {header}")
    buffer = b.pfc_rows.get("buffer")
    if buffer is not None and len(buffer) != len(header):
        raise ParseFailure(TOOL, f"PFC 'buffer' row {buffer} does not match priorities {header}")
    on = tuple(prio for prio, flag in zip(header, enabled, strict=True) if flag)
    return on, tuple(buffer) if buffer is not None else None


@guarded(TOOL)
def parse_mlnx_qos(text: str) -> MlnxQos:
    """Parse `mlnx_qos -i IF` (MLNX_OFED and DOCA releases)."""
    body = require_text(TOOL, text)
    b = _Builder()
    for number, raw in enumerate(body.splitlines(), start=1):
        if raw.strip():
            _line(b, number, raw.strip())
    if b.trust is None:
        raise ParseFailure(TOOL, f"no 'Priority trust state' line: {first_line(body)!r}")
    pfc_enabled, pfc_buffer = _pfc(b)
    return MlnxQos(
        dcbx_mode=b.dcbx_mode,
        trust=b.trust,
        pfc_enabled=pfc_enabled,
        pfc_buffer=pfc_buffer,
        dscp_to_priority=dict(sorted(b.dscp.items())),
        cable_length=b.cable,
        traffic_classes=tuple(
            TrafficClass(tc, tsa, bw, rate, tuple(prios)) for tc, tsa, bw, rate, prios in b.tcs
        ),
    )
