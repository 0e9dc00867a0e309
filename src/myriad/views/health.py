"""`myriad health` on a terminal: one row per compute node, then how many are healthy."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from myriad.health.report import HealthReport


def _ago(now: float, then: float | None) -> str:
    if then is None:
        return "never"
    seconds = max(0, int(now - then))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def print_health(console: Console, report: HealthReport) -> None:
    table = Table(title=f"Node health of {report.cluster}", title_justify="left")
    for column in ("node", "state", "drained by / since", "last run", "failing / warnings"):
        table.add_column(column, overflow="fold")
    for n in report.nodes:
        state = "unreachable" if not n.reachable else "DRAIN" if n.drained else "up"
        if n.stale and n.reachable:
            state += " (stale)"
        by = ""
        if n.drained:
            by = n.drained_by or ""
            if n.drained_by == "myriad-health":
                by += f", {_ago(report.generated, n.since)}"
            elif n.reason:
                by += f": {n.reason}"
        problems = [f"[red]{x}[/red]" for x in n.failing] + n.warnings
        problems += [f"{x} unknown" for x in n.unknown]
        if n.note:
            problems.append(n.note)
        table.add_row(
            n.node,
            state,
            by,
            _ago(report.generated, n.last_run),
            "\n".join(problems) or "ok",
        )
    console.print(table)
    sick = [n.node for n in report.nodes if not n.healthy]
    console.print(
        f"{len(report.nodes) - len(sick)} of {len(report.nodes)} nodes healthy"
        + (f"; not: {', '.join(sick)}" if sick else ""),
        markup=False,
    )
