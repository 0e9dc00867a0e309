"""Parser for nccl-tests output: all_reduce_perf, all_gather_perf, alltoall_perf and the rest.

Every nccl-tests binary prints the same table (nccl-tests `src/common.cu`): a `# nThread ...`
line, the ranks (`#  Rank  0 Group  0 Pid ... on HOST device  0 [...] MODEL`), a two-line
header, one row per message size with size, count, type, redop, root (since nccl-tests 2.10;
-1 where the collective has none), then time, algbw, busbw and #wrong out of place and the
same four in place, and at the end `# Out of bounds values : N OK|FAILED` and
`# Avg bus bandwidth    : X`. A run that was killed, timed out or lost a rank stops before
the average line, so a table without it is output cut short, never a result; so is an
average line cut inside its number (the tool prints a space after it).

mpirun's `--tag-output` prefixes every line with `[1,0]<stdout>:`; that tag is removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from myriad.node.parsers.common import ParseFailure, first_line, guarded, require_text

__all__ = ["NcclRank", "NcclRow", "NcclTestsRun", "parse_nccl_tests"]

TOOL = "nccl-tests"


@dataclass(frozen=True, slots=True)
class NcclRank:
    rank: int
    host: str
    device: int
    model: str


@dataclass(frozen=True, slots=True)
class NcclRow:
    """One message size. `root` is None for releases before the root column; `wrong` None
    where data checking was off (N/A)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    wrong: int | None
    in_place_time_us: float
    in_place_algbw_gbs: float
    in_place_busbw_gbs: float
    in_place_wrong: int | None

    @property
    def best_busbw_gbs(self) -> float:
        return max(self.busbw_gbs, self.in_place_busbw_gbs)


@dataclass(frozen=True, slots=True)
class NcclTestsRun:
    ranks: tuple[NcclRank, ...]
    rows: tuple[NcclRow, ...]
    avg_busbw_gbs: float
    out_of_bounds: int | None
    collective: str | None  # from `# Collective test concluded: NAME` (newer releases)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(rank.host for rank in self.ranks))

    @property
    def largest(self) -> NcclRow:
        return max(self.rows, key=lambda row: row.size_bytes)

    @property
    def busbw_gbs(self) -> float:
        """busbw at the largest message, the better of out-of-place and in-place."""
        return self.largest.best_busbw_gbs

    @property
    def wrong_results(self) -> int:
        return sum((row.wrong or 0) + (row.in_place_wrong or 0) for row in self.rows)


_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_RANK = re.compile(
    r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.*)"
)
# nccl-tests prints the average as "%g %s\n": a space follows the number, so a line that ends
# right after digits was cut inside the number and is not read.
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)\s")
_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_CONCLUDED = re.compile(r"#\s*Collective test concluded:\s*(\S+)")
_ROW_START = re.compile(r"\d+\s+\d+\s")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _float(value: str, what: str, number: int) -> float:
    if not _NUMBER.fullmatch(value):
        raise ParseFailure(TOOL, f"could not read line {number}: {what} is not a number: {value!r}")
    return float(value)


def _wrong(value: str, number: int) -> int | None:
    if value == "N/A":
        return None
    # Releases before 2.10 print an error magnitude (0e+00) in place of a count.
    return int(_float(value, "#wrong", number))


def _row(columns: list[str], number: int) -> NcclRow:
    if len(columns) == 12:
        root = None
    elif len(columns) == 13:
        if not re.fullmatch(r"-?\d+", columns[4]):
            raise ParseFailure(
                TOOL, f"could not read line {number}: root is not an integer: {columns[4]!r}"
            )
        root = int(columns.pop(4))
    else:
        raise ParseFailure(
            TOOL,
            f"could not read line {number}: a result row has 12 or 13 columns, "
            f"this one {len(columns)} (cut short?)",
        )
    return NcclRow(
        size_bytes=int(columns[0]),
        count=int(columns[1]),
        dtype=columns[2],
        redop=columns[3],
        root=root,
        time_us=_float(columns[4], "time", number),
        algbw_gbs=_float(columns[5], "algbw", number),
        busbw_gbs=_float(columns[6], "busbw", number),
        wrong=_wrong(columns[7], number),
        in_place_time_us=_float(columns[8], "in-place time", number),
        in_place_algbw_gbs=_float(columns[9], "in-place algbw", number),
        in_place_busbw_gbs=_float(columns[10], "in-place busbw", number),
        in_place_wrong=_wrong(columns[11], number),
    )


@guarded(TOOL)
def parse_nccl_tests(text: str) -> NcclTestsRun:
    """Read one nccl-tests run; output without its result table or its average is refused."""
    body = require_text(TOOL, text)
    ranks: list[NcclRank] = []
    rows: list[NcclRow] = []
    avg: float | None = None
    bounds: int | None = None
    collective: str | None = None
    for number, raw in enumerate(body.splitlines(keepends=True), start=1):
        whole = _TAG.sub("", raw).lstrip()
        line = whole.strip()
        if not line:
            continue
        if line.startswith("#"):
            if rank := _RANK.fullmatch(line):
                ranks.append(NcclRank(int(rank[1]), rank[2], int(rank[3]), rank[4].strip()))
            elif match := _AVG.match(whole):
                avg = _float(match[1], "average bus bandwidth", number)
            elif match := _BOUNDS.match(line):
                bounds = int(match[1])
            elif match := _CONCLUDED.match(line):
                collective = match[1]
            continue
        if _ROW_START.match(line):
            if avg is not None:
                raise ParseFailure(
                    TOOL, f"could not read line {number}: a result row after the average"
                )
            rows.append(_row(line.split(), number))
        # Anything else is NCCL's own log (NCCL INFO/WARN) or the launcher's; not the table.
    if not rows:
        raise ParseFailure(TOOL, f"could not read a result table: {first_line(body)!r}")
    if avg is None:
        raise ParseFailure(
            TOOL, "could not read '# Avg bus bandwidth': the run stopped before it finished"
        )
    return NcclTestsRun(tuple(ranks), tuple(rows), avg, bounds, collective)
