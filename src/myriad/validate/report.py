"""A validation run's results: the report object, terminal tables, JSON and JUnit XML.

The terminal shows a summary per check (how many nodes passed, failed, ...), a summary per
node for the nodes with problems, then every failure with expected, actual, the spec field
and the fix. JSON carries every result; JUnit XML has one testcase per node and check, so a
CI system lists each difference by node.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.errors import ValidateError
from myriad.fsutil import atomic_write_text
from myriad.node.checks import CHECK_ORDER, STATUSES, TITLES, CheckResult, Status

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


@dataclass(frozen=True, slots=True)
class CheckSummary:
    check: str
    title: str
    spec_fields: tuple[str, ...]
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class NodeSummary:
    node: str
    counts: Mapping[str, int]
    failing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidationReport:
    cluster: str
    spec: str
    results: tuple[CheckResult, ...]
    unreachable: Mapping[str, str] = field(default_factory=dict)
    gather_failed: Mapping[str, str] = field(default_factory=dict)
    gather_seconds: float | None = None
    evaluate_seconds: float | None = None
    run_dir: str | None = None
    view_source: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(result.status for result in self.results)
        return {status: counted.get(status, 0) for status in STATUSES}

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(result.node for result in self.results))

    @property
    def ok(self) -> bool:
        """Nothing failed and nothing could not be checked."""
        return not any(r.status in ("fail", "error") for r in self.results)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def problems(self) -> list[CheckResult]:
        return [r for r in self.results if r.status in ("fail", "error")]

    def by_check(self) -> list[CheckSummary]:
        counts: dict[str, Counter[str]] = {}
        fields: dict[str, dict[str, None]] = {}
        for result in self.results:
            counts.setdefault(result.check, Counter())[result.status] += 1
            fields.setdefault(result.check, {})[result.spec_field] = None
        return [
            CheckSummary(
                check,
                TITLES.get(check, check),
                tuple(fields[check]),
                {status: counts[check].get(status, 0) for status in STATUSES},
            )
            for check in sorted(counts, key=lambda c: (CHECK_ORDER.get(c, len(CHECK_ORDER)), c))
        ]

    def by_node(self) -> list[NodeSummary]:
        counts: dict[str, Counter[str]] = {}
        failing: dict[str, list[str]] = {}
        for result in self.results:
            counts.setdefault(result.node, Counter())[result.status] += 1
            if result.status in ("fail", "error"):
                failing.setdefault(result.node, []).append(result.check)
        return [
            NodeSummary(
                node,
                {status: counts[node].get(status, 0) for status in STATUSES},
                tuple(failing.get(node, ())),
            )
            for node in counts
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "spec": self.spec,
            "ok": self.ok,
            "counts": self.counts,
            "nodes": len(self.nodes),
            "unreachable": dict(self.unreachable),
            "gather_failed": dict(self.gather_failed),
            "gather_seconds": self.gather_seconds,
            "evaluate_seconds": self.evaluate_seconds,
            "run_dir": self.run_dir,
            "orchestrator_view_from": self.view_source,
            "checks": [
                {
                    "id": s.check,
                    "title": s.title,
                    "spec_fields": list(s.spec_fields),
                    **s.counts,
                }
                for s in self.by_check()
            ],
            "results": [result._asdict() for result in self.results],
        }


# --- terminal ----------------------------------------------------------------------------------


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


# --- JSON and JUnit --------------------------------------------------------------------------


def to_json(report: ValidationReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def _message(result: CheckResult) -> str:
    return f"expected {result.expected}; actual {result.actual}"


def _body(result: CheckResult) -> str:
    lines = [
        f"expected:   {result.expected}",
        f"actual:     {result.actual}",
        f"spec field: {result.spec_field}",
        f"fix:        {result.fix}",
    ]
    if result.detail:
        lines += ["", result.detail]
    return "\n".join(lines)


_JUNIT_TAG: dict[Status, str] = {"fail": "failure", "error": "error"}


def _suite(cluster: str, node: str, results: Sequence[CheckResult]) -> ET.Element:
    counted = Counter(r.status for r in results)
    suite = ET.Element(
        "testsuite",
        {
            "name": node,
            "tests": str(len(results)),
            "failures": str(counted["fail"]),
            "errors": str(counted["error"]),
            "skipped": str(counted["not-applicable"]),
        },
    )
    for result in results:
        case = ET.SubElement(
            suite, "testcase", {"classname": f"{cluster}.{node}", "name": result.check}
        )
        if result.status in ("fail", "error"):
            element = ET.SubElement(
                case, _JUNIT_TAG[result.status], {"message": _message(result), "type": result.check}
            )
            element.text = _body(result)
        elif result.status == "not-applicable":
            ET.SubElement(case, "skipped", {"message": f"not applicable: {result.actual}"})
    return suite


def to_junit(report: ValidationReport) -> str:
    by_node: dict[str, list[CheckResult]] = {}
    for result in report.results:
        by_node.setdefault(result.node, []).append(result)
    counts = report.counts
    root = ET.Element(
        "testsuites",
        {
            "name": f"myriad validate {report.cluster}",
            "tests": str(len(report.results)),
            "failures": str(counts["fail"]),
            "errors": str(counts["error"]),
            "skipped": str(counts["not-applicable"]),
        },
    )
    for node, results in by_node.items():
        root.append(_suite(report.cluster, node, results))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def write_junit(report: ValidationReport, path: Path) -> None:
    from myriad.fsutil import atomic_write_text

    atomic_write_text(path, to_junit(report))


def merge(reports: Iterable[ValidationReport]) -> ValidationReport:
    """One report from several (the node checks and --perf), in order."""
    reports = list(reports)
    first = reports[0]
    return ValidationReport(
        cluster=first.cluster,
        spec=first.spec,
        results=tuple(r for report in reports for r in report.results),
        unreachable={k: v for report in reports for k, v in report.unreachable.items()},
        gather_failed={k: v for report in reports for k, v in report.gather_failed.items()},
        gather_seconds=first.gather_seconds,
        evaluate_seconds=first.evaluate_seconds,
        run_dir=first.run_dir,
        view_source=first.view_source,
    )


# --- the last report, kept for `myriad report` ------------------------------------------------

LAST_REPORT = Path("validation") / "last.json"


def keep_last(report: ValidationReport, state_root: Path) -> None:
    """The cluster's latest validation, whole, beside its other state (replaced each run)."""
    atomic_write_text(state_root / LAST_REPORT, to_json(report), mode=0o600)


def read_last(state_root: Path) -> dict[str, Any] | None:
    """The kept report, or None when the cluster was never validated from this machine."""
    path = state_root / LAST_REPORT
    try:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidateError(f"{path}: the kept validation cannot be read ({exc})") from exc
    return document
