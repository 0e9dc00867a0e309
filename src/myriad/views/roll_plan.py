"""`myriad roll --plan` on a terminal: the controllers' reload, the batches, what would change."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.ops.roll import RollPlan


def print_roll_plan(console: Console, plan: RollPlan) -> None:
    console.print(f"roll plan for {plan.cluster} (reason {plan.reason!r})", markup=False)
    keys = f" [{', '.join(plan.reload_keys)}]" if plan.reload_keys else ""
    console.print(f"controllers {', '.join(plan.controllers)}: {plan.how}{keys}", markup=False)
    table = Table(title="batches", title_justify="left")
    for column in ("batch", "island", "node", "would change", "blocked by jobs"):
        table.add_column(column)
    for node in plan.nodes:
        table.add_row(
            str(node.batch),
            "-" if node.island is None else str(node.island),
            Text(node.node + (f" [{node.state}]" if node.state else "")),
            Text("; ".join(node.would_change) or "nothing"),
            Text(", ".join(node.blocked_by) or "-"),
        )
    console.print(table)
    for host, tasks in plan.controller_changes.items():
        console.print(f"{host} would change: {'; '.join(tasks)}", markup=False)
    for failure in plan.failures:
        console.print(f"check mode failed on {failure}", markup=False)
