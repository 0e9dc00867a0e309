"""The pieces of `myriad up` / `bringup` that need no Docker: run records, retries, island
batches, failure budgets, reading Ansible's events, the local cluster's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.bringup import flow
from myriad.errors import FlowError
from myriad.plan.pipeline import plan_loaded
from myriad.provision import local
from myriad.runner import (
    ANSIBLE_DEFAULTS,
    TUNED,
    TUNED_WITHOUT_MITOGEN,
    _collect,
    _envvars,
    _per_host,
    forks_for,
    new_run_dir,
)
from myriad.views.progress import PlaybookProgress

from spec_builder import load_example


def test_every_run_gets_its_own_private_folder(tmp_path: Path) -> None:
    first = new_run_dir(tmp_path / "state", "bringup")
    second = new_run_dir(tmp_path / "state", "bringup")
    assert first != second
    assert first.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700


def test_retry_failed_reads_the_last_runs_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path))
    state = flow.cluster_state("lab")
    with pytest.raises(FlowError, match="no failed nodes"):
        flow.retry_limit(state)
    state.write_status(last_bringup={"failed_hosts": ["node02"], "status": "failed"})
    assert flow.retry_limit(state) == ["node02"]
    assert state.status_file.stat().st_mode & 0o777 == 0o600


def test_compute_nodes_go_island_by_island_only_when_there_are_islands() -> None:
    assert flow.serial_for(plan_loaded(load_example("local"))) == "100%"
    assert flow.serial_for(plan_loaded(load_example("roce-10k"))) == 128


def test_tuned_runs_use_mitogen_pipelining_and_a_fact_cache_in_the_run_folder(
    tmp_path: Path,
) -> None:
    env = _envvars(tmp_path, TUNED)
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    # The strategy Ansible is told to load exists where it is told to look.
    assert (Path(env["ANSIBLE_STRATEGY_PLUGINS"]) / "mitogen_linear.py").is_file()
    assert env["ANSIBLE_PIPELINING"] == "true"
    assert env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] == str(tmp_path / "facts")


def test_without_mitogen_only_the_strategy_changes(tmp_path: Path) -> None:
    tuned, plain = _envvars(tmp_path, TUNED), _envvars(tmp_path, TUNED_WITHOUT_MITOGEN)
    assert "ANSIBLE_STRATEGY" not in plain
    assert {k: v for k, v in tuned.items() if k in plain} == plain


def test_ansible_defaults_set_nothing_that_changes_speed(tmp_path: Path) -> None:
    env = _envvars(tmp_path, ANSIBLE_DEFAULTS)
    for name in ("ANSIBLE_STRATEGY", "ANSIBLE_PIPELINING", "ANSIBLE_GATHERING"):
        assert name not in env
    assert not ANSIBLE_DEFAULTS.scaled_forks


def test_failure_budget_stops_systematic_failures_only_on_large_clusters() -> None:
    assert flow.failure_budget(4) == 100
    assert flow.failure_budget(1257) == 10


def test_forks_follow_the_node_count_within_bounds() -> None:
    assert (forks_for(1), forks_for(40), forks_for(12_500)) == (5, 40, 100)


def _event(kind: str, host: str, **data: object) -> dict[str, object]:
    return {"event": kind, "event_data": {"host": host, "task": "Install munge", **data}}


def test_failed_and_unreachable_hosts_carry_their_task_and_message() -> None:
    failures: list = []
    changed: set[str] = set()
    _collect(_event("runner_on_failed", "node02", res={"msg": "No package matching 'x'\nmore"}),
             failures, changed)  # fmt: skip
    _collect(_event("runner_on_unreachable", "node03", res={"msg": "container not running"}),
             failures, changed)  # fmt: skip
    _collect(_event("runner_on_failed", "node04", ignore_errors=True, res={}), failures, changed)
    _collect(_event("runner_on_ok", "node01", res={"changed": True}), failures, changed)
    assert [(f.host, f.task, f.message, f.unreachable) for f in failures] == [
        ("node02", "Install munge", "No package matching 'x'", False),
        ("node03", "Install munge", "container not running", True),
    ]
    assert changed == {"node01"}


def test_recap_stats_are_turned_per_host() -> None:
    stats = {"ok": {"a": 3, "b": 2}, "failures": {"b": 1}}
    assert _per_host(stats) == {"a": {"ok": 3}, "b": {"ok": 2, "failures": 1}}


def test_progress_follows_each_hosts_current_task() -> None:
    progress = PlaybookProgress()
    progress.on_event(_event("runner_on_start", "node01"))
    progress.on_event(_event("runner_on_ok", "node01", res={"changed": True}))
    progress.on_event(_event("runner_on_unreachable", "node02"))
    assert progress.hosts["node01"].task == "Install munge"
    assert (progress.hosts["node01"].ok, progress.hosts["node01"].changed) == (1, 1)
    assert progress.hosts["node02"].unreachable


def test_local_containers_are_named_after_cluster_and_node() -> None:
    spec = load_example("local").spec
    nodes = local.local_nodes(spec)
    assert [(n.name, n.container, n.address) for n in nodes[:2]] == [
        ("ctl01", "local-ctl01", "172.31.77.10"),
        ("node01", "local-node01", "172.31.77.11"),
    ]
    assert local.network_name(spec) == "myriad-local"


def test_a_container_is_recreated_when_its_image_or_options_change() -> None:
    spec = load_example("local").spec
    node = local.local_nodes(spec)[0]
    same = local._config_digest(local._run_arguments(spec, node, "sha256:aaa"))
    assert same == local._config_digest(local._run_arguments(spec, node, "sha256:aaa"))
    assert same != local._config_digest(local._run_arguments(spec, node, "sha256:bbb"))


def test_up_refuses_a_spec_that_is_not_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from myriad.cli import main

    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path))
    root = Path(__file__).resolve().parents[2]
    assert main(["up", str(root / "inventories/starter-64/cluster.yaml")]) == 1
    assert "provider is baremetal" in capsys.readouterr().err
