"""Parser for `nvidia-smi --query-gpu=FIELDS --format=csv [-l N]`: one row per GPU per sample.

The header row names the fields as asked, units in brackets (`power.draw [W]`) unless
`nounits` was given; values carry their unit (`631.95 W`, `1980 MHz`, `100 %`), and a
value the GPU does not report reads `[N/A]` or `[Not Supported]` (the H100 capture in
tests/samples/nvidia-smi-query-gpu). Field names and meanings are `nvidia-smi
--help-query-gpu`'s; the clock event reasons answer to their old names too
(`clocks_throttle_reasons.*`, "clocks_event_reasons.active or clocks_throttle_reasons.active").
A header printed again later in the stream is skipped; a row that does not fill the header
(output cut short) is no reading.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from myriad.node.parsers.common import ParseFailure, guarded, require_text

__all__ = ["GpuQuerySample", "parse_query_gpu_csv"]

TOOL = "nvidia-smi --query-gpu"

_UNIT = re.compile(r"\s*\[[^\]]*\]$")
_REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")
_NUMBER = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?)(?: ?(?:W|MHz|%|C|MiB))?")


@dataclass(frozen=True, slots=True)
class GpuQuerySample:
    """One GPU at one moment; None where the field was not asked for or not reported.
    `reasons_active`: the clock event reasons printed Active, by name less the prefix."""

    timestamp: str
    index: int
    temperature_c: float | None
    power_w: float | None
    sm_mhz: float | None
    sm_max_mhz: float | None
    utilization_pct: float | None
    pcie_gen: int | None
    pcie_gen_max: int | None
    ecc_uncorrected_volatile: int | None
    reasons_active: tuple[str, ...]


def _name(cell: str) -> str:
    return _UNIT.sub("", cell.strip())


def _number(value: str | None, field: str) -> float | None:
    if value is None:
        return None
    text = value.strip()
    if text.startswith("[") or text in ("N/A", ""):
        return None
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise ParseFailure(TOOL, f"{field}: {text!r} is not a number")
    return float(match.group(1))


def _whole(value: str | None, field: str) -> int | None:
    number = _number(value, field)
    return None if number is None else int(number)


def _sample(row: dict[str, str]) -> GpuQuerySample:
    index = _whole(row.get("index"), "index")
    if index is None:
        raise ParseFailure(TOOL, "a row without the GPU's index")
    reasons = []
    for field, value in row.items():
        for prefix in _REASON_PREFIXES:
            if field.startswith(prefix) and field[len(prefix) :] not in ("active", "supported"):
                if value.strip() == "Active":
                    reasons.append(field[len(prefix) :])
                elif value.strip() != "Not Active" and not value.strip().startswith("["):
                    raise ParseFailure(TOOL, f"{field}: {value.strip()!r}, not Active")
    return GpuQuerySample(
        timestamp=row.get("timestamp", "").strip(),
        index=index,
        temperature_c=_number(row.get("temperature.gpu"), "temperature.gpu"),
        power_w=_number(row.get("power.draw"), "power.draw"),
        sm_mhz=_number(row.get("clocks.current.sm", row.get("clocks.sm")), "clocks.current.sm"),
        sm_max_mhz=_number(row.get("clocks.max.sm"), "clocks.max.sm"),
        utilization_pct=_number(row.get("utilization.gpu"), "utilization.gpu"),
        pcie_gen=_whole(row.get("pcie.link.gen.current"), "pcie.link.gen.current"),
        pcie_gen_max=_whole(row.get("pcie.link.gen.max"), "pcie.link.gen.max"),
        ecc_uncorrected_volatile=_whole(
            row.get("ecc.errors.uncorrected.volatile.total"),
            "ecc.errors.uncorrected.volatile.total",
        ),
        reasons_active=tuple(reasons),
    )


@guarded(TOOL)
def parse_query_gpu_csv(text: str) -> tuple[GpuQuerySample, ...]:
    """Every sample of every GPU, in the order printed."""
    body = require_text(TOOL, text)
    rows = list(csv.reader(io.StringIO(body), skipinitialspace=True))
    rows = [row for row in rows if row]
    header = [_name(cell) for cell in rows[0]]
    if "index" not in header:
        raise ParseFailure(TOOL, f"no header naming the GPU's index: {rows[0][:3]!r}")
    samples = []
    for number, row in enumerate(rows[1:], 2):
        if [_name(cell) for cell in row] == header:
            continue
        if len(row) != len(header):
            raise ParseFailure(
                TOOL, f"row {number} has {len(row)} values for {len(header)} fields (cut short?)"
            )
        samples.append(_sample(dict(zip(header, row, strict=True))))
    if not samples:
        raise ParseFailure(TOOL, "a header and no sample")
    return tuple(samples)
