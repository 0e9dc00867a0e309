"""/etc/hosts, split into the common role's managed block and everything else."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from myriad.node.facts.declare import fact, file

# roles/common/vars/main.yml `__common_hosts_marker`, with {mark} = BEGIN / END.
HOSTS_BEGIN = "# BEGIN MYRIAD MANAGED BLOCK: cluster hosts"
HOSTS_END = "# END MYRIAD MANAGED BLOCK: cluster hosts"


@dataclass(frozen=True, slots=True)
class HostsFile:
    """/etc/hosts split into the common role's managed block (None when there is none)
    and everything else. The block lists every node of the cluster, identical on each:
    it is interned, so 12,500 nodes hold one copy and compare it by identity."""

    block: str | None
    rest: str


def _hosts(text: str) -> HostsFile:
    lines = text.splitlines()
    try:
        begin, end = lines.index(HOSTS_BEGIN), lines.index(HOSTS_END)
    except ValueError:
        return HostsFile(None, text)
    if end < begin:
        return HostsFile(None, text)
    block = sys.intern("\n".join(lines[begin + 1 : end]))
    return HostsFile(block, "\n".join(lines[:begin] + lines[end + 1 :]))


HOSTS_FILE = fact("hosts_file", file("hosts", "/etc/hosts"), "/etc/hosts", _hosts)
