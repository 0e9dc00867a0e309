"""The verbs a user runs: up, bringup, down, status — each a sequence of named phases.

State lives in `.myriad/<cluster>/` (or $MYRIAD_STATE_DIR/<cluster>): the rendered
inventory, one folder per run with Ansible's full event log, and `status.json` with the
last run's outcome, which `myriad status` shows and `--retry-failed` reads.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from myriad import paths
from myriad.bringup.reporting import Reporter
from myriad.errors import FlowError
from myriad.fsutil import atomic_write_text
from myriad.plan.pipeline import PlanResult, plan_spec
from myriad.provision.resolve import resolve_cluster
from myriad.render.inventory import Inventory
from myriad.render.writer import write_inventory
from myriad.runner import TUNED, RunResult, Tuning, new_run_dir, run_playbook

STATE_ENV = "MYRIAD_STATE_DIR"


@dataclass(frozen=True, slots=True)
class ClusterState:
    root: Path

    @property
    def inventory(self) -> Path:
        return self.root / "inventory"

    @property
    def status_file(self) -> Path:
        return self.root / "status.json"

    def read_status(self) -> dict[str, Any]:
        try:
            status: dict[str, Any] = json.loads(self.status_file.read_text())
            return status
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError as exc:
            raise FlowError(f"{self.status_file} is damaged ({exc.msg}); delete it") from None

    def write_status(self, **values: Any) -> None:
        status = {**self.read_status(), **values}
        atomic_write_text(self.status_file, json.dumps(status, indent=2) + "\n", mode=0o600)


def cluster_state(cluster: str) -> ClusterState:
    base = Path(os.environ.get(STATE_ENV) or Path.cwd() / ".myriad")
    root = base / cluster
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    return ClusterState(root)


def planned(spec_path: Path) -> PlanResult:
    """The spec's plan, for the verbs that need no inventory; PlanError on lint errors."""
    result = plan_spec(spec_path)
    result.usable_plan()
    return result


def render_state(result: PlanResult, state: ClusterState) -> Inventory:
    """The local cluster's inventory (every address planned), written to the state folder."""
    inventory = resolve_cluster(result).inventory
    write_inventory(inventory, state.inventory)
    return inventory


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
) -> RunResult:
    run_dir = new_run_dir(state.root, "bringup")
    hosts = list(limit) if limit else list(inventory.hosts)
    if max_fail_percentage is None:
        max_fail_percentage = failure_budget(len(hosts))
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
        )
    reporter.recap(outcome, hosts)
    console.print(f"Ansible's full event log: {run_dir / 'artifacts'}")
    state.write_status(
        last_bringup={
            "status": outcome.status,
            "ok": outcome.ok,
            "failed_hosts": outcome.failed_hosts(),
            "changed_hosts": list(outcome.changed_hosts),
            "run_dir": str(run_dir),
            "tuning": tuning.label,
            "seconds": round(outcome.seconds, 1),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    if not outcome.stats:
        raise FlowError("the bring-up matched no hosts: check --limit and the inventory")
    return outcome


def retry_limit(state: ClusterState) -> list[str]:
    failed = state.read_status().get("last_bringup", {}).get("failed_hosts", [])
    if not failed:
        raise FlowError("the last bring-up has no failed nodes to retry")
    return list(failed)
