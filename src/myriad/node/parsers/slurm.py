"""Parsers for Slurm: `scontrol show node [-o]`, `scontrol show topology`, sinfo gres.

Also the hostlist expression codec (`gpu[0001-0032,0040],ctl1`): the topology check
expands Nodes= lists with it, and the renderer writes topology.conf with the compressor.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from myriad.node.parsers.common import ParseFailure, first_line, guarded, require_text, to_int

__all__ = [
    "Gres",
    "SinfoGresCount",
    "SinfoNodeGres",
    "SlurmBlock",
    "SlurmNode",
    "SlurmSwitch",
    "SlurmTopology",
    "compress_hostlist",
    "expand_hostlist",
    "parse_gres",
    "parse_scontrol_nodes",
    "parse_scontrol_topology",
    "parse_sinfo_count_gres",
    "parse_sinfo_node_gres",
]

TOOL_HOSTLIST = "slurm hostlist"
TOOL_NODE = "scontrol show node"
TOOL_TOPOLOGY = "scontrol show topology"
TOOL_SINFO = "sinfo"
TOOL_GRES = "slurm gres"

# Far more than any cluster has nodes; stops `n[0-99999999999]` from eating memory.
MAX_HOSTLIST_NAMES = 1 << 20

# --- hostlist ----------------------------------------------------------------------------

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _split_top_level(
    text: str, *, tool: str = TOOL_HOSTLIST, brackets: str = "[]", nested: bool = False
) -> list[str]:
    """Split on commas that are not inside brackets (hostlists: `[]`, never nested;
    gres: `()`)."""
    opening, closing = brackets[0], brackets[1]
    parts: list[str] = []
    depth = start = 0
    for i, char in enumerate(text):
        if char == opening:
            depth += 1
            if depth > 1 and not nested:
                raise ParseFailure(tool, f"nested brackets in {text!r}")
        elif char == closing:
            depth -= 1
            if depth < 0:
                raise ParseFailure(tool, f"unbalanced {closing!r} in {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ParseFailure(tool, f"unclosed {opening!r} in {text!r}")
    parts.append(text[start:])
    return parts


def _bracket_values(body: str, expr: str) -> list[str]:
    """The names inside one `[...]`, zero-padded to the width of each range's start."""
    values: list[str] = []
    for item in body.split(","):
        match = _RANGE.fullmatch(item.strip())
        if match is None:
            raise ParseFailure(TOOL_HOSTLIST, f"bad range {item!r} in {expr!r}")
        lo_text, hi_text = match.group(1), match.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise ParseFailure(TOOL_HOSTLIST, f"range {item!r} runs backwards in {expr!r}")
        if len(values) + hi - lo + 1 > MAX_HOSTLIST_NAMES:
            raise ParseFailure(TOOL_HOSTLIST, f"{expr!r} names more than {MAX_HOSTLIST_NAMES}")
        width = len(lo_text)
        values.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return values


def _expand_one(piece: str, expr: str) -> list[str]:
    # A piece is literal text and bracket groups; several groups multiply out
    # (rack[1-2]-n[1-2] is four names), as Slurm's hostlist does.
    segments: list[list[str]] = []
    position = 0
    for group in re.finditer(r"\[([^\[\]]*)\]", piece):
        if group.start() > position:
            segments.append([piece[position : group.start()]])
        if not group.group(1):
            raise ParseFailure(TOOL_HOSTLIST, f"empty brackets in {expr!r}")
        segments.append(_bracket_values(group.group(1), expr))
        position = group.end()
    if position < len(piece):
        segments.append([piece[position:]])
    total = 1
    for segment in segments:
        total *= len(segment)
    if total > MAX_HOSTLIST_NAMES:
        raise ParseFailure(TOOL_HOSTLIST, f"{expr!r} names more than {MAX_HOSTLIST_NAMES}")
    return ["".join(combo) for combo in itertools.product(*segments)]


@guarded(TOOL_HOSTLIST)
def expand_hostlist(expr: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist expression into names, in order, zero padding kept.

    `gpu[0001-0003,0040],ctl1` gives gpu0001, gpu0002, gpu0003, gpu0040, ctl1. The
    empty expression names no hosts.
    """
    if not isinstance(expr, str):
        raise ParseFailure(TOOL_HOSTLIST, f"expected text, got {type(expr).__name__}")
    stripped = expr.strip()
    if not stripped:
        return ()
    names: list[str] = []
    for piece in _split_top_level(stripped):
        piece = piece.strip()
        if not piece or any(c.isspace() for c in piece):
            raise ParseFailure(TOOL_HOSTLIST, f"empty or blank-containing name in {expr!r}")
        names.extend(_expand_one(piece, expr))
        if len(names) > MAX_HOSTLIST_NAMES:
            raise ParseFailure(TOOL_HOSTLIST, f"{expr!r} names more than {MAX_HOSTLIST_NAMES}")
    return tuple(names)


_NUMBERED = re.compile(r"(.*?)(\d+)(\D*)")


@dataclass(slots=True)
class _Run:
    """Consecutive names `prefix<n>suffix`, n from lo to hi, padded to len(lo_text)."""

    lo_text: str
    hi: int

    def render(self) -> str:
        if int(self.lo_text) == self.hi:
            return self.lo_text
        return f"{self.lo_text}-{str(self.hi).zfill(len(self.lo_text))}"

    def extends_to(self, digits: str) -> bool:
        value = int(digits)
        return value == self.hi + 1 and digits == str(value).zfill(len(self.lo_text))


@dataclass(slots=True)
class _Group:
    prefix: str
    suffix: str
    runs: list[_Run]

    def render(self) -> str:
        if len(self.runs) == 1 and int(self.runs[0].lo_text) == self.runs[0].hi:
            return f"{self.prefix}{self.runs[0].lo_text}{self.suffix}"
        body = ",".join(run.render() for run in self.runs)
        return f"{self.prefix}[{body}]{self.suffix}"


def _natural_key(name: str) -> tuple[str, str, int, str]:
    match = _NUMBERED.fullmatch(name)
    if match is None:
        return (name, "", -1, "")
    return (match.group(1), match.group(3), int(match.group(2)), match.group(2))


def compress_hostlist(names: Iterable[str], *, sort: bool = False) -> str:
    """Write names as one Slurm hostlist expression; expand_hostlist gives them back.

    The order of `names` is kept (only neighbours merge into ranges), so expanding the
    result returns exactly the input. With sort=True the names are first put in natural
    order without duplicates, which gives the shortest form for topology.conf.
    """
    items = list(names)
    for name in items:
        if not isinstance(name, str) or not name or re.search(r"[\[\],\s]", name):
            raise ValueError(f"not a host name that a hostlist can hold: {name!r}")
    if sort:
        items = sorted(set(items), key=_natural_key)
    groups: list[_Group | str] = []
    for name in items:
        match = _NUMBERED.fullmatch(name)
        if match is None:
            groups.append(name)
            continue
        prefix, digits, suffix = match.groups()
        last = groups[-1] if groups else None
        if isinstance(last, _Group) and (last.prefix, last.suffix) == (prefix, suffix):
            if last.runs[-1].extends_to(digits):
                last.runs[-1].hi = int(digits)
            else:
                last.runs.append(_Run(digits, int(digits)))
        else:
            groups.append(_Group(prefix, suffix, [_Run(digits, int(digits))]))
    return ",".join(g if isinstance(g, str) else g.render() for g in groups)


# --- gres --------------------------------------------------------------------------------

_GRES_ITEM = re.compile(r"(?P<spec>[^()]+?)(?:\((?P<detail>[^()]*)\))?")
_COUNT = re.compile(r"(\d+)([KMGTP]?)")
_COUNT_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


@dataclass(frozen=True, slots=True)
class Gres:
    """One generic resource, e.g. gpu:h100:8(S:0-1) → name gpu, type h100, count 8."""

    name: str
    type: str | None
    count: int
    detail: str | None


def _split_gres(text: str) -> list[str]:
    return _split_top_level(text, tool=TOOL_GRES, brackets="()", nested=True)


def _gres_item(item: str, text: str) -> Gres:
    match = _GRES_ITEM.fullmatch(item)
    if match is None:
        raise ParseFailure(TOOL_GRES, f"bad gres {item!r} in {text!r}")
    parts = match.group("spec").split(":")
    if not all(parts):
        raise ParseFailure(TOOL_GRES, f"empty field in gres {item!r}")
    # Slurm prints name[:type]:count; without a count the item was cut short (a
    # configured `gpu` alone means one, but sinfo and scontrol print the 1).
    counted = _COUNT.fullmatch(parts[-1]) if len(parts) > 1 else None
    if counted is None or len(parts) > 3:
        raise ParseFailure(TOOL_GRES, f"expected name[:type]:count, got {item!r}")
    return Gres(
        name=parts[0],
        type=parts[1] if len(parts) == 3 else None,
        count=int(counted.group(1)) * _COUNT_SCALE[counted.group(2)],
        detail=match.group("detail"),
    )


@guarded(TOOL_GRES)
def parse_gres(text: str) -> tuple[Gres, ...]:
    """Parse a Gres= or %G value; `(null)` and the empty string mean none."""
    if not isinstance(text, str):
        raise ParseFailure(TOOL_GRES, f"expected text, got {type(text).__name__}")
    stripped = text.strip()
    if stripped in ("", "(null)"):
        return ()
    return tuple(_gres_item(item, stripped) for item in _split_gres(stripped))


# --- scontrol show node ------------------------------------------------------------------

_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_]*)=")
# The reason's author and time, which scontrol appends after the free-text reason.
_REASON_END = re.compile(r"\[[^\[\]\s@]+@[^\[\]\s]+\](?=\s|$)")
# Keys scontrol prints after Reason=; a free-text reason without [user@time] ends at one.
_AFTER_REASON = frozenset({"Comment", "Extra", "InstanceId", "InstanceType", "ReservationName"})
# scontrol never ends a record with these keys, so a record that does was cut inside
# the value, which may then look complete (RealMemory=20 from RealMemory=2000000).
_NEVER_LAST = frozenset(
    {
        "NodeName",
        "State",
        "CPUTot",
        "RealMemory",
        "Gres",
        "CfgTRES",
        "Partitions",
        "AvailableFeatures",
    }
)
# Values that scontrol prints as free text; any other value with a blank in it means a
# key was cut short and its text ran into the value before it.
_FREE_TEXT = frozenset({"OS", "Reason", "Comment", "Extra"})
# Base node states of node_state_string(); the flags after "+" vary more by release.
_BASE_STATES = frozenset(
    {
        "ALLOCATED",
        "ALLOC",
        "COMPLETING",
        "DOWN",
        "DRAINED",
        "DRAINING",
        "ERROR",
        "FAIL",
        "FAILING",
        "FUTURE",
        "IDLE",
        "MAINT",
        "MIXED",
        "PERFCTRS",
        "PLANNED",
        "POWER_DOWN",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "REBOOT",
        "RESERVED",
        "UNKNOWN",
        "BLOCKED",
        "CLOUD",
        "INVAL",
    }
)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str
    state_flags: tuple[str, ...]
    not_responding: bool
    cpus_total: int | None
    real_memory_mib: int | None
    gres: tuple[Gres, ...]
    cfg_tres: dict[str, str]
    partitions: tuple[str, ...]
    features: tuple[str, ...]
    reason: str | None
    fields: dict[str, str]

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state_flags


def _reason_end(record: str, start: int, keys: list[re.Match[str]]) -> int:
    tail = _REASON_END.search(record, start)
    if tail is not None:
        return tail.end()
    for key in keys:
        if key.start() > start and key.group(1) in _AFTER_REASON:
            return key.start()
    return len(record)


def _key_values(record: str) -> dict[str, str]:
    """Split `Key=Value Key=Value ...`; values may hold spaces (OS=, Reason=)."""
    keys = list(_KEY.finditer(record))
    if not keys or keys[0].start() != 0:
        raise ParseFailure(TOOL_NODE, f"not a Key=Value record: {record[:60]!r}")
    pairs: dict[str, str] = {}
    i = 0
    while i < len(keys):
        key = keys[i]
        if key.group(1) == "Reason":
            end = _reason_end(record, key.end(), keys)
            while i + 1 < len(keys) and keys[i + 1].start() < end:
                i += 1
        else:
            end = keys[i + 1].start() if i + 1 < len(keys) else len(record)
        raw = record[key.end() : end].rstrip()
        # Only free text may hold blanks; elsewhere a blank means a key name was cut and
        # its remains ran into this value, even an empty one ("AllocTRES= Cap").
        if key.group(1) not in _FREE_TEXT and re.search(r"\s", raw):
            raise ParseFailure(TOOL_NODE, f"{key.group(1)}= holds stray text {raw.strip()!r}")
        pairs.setdefault(key.group(1), raw.strip())
        i += 1
    last = keys[-1].group(1)
    if last in _NEVER_LAST:
        raise ParseFailure(TOOL_NODE, f"record ends inside {last}=; the output looks truncated")
    return pairs


def _records(body: str) -> list[str]:
    # -o prints one node per line; the default form starts each node with NodeName= at
    # column 0 and indents its continuation lines.
    records: list[str] = []
    for raw in body.splitlines():
        if not raw.strip():
            continue
        if raw[:1].isspace() and records:
            records[-1] += " " + raw.strip()
        else:
            records.append(raw.strip())
    return records


def _tres(value: str | None) -> dict[str, str]:
    if not value:
        return {}
    pairs = {}
    for item in value.split(","):
        key, sep, amount = item.partition("=")
        if not sep or not key:
            raise ParseFailure(TOOL_NODE, f"bad TRES entry {item!r}")
        pairs[key] = amount
    return pairs


def _list(value: str | None) -> tuple[str, ...]:
    if not value or value == "(null)":
        return ()
    return tuple(v for v in value.split(",") if v)


def _optional_int(value: str | None, what: str) -> int | None:
    return to_int(TOOL_NODE, value, what) if value is not None else None


def _node(record: str) -> SlurmNode:
    fields = _key_values(record)
    name = fields.get("NodeName")
    if not name:
        raise ParseFailure(TOOL_NODE, f"record without NodeName: {record[:60]!r}")
    state_text = fields.get("State")
    if not state_text:
        raise ParseFailure(TOOL_NODE, f"{name}: no State; the output looks truncated")
    base, *flags = state_text.split("+")
    if base.rstrip("*~#!%$@^-") not in _BASE_STATES or not all(flags):
        raise ParseFailure(TOOL_NODE, f"{name}: unexpected State {state_text!r}")
    try:
        gres = parse_gres(fields.get("Gres", ""))
    except ParseFailure as exc:
        raise ParseFailure(TOOL_NODE, f"{name} Gres: {exc.reason}") from None
    return SlurmNode(
        name=name,
        state=base.rstrip("*~#!%$@^-"),
        state_flags=tuple(flags),
        not_responding=base.endswith("*"),
        cpus_total=_optional_int(fields.get("CPUTot"), f"{name} CPUTot"),
        real_memory_mib=_optional_int(fields.get("RealMemory"), f"{name} RealMemory"),
        gres=gres,
        cfg_tres=_tres(fields.get("CfgTRES")),
        partitions=_list(fields.get("Partitions")),
        features=_list(fields.get("AvailableFeatures")),
        reason=fields.get("Reason") or None,
        fields=fields,
    )


@guarded(TOOL_NODE)
def parse_scontrol_nodes(text: str) -> tuple[SlurmNode, ...]:
    """Parse `scontrol show node -o` (or without -o), one SlurmNode per node."""
    body = require_text(TOOL_NODE, text)
    records = _records(body)
    if not records[0].startswith("NodeName="):
        raise ParseFailure(TOOL_NODE, f"not scontrol node output: {first_line(body)!r}")
    return tuple(_node(record) for record in records)


# --- scontrol show topology --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlurmSwitch:
    name: str
    level: int | None
    link_speed: int | None
    nodes: tuple[str, ...]
    switches: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SlurmBlock:
    """A topology/block record (Slurm 23.11 and later)."""

    name: str
    index: int | None
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SlurmTopology:
    switches: tuple[SlurmSwitch, ...]
    blocks: tuple[SlurmBlock, ...]

    def leaf_of(self, node: str) -> str | None:
        """The switch a node hangs from, if any."""
        for switch in self.switches:
            if node in switch.nodes:
                return switch.name
        return None


def _topology_fields(line: str, number: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
            raise ParseFailure(TOOL_TOPOLOGY, f"line {number}: not Key=Value: {token!r}")
        fields[key] = value
    return fields


def _hosts(value: str | None, number: int) -> tuple[str, ...]:
    try:
        return expand_hostlist(value or "")
    except ParseFailure as exc:
        raise ParseFailure(TOOL_TOPOLOGY, f"line {number}: {exc.reason}") from None


def _topology_int(value: str | None, what: str, number: int) -> int | None:
    return to_int(TOOL_TOPOLOGY, value, f"line {number} {what}") if value is not None else None


@guarded(TOOL_TOPOLOGY)
def parse_scontrol_topology(text: str) -> SlurmTopology:
    """Parse `scontrol show topology` for topology/tree (SwitchName=) and topology/block."""
    body = require_text(TOOL_TOPOLOGY, text)
    switches: list[SlurmSwitch] = []
    blocks: list[SlurmBlock] = []
    for number, raw in enumerate(body.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = _topology_fields(raw, number)
        if "SwitchName" in fields:
            switches.append(
                SlurmSwitch(
                    name=fields["SwitchName"],
                    level=_topology_int(fields.get("Level"), "Level", number),
                    link_speed=_topology_int(fields.get("LinkSpeed"), "LinkSpeed", number),
                    nodes=_hosts(fields.get("Nodes"), number),
                    switches=_hosts(fields.get("Switches"), number),
                )
            )
        elif "BlockName" in fields:
            blocks.append(
                SlurmBlock(
                    name=fields["BlockName"],
                    index=_topology_int(fields.get("BlockIndex"), "BlockIndex", number),
                    nodes=_hosts(fields.get("Nodes"), number),
                )
            )
        else:
            raise ParseFailure(TOOL_TOPOLOGY, f"line {number}: neither SwitchName nor BlockName")
    return SlurmTopology(switches=tuple(switches), blocks=tuple(blocks))


# --- sinfo -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SinfoNodeGres:
    node: str
    gres: tuple[Gres, ...]


@dataclass(frozen=True, slots=True)
class SinfoGresCount:
    nodes: int
    gres: tuple[Gres, ...]


def _two_columns(body: str) -> list[tuple[int, str, str]]:
    rows = []
    for number, raw in enumerate(body.splitlines(), start=1):
        if not raw.strip():
            continue
        columns = raw.split()
        if len(columns) != 2:
            raise ParseFailure(TOOL_SINFO, f"line {number}: expected 2 columns: {raw.strip()!r}")
        rows.append((number, columns[0], columns[1]))
    return rows


def _sinfo_gres(value: str, number: int) -> tuple[Gres, ...]:
    try:
        return parse_gres(value)
    except ParseFailure as exc:
        raise ParseFailure(TOOL_SINFO, f"line {number}: {exc.reason}") from None


@guarded(TOOL_SINFO)
def parse_sinfo_node_gres(text: str) -> tuple[SinfoNodeGres, ...]:
    """Parse `sinfo -N -h -o "%n %G"`. A node in several partitions appears once per partition."""
    body = require_text(TOOL_SINFO, text)
    return tuple(
        SinfoNodeGres(node=node, gres=_sinfo_gres(gres, number))
        for number, node, gres in _two_columns(body)
    )


@guarded(TOOL_SINFO)
def parse_sinfo_count_gres(text: str) -> tuple[SinfoGresCount, ...]:
    """Parse `<node count> <gres>` rows, e.g. `sinfo -h -O "Nodes: ,GresUsed:"`."""
    body = require_text(TOOL_SINFO, text)
    return tuple(
        SinfoGresCount(
            nodes=to_int(TOOL_SINFO, count, f"line {number} node count"),
            gres=_sinfo_gres(gres, number),
        )
        for number, count, gres in _two_columns(body)
    )
