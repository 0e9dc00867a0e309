"""`myriad bringup`'s outcome after its recap: what check mode found, and for each local
node that did not answer, its container's state and a command that works as printed."""

from __future__ import annotations

from rich.console import Console

from myriad.bringup.verbs import BringupResult


def print_bringup(console: Console, result: BringupResult) -> None:
    if result.check:
        changes = ", ".join(result.outcome.changed_hosts) or "no node"
        console.print(f"check mode: a run would change {changes}; nothing was changed")
    for line in result.advice:
        console.print(line, markup=False, highlight=False)
