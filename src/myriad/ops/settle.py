"""The last phase of `myriad up`: validation, once Slurm has heard from every node.

A repair `up` (a munge key put back, slurmd restarted) validated at once and reported nodes
still re-registering with slurmctld as failed. The wait is bounded; what has not answered by
then is judged as it is, and validation says why.
"""

from __future__ import annotations

from rich.console import Console

from myriad.bringup.flow import ClusterState, image_records
from myriad.errors import OpsError
from myriad.ops.nodes import compute_nodes
from myriad.ops.slurm import SETTLE_TIMEOUT_S, Slurm, wait_settled
from myriad.plan.pipeline import PlanResult
from myriad.provision.resolve import resolve_cluster
from myriad.validate.service import validate_after_bringup


def validate_when_settled(result: PlanResult, state: ClusterState, console: Console) -> int:
    if result.loaded.spec.software.orchestrator == "slurm":
        inventory = resolve_cluster(result, images=image_records(result, state)).inventory
        try:
            waiting = wait_settled(Slurm.of(inventory), compute_nodes(inventory))
        except OpsError:
            # slurmctld does not answer at all: validation's Slurm checks say so, with why.
            waiting = []
        if waiting:
            console.print(
                f"not answering slurmctld after {SETTLE_TIMEOUT_S:.0f} s: "
                f"{', '.join(waiting)}; validating as they are",
                markup=False,
            )
    return validate_after_bringup(result, state, console)
