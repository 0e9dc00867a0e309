"""The node's host name as its kernel has it (the inventory name must match)."""

from __future__ import annotations

from myriad.node.facts.declare import fact, file

HOSTNAME = fact("hostname", file("hostname", "/proc/sys/kernel/hostname"), "hostname", str.strip)
