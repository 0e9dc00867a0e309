"""Parser for perftest's bandwidth tests (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`).

The client prints (perftest `src/perftest_parameters.c`, `src/perftest_resources.c`): a dashed
rule, the test's title (`RDMA_Write BW Test`, `... Bidirectional BW Test`), `Key : value`
settings two to a line (Device, Number of qps, Transport type, Mtu, Link type, GID index on
RoCE), the queue pairs' addresses, another rule, the column header `#bytes #iterations
BW peak[UNIT] BW average[UNIT] MsgRate[Mpps]`, one row per message size, and a closing rule.
UNIT is `Gb/sec` with `--report_gbits`, otherwise `MB/sec` (older releases) or `MiB/sec`,
both 2^20 bytes. `Link type` says which fabric carried the test: `IB` (InfiniBand) or
`Ethernet` (RoCE, where `GID index` names the RoCE GID).

A table with no closing rule was cut short (killed, timed out, or `--run_infinitely`); it is
refused rather than read as a result, and so is output where the test never connected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from myriad.node.parsers.common import ParseFailure, first_line, guarded, require_text

__all__ = ["PerftestRow", "PerftestRun", "parse_perftest_bw"]

TOOL = "perftest"

BITS_PER_BYTE = 8
MEBIBYTE = 1 << 20
_TO_GBPS = {"Gb/sec": 1.0, "MB/sec": MEBIBYTE * BITS_PER_BYTE / 1e9}
_TO_GBPS["MiB/sec"] = _TO_GBPS["MB/sec"]


@dataclass(frozen=True, slots=True)
class PerftestRow:
    message_bytes: int
    iterations: int
    peak_gbps: float  # 0.0 where perftest did not measure the peak (-D, --run_infinitely)
    average_gbps: float
    msg_rate_mpps: float | None

    @property
    def average_gbs(self) -> float:
        return self.average_gbps / BITS_PER_BYTE


@dataclass(frozen=True, slots=True)
class PerftestRun:
    test: str  # the title, e.g. "RDMA_Write BW Test"
    device: str | None
    link_type: str | None  # "IB" or "Ethernet"
    mtu_bytes: int | None
    gid_index: int | None
    qps: int | None
    unit: str  # as printed: Gb/sec, MB/sec, MiB/sec
    rows: tuple[PerftestRow, ...]

    @property
    def bidirectional(self) -> bool:
        return "Bidirectional" in self.test

    @property
    def roce(self) -> bool:
        return self.link_type == "Ethernet"

    @property
    def largest(self) -> PerftestRow:
        return max(self.rows, key=lambda row: row.message_bytes)


_RULE = re.compile(r"-{20,}")
_TITLE = re.compile(r"(\S.*\bBW Test)")
_SETTING = re.compile(r"([A-Za-z][\w .*/-]*?)\s*:\s*(\S+)")
_HEADER = re.compile(
    r"#bytes\s+#iterations\s+BW peak\[([\w/]+)\]\s+BW average\[([\w/]+)\](?:\s+MsgRate\[Mpps\])?"
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _settings(line: str) -> dict[str, str]:
    """`Dual-port : OFF    Device : mlx5_0` holds two settings, each `Key : value`."""
    return {match[1].strip(): match[2] for match in _SETTING.finditer(line)}


def _row(line: str, number: int, scale: float) -> PerftestRow:
    columns = line.split()
    if len(columns) not in (4, 5) or not all(_NUMBER.fullmatch(c) for c in columns):
        raise ParseFailure(TOOL, f"could not read line {number} as a result row: {line.strip()!r}")
    rate = float(columns[4]) if len(columns) == 5 else None
    return PerftestRow(
        int(columns[0]), int(columns[1]), float(columns[2]) * scale, float(columns[3]) * scale, rate
    )


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    digits = re.match(r"\d+", value)
    return int(digits[0]) if digits else None


@guarded(TOOL)
def parse_perftest_bw(text: str) -> PerftestRun:
    """Read the client's output of one perftest bandwidth test."""
    body = require_text(TOOL, text)
    lines = body.splitlines()
    title: str | None = None
    settings: dict[str, str] = {}
    unit: str | None = None
    rows: list[PerftestRow] = []
    closed = False
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if unit is None:
            if title is None and (match := _TITLE.fullmatch(line)):
                title = match[1]
            elif header := _HEADER.search(line):
                if header[1] != header[2] or header[1] not in _TO_GBPS:
                    raise ParseFailure(TOOL, f"could not read the units of line {number}: {line!r}")
                unit = header[1]
            elif title is not None and ":" in line:
                settings.update(_settings(line))
            continue
        if _RULE.fullmatch(line):
            closed = True
            break
        if line and line[0].isdigit():
            rows.append(_row(line, number, _TO_GBPS[unit]))
        # Warnings between rows (`Conflicting CPU frequency values detected`) are not rows.
    if unit is None:
        raise ParseFailure(TOOL, f"could not read a result table: {first_line(body)!r}")
    if not rows:
        raise ParseFailure(TOOL, "could not read a result row under the header")
    if not closed:
        raise ParseFailure(
            TOOL, "could not read the end of the result table: the run was cut short"
        )
    return PerftestRun(
        test=title or "",
        device=settings.get("Device"),
        link_type=settings.get("Link type"),
        mtu_bytes=_int_or_none(settings.get("Mtu")),
        gid_index=_int_or_none(settings.get("GID index")),
        qps=_int_or_none(settings.get("Number of qps")),
        unit=unit,
        rows=tuple(rows),
    )
