"""Slurm hostlist compression for the slurm role's templates.

    {{ ['gpu001', 'gpu002', 'gpu003', 'gpu007', 'login1'] | slurm_hostlist }}
    -> gpu[001-003,007],login1

Names are grouped by the text before their trailing number and by that number's width (so
zero padding survives: gpu[001-003] expands back to gpu001, gpu002, gpu003); names without a
trailing number, and entries that already hold a hostlist expression (``[``) or ``ALL``, pass
through unchanged. Groups keep the order in which they first appear; numbers in a group are
sorted and duplicates dropped. The result expands, with ``scontrol show hostnames``, to exactly
the set of names given.

The grouping is this filter's; writing each group is Myriad's one hostlist codec,
``myriad.node.parsers.slurm`` (whose ``expand_hostlist`` reads back what Slurm prints). On the
controller Ansible runs with Myriad installed; a node converging itself (image mode) has the
node package beside the roles, /opt/myriad/myriad-node.pyz, and imports it from there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

try:
    from myriad.node.parsers.slurm import compress_hostlist
except ImportError:
    # <home>/roles/slurm/filter_plugins/ -> <home>/myriad-node.pyz (provision/converge_bundle.py)
    sys.path.append(str(Path(__file__).resolve().parents[3] / "myriad-node.pyz"))
    from myriad.node.parsers.slurm import compress_hostlist

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
        else:
            numbers = sorted(set(groups[(text, width)]))
            parts.append(compress_hostlist(f"{text}{n:0{width}d}" for n in numbers))
    return ",".join(parts)


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, object]:
        return {"slurm_hostlist": slurm_hostlist}
