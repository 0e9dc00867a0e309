"""A roll's outcome once its lines have streamed by (`myriad roll`, `replace`, `remove`, image
mode's rollout): one row per node, why each failed node failed, what was not rolled, where
the log is, and what the verb adds (controllers left on their image)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.ops.roll_result import Progress, RollResult

STYLES = {"failed": "red", "skipped": "yellow"}


def progress_lines(console: Console) -> Progress:
    """The roll's lines as they happen, printed as they are (node names, reasons: text)."""
    return lambda line: console.print(line, markup=False, highlight=False)


def print_roll(console: Console, result: RollResult) -> None:
    for name in result.containers_only:
        console.print(
            f"{name}: not a Slurm node (no job can run there); container removed", markup=False
        )
    if result.log is not None:
        table = Table(title="roll", title_justify="left")
        for column in ("node", "batch", "status", "detail"):
            table.add_column(column)
        for node in result.nodes:
            table.add_row(
                Text(node.node),
                str(node.batch),
                node.status,
                Text(node.detail),
                style=STYLES.get(node.status, ""),
            )
        console.print(table)
        for node in result.nodes:
            if node.status == "failed":
                console.print(f"{node.node} failed: {node.detail}", markup=False)
        undone = [n.node for n in result.nodes if n.status == "pending"]
        if undone:
            console.print(f"not rolled: {', '.join(undone)}", markup=False)
        console.print(f"roll log: {result.log}", markup=False)
    for note in result.notes:
        console.print(note, markup=False)
