"""`myriad remove SPEC NODES`: nodes leave the cluster once their jobs ended.

The spec says which nodes exist, so removing starts there: lower the pool's `count` until the
spec no longer names the nodes, then `myriad remove` drains them (`myriad: remove by <user>:
...`), waits for their jobs (never cancelling one without `--kill-after`), rewrites slurm.conf
on the remaining nodes and the controllers (the slurm role; slurmctld must restart when nodes
leave, scontrol(1) 22.05, and running jobs survive it), and on the local cluster removes the
containers. Elsewhere the machines are the provider's to power off; remove says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from myriad import paths
from myriad.errors import OpsInputError
from myriad.ops.batches import Amount
from myriad.ops.roll import RollLoop, RollOptions, cluster_lock, in_worker, prepare, sigterm_stops
from myriad.ops.roll_result import Progress, RollResult, nothing_rolled
from myriad.ops.roll_state import RollState
from myriad.ops.slurm import Slurm, current_user, reason_for
from myriad.ops.slurmconf import Reload
from myriad.plan.nodes import container_name
from myriad.provision import local
from myriad.runner import TUNED, new_run_dir, run_playbook
from myriad.spec.models import Cluster


class _NoSteps:
    """remove never converges or validates the leaving nodes."""

    def controller_reload(self, controllers: Sequence[str]) -> tuple[Reload, list[str]]:
        return "none", []

    def converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        return {}

    def validate(self, nodes: Sequence[str]) -> dict[str, str]:
        return {}


def remove(
    spec_path: Path,
    nodes: list[str],
    progress: Progress,
    *,
    reason: str = "removed from the cluster",
    drain_timeout_s: float = 3600.0,
    kill_after_s: float | None = None,
) -> RollResult:
    """Drain, wait, slurm.conf without the nodes, their containers gone: what it did (its
    lines go to `progress`)."""
    cluster, state_root, compute, controllers = prepare(spec_path, None, None)
    if not nodes:
        raise OpsInputError("no nodes given: name them, comma-separated (node04,node05)")
    still = [n for n in nodes if n in cluster.inventory.host_vars]
    if still:
        raise OpsInputError(
            f"{spec_path}: {', '.join(still)} still in the spec: lower the pool's count so that "
            "it no longer names them, then run `myriad remove` again"
        )
    slurm = Slurm.of(cluster.inventory)
    known = slurm.nodes()
    strangers = [n for n in nodes if n not in known]
    gone: list[str] = []
    if strangers:
        # No job can run on a node Slurm does not know (one whose bring-up never reached the
        # slurm role, or a pool renamed before it did): its container is all there is.
        with cluster_lock(state_root, "remove"):
            left = _remove_strangers(cluster.spec, strangers)
        gone = [n for n in strangers if n not in left]
        nodes = [n for n in nodes if n not in strangers]
        if left:
            raise OpsInputError(
                f"{', '.join(left)}: neither Slurm nor this cluster's containers know them; "
                "nothing to remove"
            )
        if not nodes:
            return nothing_rolled("remove", cluster.spec.metadata.name, containers_only=gone)
    options = RollOptions(
        reason=reason, batch=Amount(1, False), drain_timeout_s=drain_timeout_s,
        kill_after_s=kill_after_s,
    )  # fmt: skip
    with cluster_lock(state_root, "remove"), sigterm_stops():
        run_dir = new_run_dir(state_root, "remove")
        state = RollState.create(
            run_dir,
            cluster=cluster.spec.metadata.name,
            reason=reason_for("remove", reason),
            options={**options.to_dict(), "reason": reason},
            batches=[{"index": 1, "island": None, "nodes": list(nodes)}],
            controller="done",
            take_over=True,
        )
        state.log("remove", "started", f"by {current_user()}: {','.join(nodes)}")
        loop = RollLoop(state, options, slurm, _NoSteps(), progress, controllers, verb="remove")
        loop.drain(list(nodes))
        ready = loop.wait_for_jobs([n for n in nodes if state.status(n) == "drained"])
        if len(ready) != len(nodes):
            return _with(gone, loop.finish("stopped: jobs still hold some nodes; nothing removed"))
        hosts = [*controllers, *compute]
        outcome = in_worker(
            lambda: run_playbook(
                paths.playbook("site.yml"),
                state_root / "inventory" / "hosts.yml",
                new_run_dir(run_dir, "site"),
                hosts=len(hosts),
                limit=hosts,
                tags=["slurm"],
                extravars={"myriad_serial": "100%", "myriad_max_fail_percentage": 100},
                tuning=TUNED,
            )
        )
        if not outcome.ok:
            for failure in outcome.failures:
                loop.say(failure.host, "failed", f"{failure.task}: {failure.message}")
            for node in nodes:
                state.set(node, "failed", "slurm.conf without it could not be applied")
            return _with(
                gone, loop.finish("stopped: slurm.conf could not be rewritten; nodes stay drained")
            )
        loop.say(",".join(hosts), "slurm-conf", f"without {','.join(nodes)}; slurmctld restarted")
        for node in nodes:
            if cluster.spec.provider.kind == "local":
                local.docker("rm", "--force", container_name(cluster.spec, node), timeout=120)
                detail = "removed from Slurm; container removed"
            else:
                detail = "removed from Slurm; power the machine off with its provider"
            state.set(node, "done", detail)
            loop.say(node, "removed", detail)
        return _with(gone, loop.finish("finished"))


def _with(containers_only: Sequence[str], result: RollResult) -> RollResult:
    return dataclasses.replace(result, containers_only=tuple(containers_only))


def _remove_strangers(spec: Cluster, strangers: Sequence[str]) -> list[str]:
    """Remove the local containers of nodes Slurm does not know; those with none, returned."""
    if spec.provider.kind != "local":
        return list(strangers)
    containers = local.container_states(spec)
    left = []
    for node in strangers:
        container = container_name(spec, node)
        if container not in containers:
            left.append(node)
            continue
        local.docker("rm", "--force", container, timeout=120)
    return left
