"""`myriad health` on a terminal: one row per compute node, then how many are healthy, then
remediation's latest actions; `--explain`, the action a finding asks for; and `myriad
remedy`'s pass: its decisions, what was done, the budget and the breaker."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from myriad.health.actions import Rule
from myriad.health.remedy import ActionRecord
from myriad.health.report import HealthReport
from myriad.ops.remedy import RemedyResult

# The action log's newest entries `myriad health` shows; the whole log is the JSON file.
SHOWN_ACTIONS = 20


def _ago(now: float, then: float | None) -> str:
    if then is None:
        return "never"
    seconds = max(0, int(now - then))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def print_health(
    console: Console, report: HealthReport, actions: Sequence[ActionRecord] = ()
) -> None:
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
    print_actions(console, actions, report.generated)


def print_actions(console: Console, records: Sequence[ActionRecord], now: float) -> None:
    """Remediation's newest actions, newest first: what, why, when, by whom, the result."""
    if not records:
        return
    newest = sorted(records, key=lambda r: r.when, reverse=True)[:SHOWN_ACTIONS]
    shown = f" (newest {len(newest)} of {len(records)})" if len(records) > len(newest) else ""
    table = Table(title=f"Remediation actions{shown}", title_justify="left")
    for column in ("when", "node", "action", "result", "by", "why / detail"):
        table.add_column(column, overflow="fold")
    for r in newest:
        why = r.why + (f"\n{r.detail}" if r.detail else "")
        result = f"[red]{r.result}[/red]" if r.result == "failed" else r.result
        table.add_row(_ago(now, r.when), r.node, r.action, result, r.by, why)
    console.print(table)


def print_remedy(console: Console, result: RemedyResult) -> None:
    """`myriad remedy`: each decision with its status and what became of it."""
    plan = result.plan
    done = {o.decision.node: o for o in result.outcomes}
    title = f"Remediation of {result.cluster}" + (
        " (dry run: nothing done)" if plan.dry_run else ""
    )
    if not plan.decisions:
        console.print(f"{title}: no node needs remediation", markup=False)
    else:
        table = Table(title=title, title_justify="left")
        for column in ("node", "action", "decision", "outcome", "why"):
            table.add_column(column, overflow="fold")
        for d in plan.decisions:
            outcome = done.get(d.node)
            said = ""
            if outcome is not None:
                if outcome.status == "skipped":
                    said = f"skipped: {outcome.note}"
                elif outcome.status == "dry-run":
                    said = f"would run: {d.how}"
                elif outcome.record is not None:
                    said = outcome.record.result + (
                        f": {outcome.record.detail}" if outcome.record.detail else ""
                    )
            table.add_row(d.node, d.action, d.status, said, d.reason)
        console.print(table)
    for record in result.settled:
        console.print(
            f"{record.node}: {record.action} {record.result} ({record.detail})", markup=False
        )
    for node in result.resumed:
        verb = "would resume" if plan.dry_run else "resumed"
        console.print(f"{node}: answers again and its health passes: {verb}", markup=False)
    console.print(
        f"budget: {len(plan.in_remediation)} of {plan.max_nodes} nodes in remediation"
        + (f" ({', '.join(plan.in_remediation)})" if plan.in_remediation else ""),
        markup=False,
    )
    if plan.breaker.tripped:
        console.print(f"[red]breaker tripped[/red]: {plan.breaker.reason}")
    for rack in plan.racks:
        console.print(rack.reason, markup=False)
    if result.metrics:
        console.print(result.metrics, markup=False)


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
