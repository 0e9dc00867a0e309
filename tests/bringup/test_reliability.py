"""Runs that tell the truth, without Docker: the state folder's place, damaged and
unwritable state, the cluster lock, the run recorded before it starts, interrupts, timeouts
from the spec, --tags checked against the roles, and check mode.

The same cases against a real local cluster (SIGINT during `up`, SIGKILL, a paused node,
two runs at once, a wrong munge key) are tests/integration/test_reliability_local.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from myriad import runner
from myriad.bringup import flow, lock, verbs
from myriad.bringup.tags import check_tags, known_tags, site_roles
from myriad.cli import main
from myriad.errors import BadArguments, ClusterBusy, RunInterrupted, StateError
from myriad.plan.pipeline import plan_loaded
from myriad.runner import TUNED, RunResult, Timeouts, run_playbook

from spec_builder import load_example

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "inventories" / "local" / "cluster.yaml"


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


# --- where the state lives ---------------------------------------------------------------------


def test_state_does_not_depend_on_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(flow.STATE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(flow.XDG_STATE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert flow.cluster_state("lab").root == tmp_path / "home/.local/state/myriad/lab"
    assert not (tmp_path / ".myriad").exists()
    monkeypatch.setenv(flow.XDG_STATE_ENV, str(tmp_path / "xdg"))
    assert flow.cluster_state("lab").root == tmp_path / "xdg/myriad/lab"
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path / "override"))
    assert flow.cluster_state("lab").root == tmp_path / "override/lab"


# --- damaged and unwritable state ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"last_bringup": {"status": "succ', "Unterminated string"),
        ('[{"last_bringup": {}}]', "a JSON list, not an object"),
        ('{"last_bringup": ["node01"]}', "last_bringup is not an object"),
    ],
)
def test_damaged_state_is_found_before_the_nodes_are_touched(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    text: str, why: str,
) -> None:  # fmt: skip
    (state_dir / "local").mkdir(parents=True)
    (state_dir / "local/status.json").write_text(text)
    touched: list[str] = []
    monkeypatch.setattr(verbs.local, "converge", lambda spec: touched.append("converge"))
    assert main(["up", str(LOCAL)]) == 1
    err = capsys.readouterr().err
    assert touched == []
    assert err.startswith("error: ") and "Traceback" not in err
    assert f"{state_dir / 'local/status.json'} is damaged ({why}" in err
    assert "nothing was changed" in err and "mv " in err


def test_an_unwritable_state_folder_is_a_clear_error_and_nothing_half_written(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = state_dir.parent / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv(flow.STATE_ENV, str(blocker))
    assert main(["status", str(LOCAL)]) == 1
    err = capsys.readouterr().err
    assert "cannot write the cluster's state folder" in err and "Traceback" not in err

    monkeypatch.setenv(flow.STATE_ENV, str(state_dir))
    state = flow.cluster_state("lab")
    state.write_status(last_bringup={"status": "successful"})
    before = state.status_file.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StateError, match="the disk is full; nothing was changed"):
        state.check()
    with pytest.raises(StateError, match="the disk is full"):
        state.write_status(last_bringup={"status": "failed"})
    assert state.status_file.read_bytes() == before
    assert sorted(p.name for p in state.root.iterdir()) == ["status.json"]


# --- the lock --------------------------------------------------------------------------------

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from myriad.bringup.lock import hold_cluster_lock
    with hold_cluster_lock(Path(sys.argv[1]), "up"):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


def _holder(root: Path, seconds: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process


def test_a_second_run_refuses_naming_the_holder_and_since_when(tmp_path: Path) -> None:
    process = _holder(tmp_path, 30)
    try:
        assert lock.is_locked(tmp_path)
        with pytest.raises(ClusterBusy) as busy, lock.hold_cluster_lock(tmp_path, "bringup"):
            pass
        holder = lock.read_holder(tmp_path)
        assert holder is not None and holder.pid == process.pid and holder.verb == "up"
        message = str(busy.value)
        assert f"`myriad up` (pid {process.pid}, " in message
        assert f"since {holder.started_at}" in message and "--wait" in message
    finally:
        process.kill()
        process.wait()


def test_a_killed_holders_lock_is_taken_over_and_wait_queues(tmp_path: Path) -> None:
    process = _holder(tmp_path, 30)
    process.send_signal(signal.SIGKILL)
    process.wait()
    # Its note is left behind, but the kernel released the lock with the process.
    assert lock.read_holder(tmp_path) is not None and not lock.is_locked(tmp_path)
    with lock.hold_cluster_lock(tmp_path, "bringup") as holder:
        assert holder.pid == os.getpid()
        assert lock.read_holder(tmp_path) == holder
    assert lock.read_holder(tmp_path) is None

    process = _holder(tmp_path, 1.0)
    try:
        start = time.monotonic()
        with lock.hold_cluster_lock(tmp_path, "up", wait_s=20):
            assert 0.3 < time.monotonic() - start < 15
    finally:
        process.wait()


# --- the run record ----------------------------------------------------------------------------


class _Reporter:
    def phase(self, name: str) -> Any:
        from contextlib import nullcontext

        return nullcontext([])

    def playbook(self, title: str) -> Any:
        from contextlib import nullcontext
        from types import SimpleNamespace

        return nullcontext(SimpleNamespace(on_event=lambda event: None))

    def recap(self, result: RunResult, hosts: Any) -> None:
        pass


def _result(run_dir: Path, **changes: Any) -> RunResult:
    values: dict[str, Any] = {
        "status": "successful",
        "rc": 0,
        "run_dir": run_dir,
        "stats": {"node01": {"ok": 3}},
        "failures": (),
        "changed_hosts": (),
        "seconds": 1.0,
    }
    return RunResult(**{**values, **changes})


def _site(state: flow.ClusterState, monkeypatch: pytest.MonkeyPatch, result: Any) -> Any:
    from rich.console import Console

    plan = plan_loaded(load_example("local"))
    seen: dict[str, Any] = {}

    def fake(playbook: Path, inventory: Path, run_dir: Path, **kwargs: Any) -> RunResult:
        seen["during"] = state.read_status()["last_bringup"]
        seen["kwargs"] = kwargs
        return result(run_dir)

    monkeypatch.setattr(flow, "run_playbook", fake)
    inventory: Any = type("I", (), {"hosts": {"node01": {}, "node02": {}}})()
    try:
        with open(os.devnull, "w") as sink:
            flow.run_site(plan, inventory, state, Console(file=sink), _Reporter())
    finally:
        seen["after"] = state.read_status()["last_bringup"]
    return seen


def test_a_run_is_recorded_as_started_before_ansible_starts(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = flow.cluster_state("lab")
    state.write_status(last_bringup={"status": "successful", "failed_hosts": []})
    seen = _site(state, monkeypatch, lambda run_dir: _result(run_dir))
    assert seen["during"]["status"] == flow.RUNNING
    assert seen["during"]["pid"] == os.getpid()
    assert seen["during"]["failed_hosts"] == ["node01", "node02"]
    assert seen["after"]["status"] == "successful"
    # Timeouts come from the spec's bringup section (defaults here).
    assert seen["kwargs"]["timeouts"] == Timeouts(1200, 30)
    # A record left `running` by a killed run reads as incomplete, and retry takes its nodes.
    state.write_status(last_bringup=seen["during"])
    line = verbs.describe_last(state, seen["during"])
    assert line.startswith("last bring-up incomplete: started at ")
    assert flow.retry_limit(state) == ["node01", "node02"]


def test_an_interrupted_run_says_where_records_it_and_exits_130(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = flow.cluster_state("lab")
    during = '"Install munge" on node02'
    with pytest.raises(RunInterrupted) as stopped:
        _site(
            state,
            monkeypatch,
            lambda run_dir: _result(run_dir, status="canceled", rc=254, stats={},
                                    interrupted_during=during),
        )  # fmt: skip
    assert stopped.value.exit_code == 130
    assert str(stopped.value).startswith(f"interrupted during {during}; ")
    last = state.read_status()["last_bringup"]
    assert last["status"] == "interrupted" and last["interrupted_during"] == during
    assert last["failed_hosts"] == ["node01", "node02"]
    assert verbs.describe_last(state, last).startswith("last bring-up interrupted at ")


def test_a_timed_out_run_lists_every_unfinished_node_for_retry(tmp_path: Path) -> None:
    timed_out = _result(tmp_path, status="timeout", rc=254, stats={})
    assert flow.unfinished_hosts(timed_out, ["node01", "node02"]) == ["node01", "node02"]


def test_timeouts_reach_ansible(tmp_path: Path) -> None:
    env = runner._envvars(tmp_path, TUNED, Timeouts(task_s=45, connect_s=7))
    assert (env["ANSIBLE_TASK_TIMEOUT"], env["ANSIBLE_TIMEOUT"]) == ("45", "7")
    assert "ANSIBLE_TASK_TIMEOUT" not in runner._envvars(tmp_path, TUNED)


PLAYBOOK = """\
- name: Sleep on the controller
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Sleep long
      ansible.builtin.command: sleep 120
      changed_when: false
"""


@pytest.mark.slow
def test_sigint_stops_ansible_and_every_worker_and_says_where(tmp_path: Path) -> None:
    playbook = tmp_path / "sleep.yml"
    playbook.write_text(PLAYBOOK)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_python_interpreter: "
                         f"{sys.executable}\n")  # fmt: skip
    seen: list[int] = []

    def interrupt_once_sleeping(event: Any) -> None:
        if event.get("event") == "runner_on_start" and not seen:

            def later() -> None:
                time.sleep(2)
                seen.extend(runner.descendants(os.getpid()))
                os.kill(os.getpid(), signal.SIGINT)

            threading.Thread(target=later, daemon=True).start()

    start = time.monotonic()
    run_dir = runner.new_run_dir(tmp_path / "state", "bringup")
    result = run_playbook(playbook, inventory, run_dir, hosts=1, on_event=interrupt_once_sleeping)
    assert time.monotonic() - start < 60
    assert result.interrupted_during == '"Sleep long" on localhost'
    assert result.status == "canceled"
    assert seen, "the run had started processes"
    assert [pid for pid in seen if runner._alive(pid)] == []
    # Ctrl-C goes back to Python's default handling after the run.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_check_mode_runs_ansible_with_check_and_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ansible_runner

    seen: dict[str, Any] = {}

    def fake_run(**kwargs: Any) -> Any:
        seen.update(kwargs)
        return type("R", (), {"status": "successful", "rc": 0, "stats": {}})()

    monkeypatch.setattr(ansible_runner, "run", fake_run)
    run_playbook(tmp_path / "site.yml", tmp_path / "hosts.yml", tmp_path, hosts=1, check=True)
    assert seen["cmdline"] == "--check --diff"
    run_playbook(tmp_path / "site.yml", tmp_path / "hosts.yml", tmp_path, hosts=1)
    assert seen["cmdline"] is None
    args = __import__("myriad.cli").cli.build_parser().parse_args(["bringup", "x.yaml", "--check"])
    assert args.check is True


# --- tags ----------------------------------------------------------------------------------------


def test_unknown_tags_are_refused_listing_the_valid_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    roles = site_roles()
    assert roles[0] == "common" and "slurm" in roles and "nccl" in roles
    tags = known_tags()
    assert {"slurm", "common", "fabric", "preflight"} <= tags
    check_tags(["slurm", "preflight", "always"])
    with pytest.raises(BadArguments) as bad:
        check_tags(["nosuchtag", "slurmm"])
    message = str(bad.value)
    assert "no role or task has the tag 'nosuchtag'" in message
    assert "no role or task has the tag 'slurmm' (did you mean 'slurm'?)" in message
    assert "Roles: common, rdma, nvidia_driver" in message and "preflight" in message
    assert main(["bringup", str(LOCAL), "--tags", "nosuchtag"]) == 2
    assert "nosuchtag" in capsys.readouterr().err


def test_status_json_written_by_this_version_reads_back(state_dir: Path) -> None:
    state = flow.cluster_state("lab")
    state.write_status(last_bringup={"status": flow.RUNNING, "pid": 1, "failed_hosts": ["a"]})
    assert json.loads(state.status_file.read_text())["last_bringup"]["pid"] == 1


# --- messages that point at the cause --------------------------------------------------------


def test_an_unreachable_local_node_is_named_with_its_container_state_and_commands(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from myriad.provision import local
    from myriad.runner import HostFailure

    result = plan_loaded(load_example("local"))
    spec = result.loaded.spec
    monkeypatch.setattr(
        local,
        "status",
        lambda s: [
            local.NodeStatus("node02", "local-node02", "paused", "172.31.77.12"),
            local.NodeStatus("node03", "local-node03", "exited", None),
        ],
    )
    state = flow.cluster_state(spec.metadata.name)
    failures = (
        HostFailure("node02", "Install munge", "Timed out after 20 second(s).", False, True),
        HostFailure("node03", "Gathering Facts", "Failed to create temporary directory", True),
        HostFailure("node01", "Install munge", "No package matching 'x'", False),
    )
    outcome = _result(state.root, status="failed", rc=2, failures=failures)
    lines = verbs.unreachable_advice(result, state, outcome)
    hosts = state.inventory / "hosts.yml"
    assert lines == [
        "node02 did not answer: its container local-node02 is paused; resume it with "
        f"`docker unpause local-node02`; check it with `ansible -i {hosts} node02 -m "
        "ansible.builtin.ping`",
        "node03 did not answer: its container local-node03 is exited; resume it with "
        f"`docker start local-node03`; check it with `ansible -i {hosts} node03 -m "
        "ansible.builtin.ping`",
    ]


def test_pool_overlaps_names_the_network_and_cluster_that_hold_the_subnet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from myriad.errors import LocalClusterError
    from myriad.provision import local

    spec = plan_loaded(load_example("local")).loaded.spec
    networks = [
        {"Name": "myriad-lab", "IPAM": {"Config": [{"Subnet": "172.31.77.0/24"}]},
         "Labels": {local.CLUSTER_LABEL: "lab"}, "Containers": {}},
        {"Name": "bridge", "IPAM": {"Config": [{"Subnet": "172.17.0.0/16"}]}, "Labels": {}},
    ]  # fmt: skip

    def fake_docker(*args: str, **kwargs: Any) -> str:
        if args[:2] == ("network", "create"):
            raise LocalClusterError(
                "`docker network create --driver` failed: Error response from daemon: "
                "Pool overlaps with other one on this address space"
            )
        if args[:2] == ("network", "ls"):
            return "" if "--filter" in args else "id1\nid2\n"
        if args[:2] == ("network", "inspect"):
            return json.dumps(networks)
        raise AssertionError(args)

    monkeypatch.setattr(local, "docker", fake_docker)
    with pytest.raises(LocalClusterError) as error:
        local.ensure_network(spec)
    assert str(error.value) == (
        "the management subnet 172.31.77.0/24 overlaps Docker network myriad-lab "
        "(172.31.77.0/24, of Myriad cluster lab): choose another "
        "network.addressing.management, or remove what holds it"
    )


# --- config safety -----------------------------------------------------------------------------


def _task(role: str, file: str, dest_end: str) -> dict[str, Any]:
    import yaml

    for task in yaml.safe_load((ROOT / "roles" / role / "tasks" / file).read_text()):
        template = task.get("ansible.builtin.template") or {}
        if str(template.get("dest", "")).endswith(dest_end):
            return dict(template)
    raise AssertionError(f"no template to {dest_end} in {role}/{file}")


def test_hand_editable_configs_are_checked_and_backed_up_before_replacement() -> None:
    chrony = _task("common", "time_chrony.yml", "__common_chrony_config }}")
    assert chrony["validate"] == "/usr/sbin/chronyd -p -f %s" and chrony["backup"] is True
    for dest in ("/20auto-upgrades", "/52myriad-unattended-upgrades"):
        assert _task("common", "apt.yml", dest)["validate"] == "apt-config -c %s dump"
    assert _task("common", "sysctl.yml", "__common_sysctl_file }}")["backup"] is True
    assert _task("common", "limits.yml", "__common_limits_file }}")["backup"] is True
    for name in ("slurm.conf", "cgroup.conf", "gres.conf", "topology.conf"):
        assert _task("slurm", "config.yml", f"/{name}")["backup"] is True, name


def test_up_records_the_run_before_the_containers_change(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from myriad.provision import node_image

    seen: dict[str, Any] = {}

    def converge(spec: Any, **options: Any) -> None:
        seen.update(flow.cluster_state("local").read_status()["last_bringup"])
        seen["locked"] = lock.is_locked(state_dir / "local")
        raise KeyboardInterrupt  # stands in for a SIGKILL: nothing after this runs

    monkeypatch.setattr(node_image, "ensure_node_image", lambda recipe: "sha256:" + "0" * 64)
    monkeypatch.setattr(node_image, "node_image_recipe", lambda: None)
    monkeypatch.setattr(verbs.local, "container_states", lambda spec: {})
    monkeypatch.setattr(verbs.local, "converge", converge)
    assert main(["up", str(LOCAL)]) == 130
    assert seen["status"] == flow.RUNNING and seen["locked"] is True
    assert seen["failed_hosts"] == ["ctl01", "node01", "node02", "node03"]
    assert not lock.is_locked(state_dir / "local")


def test_up_refuses_a_node_the_spec_no_longer_names_before_anything_changes(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lowered count must go through `myriad remove` (drain, wait for jobs): `up` would
    remove the container with its jobs, so it refuses, records no run and touches no node."""
    running = {
        f"local-{n}": ("running", "cfg") for n in ("ctl01", "node01", "node02", "node03", "node04")
    }
    monkeypatch.setattr(verbs.local, "container_states", lambda spec: running)

    def converge(spec: Any, **options: Any) -> None:
        raise AssertionError("up converged although a node left the spec")

    monkeypatch.setattr(verbs.local, "converge", converge)
    assert main(["up", str(LOCAL)]) == 2
    err = capsys.readouterr().err
    assert f"{LOCAL}: node04 no longer in the spec but still has a container" in err
    assert f"`myriad remove {LOCAL} node04` drains them" in err
    assert "Traceback" not in err
    assert "last_bringup" not in flow.cluster_state("local").read_status()
    assert not lock.is_locked(state_dir / "local")


def test_converge_itself_never_removes_a_container_the_spec_no_longer_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from myriad.errors import NodesLeftTheSpec
    from myriad.provision import local

    spec = plan_loaded(load_example("local")).loaded.spec
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(local, "docker", _fake_docker(spec, "local-node09\trunning\tcfg\n", calls))
    with pytest.raises(NodesLeftTheSpec, match="node09 no longer in the spec"):
        local.converge(spec)
    assert not [c for c in calls if c[:1] == ("rm",)]


def test_converge_thaws_a_paused_node_instead_of_starting_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`docker start` fails on a paused container ("cannot start a paused container, try
    unpause instead"): a node frozen by a test or an operator must not stop `up`."""
    from myriad.provision import local

    spec = plan_loaded(load_example("local")).loaded.spec
    nodes = local.local_nodes(spec)
    config = {
        n.container: local._config_digest(local._run_arguments(spec, n, "sha256:1")) for n in nodes
    }
    calls: list[tuple[str, ...]] = []
    listing = "".join(
        f"{c}\t{'paused' if c.endswith('node02') else 'running'}\t{d}\n" for c, d in config.items()
    )
    monkeypatch.setattr(local, "docker", _fake_docker(spec, listing, calls))
    monkeypatch.setattr(local, "wait_booted", lambda container, timeout_s=0: None)
    outcome = local.converge(spec)
    assert outcome == {"ctl01": "running", "node01": "running", "node02": "started",
                       "node03": "running"}  # fmt: skip
    assert [c for c in calls if c[0] in ("start", "unpause")] == [("unpause", "local-node02")]


def _fake_docker(spec: Any, listing: str, calls: list[tuple[str, ...]]) -> Callable[..., str]:
    """Docker as local.converge sees it: the cluster's network and image exist, `ps` lists
    `listing`, unpause and start succeed; every call is recorded in `calls`."""
    from myriad.provision import local

    def fake(*args: str, **kwargs: Any) -> str:
        calls.append(args)
        if args[:2] == ("network", "ls"):
            return local.network_name(spec)
        if args[:2] == ("network", "inspect"):
            return str(spec.network.addressing.management)
        if args[:2] == ("image", "inspect"):
            return "sha256:1"
        if args[:1] == ("ps",):
            return listing
        if args[:1] in (("unpause",), ("start",)):
            return ""
        raise AssertionError(args)

    return fake
