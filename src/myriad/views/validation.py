"""`myriad validate` on a terminal: the gathering's status line, then the report's tables.

A summary per check (how many nodes passed, failed, ...), a summary per node for the nodes
with problems, then every failure with expected, actual, the spec field and the fix. The
report itself (`myriad.validate.report.ValidationReport`) is the verb's result; this module
only draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.node.checks import STATUSES
from myriad.validate.report import ValidationReport

STYLE: dict[str, str] = {
    "pass": "green",
    "fail": "bold red",
    "not-applicable": "dim",
    "error": "yellow",
}
# The terminal lists this many nodes and failures; JSON and JUnit always hold all of them.
TERMINAL_NODES = 40
TERMINAL_FAILURES = 200
TERMINAL_DETAILS = 10

_ANSWERED = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")


class GatherStatus:
    """A status line counting the nodes whose facts have come back (validation's
    `Gathering`, myriad.validate.service)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @contextmanager
    def gathering(self, nodes: int) -> Iterator[Callable[[Mapping[str, Any]], None]]:
        done = 0
        with self.console.status(f"gathering facts from {nodes:,} nodes") as status:

            def on_event(event: Mapping[str, Any]) -> None:
                nonlocal done
                if event.get("event") in _ANSWERED:
                    done += 1
                    status.update(f"gathering facts: {done:,} of {nodes:,} nodes answered")

            yield on_event


def _count_cell(status: str, count: int) -> Text:
    if count == 0:
        return Text("·", style="dim")
    return Text(f"{count:,}", style=STYLE[status] if status != "pass" else "green")


def check_table(report: ValidationReport, verbose: bool = True) -> Table | None:
    """Every check with its counts; without `verbose` only those that failed or could not
    be read somewhere (a passing 4-node cluster printed ~58 rows, most of them n/a)."""
    summaries = [
        summary
        for summary in report.by_check()
        if verbose or summary.counts["fail"] or summary.counts["error"]
    ]
    if not summaries:
        return None
    table = Table(title="Checks", title_justify="left")
    table.add_column("check")
    table.add_column("what")
    table.add_column("spec field", overflow="fold")
    for status in STATUSES:
        table.add_column("n/a" if status == "not-applicable" else status, justify="right")
    for summary in summaries:
        only_na = summary.counts["not-applicable"] == sum(summary.counts.values())
        table.add_row(
            summary.check,
            summary.title,
            ", ".join(summary.spec_fields),
            *(_count_cell(status, summary.counts[status]) for status in STATUSES),
            style="dim" if only_na else None,
        )
    return table


def node_table(report: ValidationReport) -> Table | None:
    problem_nodes = [s for s in report.by_node() if s.failing]
    if not problem_nodes:
        return None
    table = Table(title="Nodes with problems", title_justify="left")
    table.add_column("node")
    for status in STATUSES:
        table.add_column("n/a" if status == "not-applicable" else status, justify="right")
    table.add_column("failing checks", overflow="fold")
    for summary in problem_nodes[:TERMINAL_NODES]:
        table.add_row(
            summary.node,
            *(_count_cell(status, summary.counts[status]) for status in STATUSES),
            ", ".join(summary.failing),
        )
    if len(problem_nodes) > TERMINAL_NODES:
        table.caption = f"{len(problem_nodes) - TERMINAL_NODES:,} more nodes in --json / --junit"
    return table


def failure_table(report: ValidationReport) -> Table | None:
    problems = report.problems()
    if not problems:
        return None
    table = Table(title="Differences", title_justify="left", show_lines=True)
    for column in ("node", "check", "expected", "actual", "spec field", "fix"):
        table.add_column(column, overflow="fold")
    for result in problems[:TERMINAL_FAILURES]:
        actual = Text(result.actual, style=STYLE[result.status])
        table.add_row(
            result.node, result.check, result.expected, actual, result.spec_field, result.fix
        )
    if len(problems) > TERMINAL_FAILURES:
        table.caption = f"{len(problems) - TERMINAL_FAILURES:,} more in --json / --junit"
    return table


def print_report(console: Console, report: ValidationReport, verbose: bool = False) -> None:
    nodes = len(report.nodes)
    gathered = nodes - len(report.unreachable) - len(report.gather_failed)
    took = f" in {report.gather_seconds:.1f} s" if report.gather_seconds is not None else ""
    console.print(
        f"[bold]Validation of {report.cluster}[/bold]: facts from {gathered:,} of {nodes:,} "
        f"nodes{took}"
        + (f"; Slurm/Kubernetes view from {report.view_source}" if report.view_source else "")
    )
    for table in (check_table(report, verbose), node_table(report), failure_table(report)):
        if table is not None:
            console.print(table)
    detailed = [result for result in report.problems() if result.detail]
    for result in detailed[:TERMINAL_DETAILS]:
        console.print(f"[bold]{result.node} {result.check}[/bold]")
        console.print(Text(result.detail))
    if len(detailed) > TERMINAL_DETAILS:
        console.print(f"{len(detailed) - TERMINAL_DETAILS:,} more diffs in --json / --junit")
    if report.unreachable:
        console.print(
            f"[bold red]{len(report.unreachable):,} unreachable node(s)[/bold red], counted as "
            "failures: " + ", ".join(sorted(report.unreachable))
        )
    counts = report.counts
    summary = (
        f"{counts['pass']:,} passed, {counts['fail']:,} failed, {counts['error']:,} errors, "
        f"{counts['not-applicable']:,} not applicable"
    )
    if not verbose:
        summary += " (--verbose lists every check)"
    if report.ok:
        console.print(f"[bold green]the cluster matches its spec[/bold green]: {summary}")
    else:
        console.print(f"[bold red]the cluster differs from its spec[/bold red]: {summary}")
    if report.run_dir:
        console.print(f"gathering log: {report.run_dir}")


def print_lines(console: Console, lines: Sequence[str]) -> None:
    """`validate --fabric`'s comparison: text, whole (a cable's name never folds)."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
