"""Parsing what Slurm prints, the reason rules, and how the controller is reached."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from myriad.errors import OpsError, OpsInputError
from myriad.ops.slurm import (
    Completed,
    Slurm,
    check_names,
    controller_command,
    jobs_by_node,
    parse_sinfo,
    parse_squeue,
    reason_for,
)
from myriad.render.inventory import Inventory


def test_squeue_node_lists_are_read_with_the_one_hostlist_codec() -> None:
    # The validation parsers' expand_hostlist (tests/validate/test_parsers_slurm.py has its
    # cases and round trips); a job's nodes come back in Slurm's order, padding kept.
    text = "7|gpu[008-010],ctl01|alice|train\n"
    assert parse_squeue(text)[0].nodes == ("gpu008", "gpu009", "gpu010", "ctl01")
    with pytest.raises(ValueError, match=r"unclosed .\[."):
        parse_squeue("8|node[01-02|bob|x\n")


def test_parse_sinfo_states_and_reasons() -> None:
    # As `sinfo -h -N -o '%N|%T|%E'` prints on the local cluster (Slurm 22.05.8).
    text = (
        "node01|idle|none\n"
        "node02|draining|myriad: roll by root: probe 2.0\n"
        "node03|drained|myriad-health: gpu.ecc failed\n"
        "node04|down*|Not responding\n"
    )
    nodes = parse_sinfo(text)
    assert not nodes["node01"].drained and not nodes["node01"].unavailable
    assert nodes["node01"].reason == ""
    assert nodes["node02"].drained and not nodes["node02"].held_by_health
    assert nodes["node03"].held_by_health
    assert nodes["node04"].unavailable and not nodes["node04"].drained


def test_parse_squeue_and_jobs_by_node() -> None:
    jobs = parse_squeue("17|node[01-02]|alice|train\n18|node02|bob|eval\n19||carol|pending\n")
    assert [j.nodes for j in jobs] == [("node01", "node02"), ("node02",), ()]
    held = jobs_by_node(jobs, ["node01", "node02", "node03"])
    assert [j.job_id for j in held["node02"]] == ["17", "18"]
    assert held["node03"] == []


def test_reasons_say_who_and_why() -> None:
    assert reason_for("roll", " nvidia driver 550 ", user="root") == (
        "myriad: roll by root: nvidia driver 550"
    )


def test_check_names_refuses_strangers_with_exit_2() -> None:
    check_names(["node01"], ["node01", "node02"], "c")
    with pytest.raises(OpsInputError) as raised:
        check_names(["node01", "ctl01"], ["node01", "node02"], "c")
    assert raised.value.exit_code == 2
    assert "ctl01: not a compute node of cluster c" in str(raised.value)


def _inventory(controller_vars: dict[str, object]) -> Inventory:
    return Inventory(
        cluster="c",
        groups={"controller": ["ctl01"], "compute": ["node01"]},
        group_vars={},
        host_vars={"ctl01": controller_vars, "node01": {}},
    )


def test_controller_reached_like_ansible_reaches_it() -> None:
    local = _inventory({"ansible_connection": "docker", "ansible_host": "c-ctl01"})
    assert controller_command(local) == ["docker", "exec", "c-ctl01"]
    remote = _inventory({"ansible_host": "10.0.0.2", "ansible_user": "ops", "ansible_port": 2222})
    assert controller_command(remote) == [
        "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-p", "2222",
        "ops@10.0.0.2", "sudo", "-n",
    ]  # fmt: skip
    root = _inventory({"ansible_host": "10.0.0.2", "ansible_user": "root"})
    assert controller_command(root)[-1] == "root@10.0.0.2"


def test_a_failing_command_names_itself() -> None:
    def refuse(argv: Sequence[str]) -> Completed:
        return Completed(1, "", "slurm_update error: Invalid node name specified\n")

    slurm = Slurm(["docker", "exec", "x"], refuse)
    with pytest.raises(OpsError, match=r"scontrol update .* Invalid node name"):
        slurm.drain(["node09"], "myriad: drain by root: x")
