"""An acceptance run's outcome (`myriad accept`): one row per judged test, failures first,
with expected, measured and their ratio; then what the search took, which nodes were drained
or resumed, the failures that drain no node, and where the run's record is."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.ops.accept_cluster import AcceptOutcome
from myriad.ops.accept_state import summary_rows


def _gbs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_accept(console: Console, outcome: AcceptOutcome) -> None:
    result = outcome.result
    table = Table(title=f"accept {outcome.level}: {outcome.cluster}", title_justify="left")
    for column in ("node", "test", "expected GB/s", "measured GB/s", "ratio", "result", "reason"):
        table.add_column(column)
    for row in summary_rows(outcome.run):
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        table.add_row(
            Text(row["node"]),
            Text(row["test"]),
            _gbs(row["expected_gbs"]),
            _gbs(row["measured_gbs"]),
            ratio,
            "passed" if row["passed"] else "FAILED",
            Text(row["reason"] or ""),
            style="" if row["passed"] else "red",
        )
    console.print(table)
    for row in summary_rows(outcome.run):
        for finding in row["findings"]:
            console.print(f"{row['node']} {row['test']}: {finding}", markup=False, soft_wrap=True)
    search = outcome.run.data.get("search")
    if search:
        console.print(
            f"slow-node search: {search['rounds']} rounds, {search['tests']} group tests, "
            f"{search['findings']} findings",
            markup=False,
        )
    for node in result.drained:
        console.print(f"{node}: drained ({result.verdicts[node]})", markup=False)
    for node in result.resumed:
        console.print(f"{node}: passed again, resumed", markup=False)
    for reason in result.elsewhere:
        console.print(f"failed, no node drained: {reason}", markup=False)
    passed = sum(1 for reason in result.verdicts.values() if reason is None)
    verdict = "passed" if result.passed else "FAILED"
    console.print(
        f"{verdict}: {passed} of {len(result.verdicts)} nodes passed; record in "
        f"{outcome.run.run_dir}",
        markup=False,
        soft_wrap=True,
    )
