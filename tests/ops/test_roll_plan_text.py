"""`myriad roll --plan`: what it says the controllers would do agrees with itself.

Check mode runs the slurm role with its default `slurm_controller_reload: restart`, so the
"Restart slurmctld" handler shows as changed even when the roll itself would only reconfigure
(the roll passes the reload it chose); the plan used to print both "no changed setting needs a
restart" and "ctl01 would change: ... Restart slurmctld"."""

from __future__ import annotations

from myriad.ops.roll import ChangedTask, controller_changes

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
