"""A controller that answers `sinfo` and `squeue` from tables a test sets and records every
command it is given, for the day-2 verbs' `Slurm` (ops/slurm.py)."""

from __future__ import annotations

from collections.abc import Sequence

from myriad.ops.slurm import Completed


class RecordedController:
    """`sinfo` answers `self.sinfo` (node|state|reason lines), `squeue` `self.squeue`
    (job|node|user|name lines); any other command succeeds silently."""

    def __init__(self, sinfo: str, squeue: str = "") -> None:
        self.sinfo, self.squeue = sinfo, squeue
        self.commands: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.commands.append(tuple(argv))
        if argv[0] == "sinfo":
            return Completed(0, self.sinfo, "")
        if argv[0] == "squeue":
            return Completed(0, self.squeue, "")
        return Completed(0, "", "")

    def changes(self) -> list[tuple[str, ...]]:
        """The scontrol commands: what the verb changed."""
        return [c for c in self.commands if c[0] == "scontrol"]
