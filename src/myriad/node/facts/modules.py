"""The loaded kernel modules (/proc/modules)."""

from __future__ import annotations

from myriad.node.facts.declare import fact, file


def _modules(text: str) -> frozenset[str]:
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip())


# lsmod prints /proc/modules as a table; reading the file needs no kmod package.
MODULES = fact("modules", file("modules", "/proc/modules"), "/proc/modules", _modules)
