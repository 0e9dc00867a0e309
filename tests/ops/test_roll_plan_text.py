"""`myriad roll --plan`: what it says the controllers would do agrees with itself.

Check mode runs the slurm role with its default `slurm_controller_reload: restart`, so the
"Restart slurmctld" handler shows as changed even when the roll itself would only reconfigure
(the roll passes the reload it chose); the plan used to print both "no changed setting needs a
restart" and "ctl01 would change: ... Restart slurmctld"."""

from __future__ import annotations

import io
import json

from rich.console import Console

from myriad.ops.roll import ChangedTask, PlannedNode, RollPlan, controller_changes
from myriad.views.roll_plan import print_roll_plan

CONF = ChangedTask("ctl01", "Render slurm.conf", ("MessageTimeout=10\n", "MessageTimeout=20\n"))
HANDLER = ChangedTask("ctl01", "Restart slurmctld", None)


def test_a_reconfigure_is_shown_as_a_reconfigure() -> None:
    lines = controller_changes([CONF, HANDLER], ["ctl01"], "reconfigure")
    assert lines == {"ctl01": ["Render slurm.conf", "Reconfigure slurmctld (scontrol reconfigure)"]}


def test_a_restart_stays_a_restart() -> None:
    assert controller_changes([CONF, HANDLER], ["ctl01"], "restart") == {
        "ctl01": ["Render slurm.conf", "Restart slurmctld"]
    }


def test_compute_nodes_are_not_listed_and_tasks_are_listed_once() -> None:
    node = ChangedTask("gpu001", "Restart slurmd", None)
    again = ChangedTask("ctl01", "Render slurm.conf", None)
    assert controller_changes([node, CONF, again], ["ctl01"], "none") == {
        "ctl01": ["Render slurm.conf"]
    }


def test_the_plan_prints_as_a_table_or_a_document() -> None:
    plan = RollPlan(
        cluster="local",
        reason="myriad: roll by alice: probe 2.0",
        controllers=("ctl01",),
        reload="reconfigure",
        reload_keys=("messagetimeout",),
        nodes=(
            PlannedNode(1, None, "node03", "", ("Render slurm.conf",), ()),
            PlannedNode(2, None, "node01", "", (), ("17 (root)",)),
        ),
        controller_changes=controller_changes([CONF, HANDLER], ["ctl01"], "reconfigure"),
        failures=(),
    )
    drawn = io.StringIO()
    print_roll_plan(Console(file=drawn, width=200), plan)
    text = drawn.getvalue()
    assert "controllers ctl01: scontrol reconfigure" in text and "[messagetimeout]" in text
    assert "17 (root)" in text
    assert "ctl01 would change: Render slurm.conf; Reconfigure slurmctld" in text
    document = json.loads(json.dumps(plan.to_dict()))
    assert document["reload"] == "reconfigure"
    assert document["nodes"][1] == {
        "batch": 2,
        "island": None,
        "node": "node01",
        "state": "",
        "would_change": [],
        "blocked_by": ["17 (root)"],
    }
