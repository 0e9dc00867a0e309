"""`myriad health`'s rows: drained and by whom (from the controller's view, else the node's
own record), since when, failing checks, and stale runs; and the printed table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import Console

from myriad.health.report import HealthReport, node_health
from myriad.node.checks import ClusterView, SlurmNodeView
from myriad.node.facts import Fact, ok, unreadable
from myriad.views.health import print_health

NOW = 1_800_000_000.0
NOTHING: Fact[Any] = Fact("not-gathered")


def view(**nodes: tuple[bool, str | None]) -> ClusterView:
    slurm = {
        name: SlurmNodeView("IDLE", drained, False, (), reason)
        for name, (drained, reason) in nodes.items()
    }
    return ClusterView("ctl01", ok(slurm), NOTHING, NOTHING)


def facts(state: dict[str, Any] | None) -> Any:
    blank = unreadable("n", "unused")
    if state is None:
        return replace(
            blank,
            health_state=Fact("missing", detail="/var/lib/myriad-health/state.json: no such file"),
        )
    return replace(blank, health_state=ok(state))


def test_rows() -> None:
    drained_state = {
        "last_run": NOW - 20,
        "failing": ["gpu.count expected 8, found 7"],
        "slurm": {"drained": True, "drained_by": "myriad-health", "since": NOW - 300},
    }
    reason = "myriad-health: gpu.count expected 8, found 7 [root@2026-12-01T18:40:00]"
    cluster = view(
        node01=(False, None),
        node02=(True, reason),
        node03=(True, "admin: fan [root@2026-12-01T18:40:00]"),
    )
    row = node_health("node02", facts(drained_state), cluster, NOW, 30)
    assert row.reason == "myriad-health: gpu.count expected 8, found 7"
    assert (row.drained, row.drained_by, row.since, row.stale) == (
        True,
        "myriad-health",
        NOW - 300,
        False,
    )
    assert row.failing == ["gpu.count expected 8, found 7"] and not row.healthy

    other = node_health("node03", facts({"last_run": NOW - 5, "slurm": {}}), cluster, NOW, 30)
    assert (other.drained_by, other.reason, other.since) == ("other", "admin: fan", None)

    fine = node_health("node01", facts({"last_run": NOW - 29}), cluster, NOW, 30)
    assert fine.healthy
    stale = node_health("node01", facts({"last_run": NOW - 31}), cluster, NOW, 30)
    assert stale.stale and not stale.healthy
    never = node_health("node01", facts(None), cluster, NOW, 30)
    assert never.stale and never.last_run is None
    assert never.note == "no state file: /var/lib/myriad-health/state.json: no such file"
    gone = node_health("node01", None, cluster, NOW, 30, "ssh: connection refused")
    assert not gone.reachable and gone.note == "unreachable: ssh: connection refused"

    # No controller answered: the node's own record of its drain.
    silent = ClusterView(
        None, Fact("unreadable", detail="no controller answered"), NOTHING, NOTHING
    )
    own = node_health(
        "node02",
        facts({**drained_state, "slurm": {**drained_state["slurm"], "reason": reason}}),
        silent,
        NOW,
        30,
    )
    assert (own.drained, own.drained_by) == (True, "myriad-health")

    report = HealthReport("lab", NOW, 30, (fine, row, other))
    assert not report.healthy and report.to_dict()["healthy"] is False
    assert report.to_dict()["nodes"][1]["failing"] == ["gpu.count expected 8, found 7"]
    console = Console(width=200, record=True)
    print_health(console, report)
    text = console.export_text()
    assert "node02" in text and "myriad-health, 5 min ago" in text
    assert "other: admin: fan" in text
    assert "1 of 3 nodes healthy; not: node02, node03" in text
    assert HealthReport("lab", NOW, 30, (fine,)).healthy
