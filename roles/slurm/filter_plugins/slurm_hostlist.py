"""Slurm hostlist compression for the slurm role's templates.

    {{ ['gpu001', 'gpu002', 'gpu003', 'gpu007', 'login1'] | slurm_hostlist }}
    -> gpu[001-003,007],login1

Names are grouped by the text before their trailing number and by that number's width (so
zero padding survives: gpu[001-003] expands back to gpu001, gpu002, gpu003); names without a
trailing number, and entries that already hold a hostlist expression (``[``) or ``ALL``, pass
through unchanged. Groups keep the order in which they first appear; numbers in a group are
sorted and duplicates dropped. The result expands, with ``scontrol show hostnames``, to exactly
the set of names given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DOCUMENTATION = """
name: slurm_hostlist
short_description: Compress host names into a Slurm hostlist expression
description:
  - Turns a list of host names into the compact form Slurm reads in slurm.conf and
    topology.conf, for example C(gpu[001-032]).
positional: _input
options:
  _input:
    description: Host names (strings). Entries that already are hostlist expressions pass through.
    type: list
    elements: str
    required: true
"""

_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)$")


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def slurm_hostlist(names: Iterable[str] | str) -> str:
    """Compress ``names`` into one Slurm hostlist expression."""
    if isinstance(names, str):
        names = [part for part in names.split(",") if part]
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, str, int]] = []  # (kind, text, width) in first-seen order
    seen_plain: set[str] = set()
    for raw in names:
        name = str(raw).strip()
        if not name:
            continue
        match = _NUMBERED.match(name)
        if match is None or "[" in name or name.upper() == "ALL":
            if name not in seen_plain:
                seen_plain.add(name)
                order.append(("plain", name, 0))
            continue
        prefix, digits = match.group("prefix"), match.group("number")
        key = (prefix, len(digits))
        if key not in groups:
            groups[key] = []
            order.append(("group", prefix, len(digits)))
        groups[key].append(int(digits))

    parts: list[str] = []
    for kind, text, width in order:
        if kind == "plain":
            parts.append(text)
            continue
        runs = _ranges(groups[(text, width)])
        if len(runs) == 1 and runs[0][0] == runs[0][1]:
            parts.append(f"{text}{runs[0][0]:0{width}d}")
            continue
        spans = [
            f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}"
            for low, high in runs
        ]
        parts.append(f"{text}[{','.join(spans)}]")
    return ",".join(parts)


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, object]:
        return {"slurm_hostlist": slurm_hostlist}
