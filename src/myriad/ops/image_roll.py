"""Image mode's rollout: nodes on an older image move onto their profile's current one.

A rebuilt image reaches running nodes through the day-2 roll, with its guarantees: compute
nodes one at a time, each drained (`myriad: roll by <user>: image rollout`), its jobs waited
for and never cancelled, then recreated from the new image, converged from its seed,
validated and resumed; a node whose jobs outlast the drain timeout is given back untouched
and stays on its old image (validation's image.current says so). The controllers hold the
queue: they are recreated only while no job runs or waits; otherwise they stay on their
image, and the rollout says how to finish it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from myriad.bringup.flow import ClusterState, image_records
from myriad.bringup.node_local import converge_nodes, docker_transport, write_seeds
from myriad.ops.batches import Amount
from myriad.ops.nodes import compute_nodes
from myriad.ops.roll import AnsibleSteps, RollOptions, in_worker, new_roll, run_roll
from myriad.ops.roll_result import Progress, RollResult, nothing_rolled
from myriad.ops.slurm import Slurm
from myriad.plan.nodes import container_name
from myriad.plan.pipeline import PlanResult
from myriad.provision import local
from myriad.provision.resolve import ResolvedCluster, resolve_cluster
from myriad.runner import new_run_dir

REASON = "image rollout"


class ImageSteps(AnsibleSteps):
    """The roll's steps with the converge replaced: a new container from the profile's
    current image, then the node converges itself from its seed."""

    def __init__(
        self,
        cluster: ResolvedCluster,
        state: ClusterState,
        run_dir: Path,
        options: RollOptions,
        images: Mapping[str, str],
    ) -> None:
        super().__init__(cluster, state.root, run_dir, options)
        self.state = state
        self.images = images

    def converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        return in_worker(lambda: self.reimage(nodes))

    def reimage(self, nodes: Sequence[str]) -> dict[str, str]:
        spec = self.cluster.spec
        for node in nodes:
            local.docker("rm", "--force", container_name(spec, node), timeout=120)
        made = local.converge(spec, images=self.images, recreate=False)
        failures = {n: f"container not created ({made.get(n)})" for n in nodes
                    if made.get(n) != "created"}  # fmt: skip
        rest = [n for n in nodes if n not in failures]
        if not rest:
            return failures
        seeds = write_seeds(
            self.cluster.inventory, self.state, rest, slurm=spec.software.orchestrator == "slurm"
        )
        containers = {n.name: n.container for n in local.local_nodes(spec)}
        outcome = converge_nodes(
            seeds,
            docker_transport(containers),
            new_run_dir(self.run_dir, "converge"),
            timeout_s=2 * spec.bringup.task_timeout_s,
        )
        failures.update({f.host: f"{f.task}: {f.message}" for f in outcome.failures})
        return failures


def reimage(
    result: PlanResult, state: ClusterState, stale: Sequence[str], progress: Progress
) -> RollResult:
    """Roll `stale` nodes onto their profile's current image: what the rollout did (the roll's
    lines go to `progress`); controllers left on their image are said in its notes."""
    spec = result.loaded.spec
    cluster = resolve_cluster(result, images=image_records(result, state))
    images = {
        node: cluster.inventory.group_vars[f"pool_{pool.name}"]["myriad_image"]["tag"]
        for pool in spec.pools
        for node in cluster.inventory.groups[f"pool_{pool.name}"]
    }
    compute = [n for n in compute_nodes(cluster.inventory) if n in stale]
    others = [n for n in stale if n not in compute]
    slurm = Slurm.of(cluster.inventory)
    options = RollOptions(reason=REASON, batch=Amount(1, percent=False))
    rolled = nothing_rolled(REASON, spec.metadata.name)
    if compute:
        islands = {n: cluster.inventory.host_vars[n].get("myriad_island") for n in compute}
        roll = new_roll(state.root, spec.metadata.name, options, compute, islands, slurm)
        # The controllers' configuration is not what changes: their turn comes below.
        roll.data["controller"] = "done"
        roll.save()
        roll.log("roll", "started", roll.data["reason"])
        steps = ImageSteps(cluster, state, roll.run_dir, options, images)
        rolled = run_roll(roll, slurm, steps, progress, [], verb=REASON)
    if not others:
        return rolled
    queued = slurm.jobs()
    if queued:
        note = (
            f"{', '.join(others)} stay on their previous image: {len(queued)} job(s) are "
            "running or waiting, and recreating a controller would lose its queue. Run "
            "`myriad up` again when the queue is empty"
        )
        return dataclasses.replace(rolled, notes=(note,), failed_notes=True)
    steps = ImageSteps(cluster, state, new_run_dir(state.root, "reimage"), options, images)
    failures = steps.reimage(others)
    notes = tuple(f"{node}: {message}" for node, message in failures.items())
    return dataclasses.replace(rolled, notes=notes, failed_notes=bool(failures))
