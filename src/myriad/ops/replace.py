"""`myriad replace SPEC NODE`: a node whose machine was swapped comes back under its name.

A one-node roll with the roll's guarantees (drained with `myriad: replace by <user>: ...`,
its jobs waited for, never cancelled without `--kill-after`), whose bring-up step first
makes a new machine: on the local cluster the node's container is destroyed and created
afresh from the node image. The whole site play then runs on it; the cluster's secrets come
from where they live (the munge key from its key host, as on any bring-up), and nothing of
the dead machine is kept, its munge key and host keys included. Validated, then resumed.

A drain by anyone else is taken over (a replaced machine is the fix for what the health
runner found). Other providers make their new machine themselves (bare metal: a new
`myriad:replace` token and `pulumi up`); for them `replace` refuses, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from myriad.errors import OpsInputError
from myriad.ops.batches import Amount
from myriad.ops.roll import (
    AnsibleSteps,
    RollOptions,
    cluster_lock,
    in_worker,
    prepare,
    run_roll,
    sigterm_stops,
)
from myriad.ops.roll_result import Progress, RollResult
from myriad.ops.roll_state import RollState
from myriad.ops.slurm import Slurm, check_names, current_user, reason_for
from myriad.plan.nodes import container_name
from myriad.provision import local
from myriad.provision.resolve import ResolvedCluster
from myriad.runner import new_run_dir


class ReplaceSteps(AnsibleSteps):
    """The roll's steps, with a new container before the site play (every role)."""

    def __init__(
        self, cluster: ResolvedCluster, state_root: Path, run_dir: Path, options: RollOptions
    ) -> None:
        super().__init__(cluster, state_root, run_dir, options)

    def converge(
        self, nodes: Sequence[str], extravars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        return in_worker(lambda: self._replace(nodes, extravars))

    def _replace(self, nodes: Sequence[str], extravars: Mapping[str, Any] | None) -> dict[str, str]:
        spec = self.cluster.spec
        for node in nodes:
            local.docker("rm", "--force", container_name(spec, node), timeout=120)
        made = local.converge(spec)
        failures = {n: f"container not created ({made.get(n)})" for n in nodes
                    if made.get(n) != "created"}  # fmt: skip
        rest = [n for n in nodes if n not in failures]
        if rest:
            failures.update(self._converge(rest, extravars))
        return failures


def replace(
    spec_path: Path,
    node: str,
    progress: Progress,
    *,
    reason: str = "machine replaced",
    drain_timeout_s: float = 3600.0,
    kill_after_s: float | None = None,
) -> RollResult:
    """The one-node roll onto a new machine: what it did (its lines go to `progress`)."""
    cluster, state_root, compute, _controllers = prepare(spec_path, None, None)
    check_names([node], compute, cluster.spec.metadata.name)
    kind = cluster.spec.provider.kind
    if kind != "local":
        raise OpsInputError(
            f"{spec_path}: `myriad replace` makes the new machine on the local cluster only; "
            f"on {kind}, create it with the provider (bare metal: a new myriad:replace token and "
            "`pulumi up`), then `myriad bringup --limit` it, validate and `myriad resume` it"
        )
    options = RollOptions(
        reason=reason,
        batch=Amount(1, percent=False),
        drain_timeout_s=drain_timeout_s,
        kill_after_s=kill_after_s,
    )
    slurm = Slurm.of(cluster.inventory)
    with cluster_lock(state_root, "replace"), sigterm_stops():
        run_dir = new_run_dir(state_root, "replace")
        state = RollState.create(
            run_dir,
            cluster=cluster.spec.metadata.name,
            reason=reason_for("replace", reason),
            options={**options.to_dict(), "reason": reason},
            batches=[{"index": 1, "island": None, "nodes": [node]}],
            controller="done",
            take_over=True,
        )
        state.log("replace", "started", f"by {current_user()}: {node}")
        steps = ReplaceSteps(cluster, state_root, run_dir, options)
        return run_roll(state, slurm, steps, progress, [], verb="replace")
