"""The node package's commands, as the artefact runs them (`myriad.node.artefact`):

    python3 -I -S myriad-node.pyz gather ARGS     the probes: one JSON document (facts.yml)
    python3 -I -S myriad-node.pyz health ARGS     myriad-health, the node health runner
    python3 -I -S myriad-node.pyz converge ARGS   myriad-converge, image mode's runner
    python3 -I -S myriad-node.pyz hardware ARGS   discovery (the rdma and nccl roles):
                                                  map, check, rules, topology, capture

Each command is a module of the package with a `main(argv) -> int` (a package's command, as
hardware's, its `__main__`, what `python3 -m myriad.node.hardware` runs); it is imported only
when asked for, so one command never loads another's modules.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS = ("gather", "health", "converge", "hardware")
# The commands whose module is not myriad.node.<command>.
MODULES = {"hardware": "myriad.node.hardware.__main__"}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        given = f"unknown command {args[0]!r}; " if args else ""
        sys.stderr.write(f"myriad-node: {given}expected one of: {', '.join(COMMANDS)}\n")
        return 2
    module = importlib.import_module(MODULES.get(args[0], f"myriad.node.{args[0]}"))
    return int(module.main(args[1:]))


if __name__ == "__main__":
    sys.exit(main())
