"""The verbs a user runs: up, bringup, down, status — each a sequence of named phases.

State lives in `$XDG_STATE_HOME/myriad/<cluster>/` (`~/.local/state/myriad/<cluster>/`
when XDG_STATE_HOME is unset; `$MYRIAD_STATE_DIR/<cluster>/` overrides both), never under
the current directory, so every checkout and shell sees one cluster's one state: the
rendered inventory, beside it the node package the rdma role ships (`myriad-node.pyz`,
written again before every site play, so the nodes run this Myriad's node code), one folder
per run with Ansible's full event log, `status.json` with the last run's outcome (which
`myriad status` shows and `--retry-failed` reads) and the cluster's run lock
(`bringup/lock.py`).

A run is recorded as started before Ansible starts, so a run that never finished (killed,
the machine lost) shows as incomplete; an interrupted run is recorded as interrupted.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from myriad import paths
from myriad.bringup.image_records import read_manifests
from myriad.bringup.reporting import Reporter
from myriad.errors import FlowError, RunInterrupted, StateError
from myriad.fsutil import atomic_write_text
from myriad.node import artefact
from myriad.plan.pipeline import PlanResult, plan_spec
from myriad.provision.resolve import resolve_cluster
from myriad.render.image_inventory import profiles_in_use
from myriad.render.inventory import Inventory
from myriad.render.writer import write_inventory
from myriad.runner import TUNED, RunResult, Timeouts, Tuning, new_run_dir, run_playbook
from myriad.spec.bringup import resolved_mode

STATE_ENV = "MYRIAD_STATE_DIR"
XDG_STATE_ENV = "XDG_STATE_HOME"
# What a run's record says while it runs; seen after the run, it means it never finished.
RUNNING = "running"


@dataclass(frozen=True, slots=True)
class ClusterState:
    root: Path

    @property
    def inventory(self) -> Path:
        return self.root / "inventory"

    @property
    def node_artefact(self) -> Path:
        """The node package beside the inventory: the rdma role's `rdma_node_artefact`
        (`{{ inventory_dir }}/../myriad-node.pyz`)."""
        return self.root / artefact.NAME

    @property
    def status_file(self) -> Path:
        return self.root / "status.json"

    def read_status(self) -> dict[str, Any]:
        damaged = (
            f"{self.status_file} is damaged ({{}}); nothing was changed. Move it away "
            f"(mv {self.status_file} {self.status_file}.damaged) and run again: the next "
            "run starts a fresh record"
        )
        try:
            status: Any = json.loads(self.status_file.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError as exc:
            raise StateError(damaged.format(f"{exc.msg} at line {exc.lineno}")) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise StateError(damaged.format(f"unreadable: {exc}")) from None
        if not isinstance(status, dict):
            raise StateError(damaged.format(f"a JSON {type(status).__name__}, not an object"))
        last = status.get("last_bringup", {})
        if not isinstance(last, dict):
            raise StateError(damaged.format("last_bringup is not an object"))
        return status

    def write_status(self, **values: Any) -> None:
        self.replace_status({**self.read_status(), **values})

    def replace_status(self, status: dict[str, Any]) -> None:
        """The whole record at once (also over a damaged one), written whole or not at all."""
        try:
            atomic_write_text(self.status_file, json.dumps(status, indent=2) + "\n", mode=0o600)
        except OSError as exc:
            raise StateError(_unwritable(self.root, exc)) from None

    def check(self) -> None:
        """Before anything changes: the state reads back and the folder takes a write."""
        self.read_status()
        check_writable(self.root)


def _unwritable(root: Path, exc: OSError) -> str:
    why = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return (
        f"cannot write the cluster's state folder {root}: {why}; nothing was changed. Free "
        f"space or fix its permissions, or set ${STATE_ENV} to a writable folder"
    )


def check_writable(root: Path) -> None:
    """Write, sync and remove a small file in `root`; StateError if the folder refuses."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=root)
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise StateError(_unwritable(root, exc)) from None


def state_base() -> Path:
    """Where every cluster's state folder lives (see the module's doc)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV]).expanduser()
    xdg = os.environ.get(XDG_STATE_ENV)
    # The XDG spec ignores a relative XDG_STATE_HOME.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "myriad"
    return Path.home() / ".local" / "state" / "myriad"


def cluster_state(cluster: str) -> ClusterState:
    root = state_base() / cluster
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
    except OSError as exc:
        raise StateError(_unwritable(root, exc)) from None
    return ClusterState(root)


def planned(spec_path: Path) -> PlanResult:
    """The spec's plan, for the verbs that need no inventory; PlanError on lint errors."""
    result = plan_spec(spec_path)
    result.usable_plan()
    return result


def image_records(result: PlanResult, state: ClusterState) -> dict[str, dict[str, str]]:
    """In image mode, each profile's current image (`tag`, `content_hash`) as the state
    folder records it (`myriad image build`); nothing in push mode."""
    spec = result.loaded.spec
    if resolved_mode(spec.bringup, sum(pool.count for pool in spec.pools)) != "image":
        return {}
    return {
        profile: {"tag": manifest.tag, "content_hash": manifest.content_hash}
        for profile, manifest in read_manifests(
            state.root / "images", profiles_in_use(spec)
        ).items()
    }


def render_state(result: PlanResult, state: ClusterState) -> Inventory:
    """The local cluster's inventory (every address planned), written to the state folder."""
    inventory = resolve_cluster(result, images=image_records(result, state)).inventory
    write_inventory(inventory, state.inventory)
    return inventory


def write_node_artefact(state: ClusterState) -> Path:
    """The node package (myriad.node.artefact) where the site play's roles take it from,
    before a run: the same tree gives the same bytes, so a node changes only with the code."""
    try:
        return artefact.write(state.node_artefact)
    except OSError as exc:
        raise StateError(_unwritable(state.root, exc)) from None


def serial_for(result: PlanResult) -> int | str:
    """Compute nodes go island by island when there are several islands."""
    fabric = result.plan.fabric if result.plan is not None else None
    if fabric is None or len(fabric.islands) <= 1:
        return "100%"
    return fabric.island_nodes


# Past this many nodes, a play that fails on more than a tenth of them is treated as a
# systematic problem (a bad repository, a wrong variable) and stops the run; below it every
# node runs to the end, so `--retry-failed` finds the others complete.
LARGE_CLUSTER_NODES = 100
LARGE_CLUSTER_FAILURE_PERCENT = 10


def failure_budget(hosts: int) -> int:
    return LARGE_CLUSTER_FAILURE_PERCENT if hosts >= LARGE_CLUSTER_NODES else 100


def run_site(
    result: PlanResult,
    inventory: Inventory,
    state: ClusterState,
    console: Console,
    reporter: Reporter,
    *,
    limit: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    tuning: Tuning = TUNED,
    max_fail_percentage: int | None = None,
    check: bool = False,
) -> RunResult:
    try:
        run_dir = new_run_dir(state.root, "check" if check else "bringup")
    except OSError as exc:
        raise StateError(_unwritable(state.root, exc)) from None
    write_node_artefact(state)
    hosts = list(limit) if limit else list(inventory.hosts)
    if max_fail_percentage is None:
        max_fail_percentage = failure_budget(len(hosts))
    settings = result.loaded.spec.bringup
    started_at = now_stamp()
    if not check:
        # Recorded before Ansible starts: a run that never finishes stays visible as such.
        record_started(state, hosts, tuning, run_dir, started_at)
    with reporter.playbook("bring-up (playbooks/site.yml)") as progress:
        outcome = run_playbook(
            paths.playbook("site.yml"),
            state.inventory / "hosts.yml",
            run_dir,
            hosts=len(hosts),
            limit=limit,
            tags=tags,
            extravars={
                "myriad_serial": serial_for(result),
                "myriad_max_fail_percentage": max_fail_percentage,
            },
            on_event=progress.on_event,
            tuning=tuning,
            check=check,
            timeouts=Timeouts(settings.task_timeout_s, settings.connect_timeout_s),
        )
    if outcome.interrupted:
        if not check:
            record_finished(state, outcome, run_dir, tuning, started_at, hosts, "interrupted")
        raise RunInterrupted(
            f"interrupted during {outcome.interrupted_during}; Ansible and its workers were "
            f"stopped, the run is recorded as interrupted (log: {run_dir / 'artifacts'})"
        )
    reporter.recap(outcome, hosts)
    console.print(f"Ansible's full event log: {run_dir / 'artifacts'}")
    if not check:
        record_finished(state, outcome, run_dir, tuning, started_at, hosts, outcome.status)
    if not outcome.stats and outcome.status == "successful":
        raise FlowError("the bring-up matched no hosts: check --limit and the inventory")
    return outcome


def record_started(
    state: ClusterState,
    hosts: Sequence[str],
    tuning: Tuning,
    run_dir: Path | None = None,
    started_at: str | None = None,
) -> None:
    """The run's record before it changes anything: `running`, every node still to do."""
    state.write_status(
        last_bringup={
            "status": RUNNING,
            "ok": False,
            "failed_hosts": list(hosts),
            "changed_hosts": [],
            "run_dir": str(run_dir) if run_dir else None,
            "tuning": tuning.label,
            "pid": os.getpid(),
            "started_at": started_at or now_stamp(),
        }
    )


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def unfinished_hosts(outcome: RunResult, hosts: Sequence[str]) -> list[str]:
    """The hosts to retry: those that failed, and when the run did not end by itself (a
    timeout, an interrupt) every host it had not finished with."""
    failed = set(outcome.failed_hosts())
    if outcome.status != "successful" and not outcome.stats:
        failed |= set(hosts)
    return sorted(failed)


def record_finished(
    state: ClusterState,
    outcome: RunResult,
    run_dir: Path,
    tuning: Tuning,
    started_at: str,
    hosts: Sequence[str],
    status: str,
) -> None:
    state.write_status(
        last_bringup={
            "status": status,
            "ok": outcome.ok,
            "failed_hosts": unfinished_hosts(outcome, hosts),
            "changed_hosts": list(outcome.changed_hosts),
            "run_dir": str(run_dir),
            "tuning": tuning.label,
            "seconds": round(outcome.seconds, 1),
            "started_at": started_at,
            "finished_at": now_stamp(),
            **({"interrupted_during": outcome.interrupted_during} if outcome.interrupted else {}),
        }
    )


def retry_limit(state: ClusterState) -> list[str]:
    # A run killed before it could say (status `running`) lists every node it ran on.
    failed = state.read_status().get("last_bringup", {}).get("failed_hosts", [])
    if not failed:
        raise FlowError("the last bring-up has no failed nodes to retry")
    return list(failed)
