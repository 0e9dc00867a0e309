"""/etc/nccl.conf, the NCCL defaults the nccl role writes."""

from __future__ import annotations

import sys

from myriad.node.facts.declare import fact, file


def _shared(text: str) -> str:
    # Files the roles render alike on every node: one copy for all of them.
    return sys.intern(text)


NCCL_CONF = fact("nccl_conf", file("nccl_conf", "/etc/nccl.conf"), "/etc/nccl.conf", _shared)
