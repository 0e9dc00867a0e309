"""`myriad status` on a terminal: one row per node, the last bring-up, Prometheus."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.bringup.verbs import ClusterStatus


def print_status(console: Console, status: ClusterStatus) -> None:
    table = Table(title=Text(f"Cluster {status.cluster}"), title_justify="left")
    for column in ("node", "state", "address", "last bring-up"):
        table.add_column(column)
    for node in status.nodes:
        bad = node.last_bringup in ("failed", "incomplete") or node.state not in ("running", "-")
        table.add_row(
            Text(node.name),
            Text(node.state),
            Text(node.address),
            Text(node.last_bringup),
            style="red" if bad else "",
        )
    console.print(table)
    console.print(status.summary, markup=False, highlight=False)
    if status.prometheus:
        console.print(f"Prometheus: {status.prometheus}", markup=False)
