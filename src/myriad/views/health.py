"""`myriad health` on a terminal: one row per compute node, then how many are healthy; and
`--explain`, the action a finding asks for."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from myriad.health.actions import Rule
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


def print_explain(console: Console, name: str, entries: Sequence[tuple[str, Rule]]) -> None:
    """`myriad health --explain NAME`: the action each entry gets, whose word it is, and why.
    One entry as a paragraph; a table (every XID, every recovery action) as rows."""
    if len(entries) == 1:
        ((entry, rule),) = entries
        console.print(f"{entry}: {rule.action}", markup=False)
        if rule.name:
            console.print(f"  what: {rule.name}", markup=False)
        source = rule.source + (f" (bucket {rule.bucket})" if rule.bucket else "")
        console.print(f"  source: {source}", markup=False)
        console.print(f"  why: {rule.why}", markup=False)
        return
    table = Table(title=f"What {name} asks for", title_justify="left")
    for column in ("entry", "action", "source", "why"):
        table.add_column(column, overflow="fold")
    for entry, rule in entries:
        source = rule.source + (f"\n{rule.bucket}" if rule.bucket else "")
        what = f"{rule.name}: " if rule.name else ""
        table.add_row(entry, rule.action, source, what + rule.why)
    console.print(table)
