"""`myriad up`: the local cluster from its spec, brought up, rolled and validated.

Phases, in order: node health's documents; plan (a non-local provider is refused before any
container exists); the node image; image mode's per-profile images; the containers; the
inventory; bring-up (the site playbook, or image mode's converge); image mode's rollout of
the nodes still on an older image (the day-2 roll); then validation, once every compute node
answers slurmctld (a bounded wait: a repair `up` that restarted slurmd would otherwise find
nodes still re-registering). Each phase stops the run when it fails.

While it runs, the phases and playbooks are a stream (the caller's `Reporter` and
`Gathering`); what it did is the `UpResult` it returns, which `myriad.views.up` draws and
from which the CLI picks the exit code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from myriad.bringup.flow import (
    ClusterState,
    cluster_state,
    image_records,
    planned,
    record_started,
    render_state,
    retry_limit,
    run_site,
)
from myriad.bringup.images import build_images
from myriad.bringup.lock import hold_cluster_lock
from myriad.bringup.node_local import docker_transport, run_image_mode
from myriad.bringup.reporting import EventSink, Reporter
from myriad.bringup.verbs import require_local, unreachable_advice
from myriad.errors import OpsError
from myriad.health.render import prepare
from myriad.ops.image_roll import reimage
from myriad.ops.nodes import compute_nodes
from myriad.ops.roll_result import RollResult
from myriad.ops.slurm import SETTLE_TIMEOUT_S, Slurm, wait_settled
from myriad.plan.nodes import iter_nodes
from myriad.plan.pipeline import PlanResult
from myriad.provision import local
from myriad.provision.resolve import resolve_cluster
from myriad.runner import TUNED, RunResult, Tuning
from myriad.spec.bringup import resolved_mode
from myriad.validate.report import ValidationReport
from myriad.validate.service import UNWATCHED, Gathering, validate_after_bringup


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase as it ran: its name, what it noted, how long it took (monotonic clock)."""

    name: str
    notes: tuple[str, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class UpResult:
    """What one `myriad up` did. A phase that did not run leaves its field empty: no
    `bringup` when every node was on an older image (the rollout converges them), no
    `validation` with --no-validate or after a failed bring-up or rollout."""

    spec: Path
    cluster: str
    phases: tuple[Phase, ...]
    health_documents: Path | None
    bringup: RunResult | None
    advice: tuple[str, ...] = ()  # for each local node that did not answer: what to do
    stale: tuple[str, ...] = ()  # image mode: nodes on an older image, rolled after bring-up
    rollout: RollResult | None = None  # the day-2 roll onto the new image; None when none ran
    unsettled: tuple[str, ...] = ()  # compute nodes slurmctld had not heard from
    settle_timeout_s: float = SETTLE_TIMEOUT_S
    validation: ValidationReport | None = None
    validation_seconds: float | None = None  # the settle wait and validation together

    @property
    def bringup_failed(self) -> bool:
        return self.bringup is not None and not self.bringup.ok

    @property
    def rollout_failed(self) -> bool:
        return self.rollout is not None and not self.rollout.ok


class _Recorded:
    """The caller's reporter, with each finished phase kept for the result."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.phases: list[Phase] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[list[str]]:
        start = time.monotonic()
        with self.reporter.phase(name) as notes:
            yield notes
        self.phases.append(Phase(name, tuple(notes), time.monotonic() - start))

    def playbook(self, title: str) -> AbstractContextManager[EventSink]:
        return self.reporter.playbook(title)

    def recap(self, result: RunResult, hosts: Sequence[str]) -> None:
        self.reporter.recap(result, hosts)


def up(
    spec_path: Path,
    console: Console,
    *,
    reporter: Reporter,
    gathering: Gathering = UNWATCHED,
    validate: bool = True,
    retry_failed: bool = False,
    tuning: Tuning = TUNED,
    wait_s: float = 0.0,
) -> UpResult:
    """`console` and `reporter` follow the run (the playbooks' live tables, the rollout's
    lines); `gathering` follows validation's gathering pass."""
    documents = prepare(spec_path)
    recorded = _Recorded(reporter)
    with recorded.phase("plan") as notes:
        result = planned(spec_path)
        require_local(result, "up")
        notes.append(f"{result.plan.nodes if result.plan else 0} nodes")
    state = cluster_state(result.loaded.spec.metadata.name)
    # Damaged or unwritable state is found before anything changes on the nodes.
    state.check()
    limit = retry_limit(state) if retry_failed else None
    with hold_cluster_lock(state, "up", wait_s=wait_s):
        return _up_locked(
            spec_path,
            console,
            result,
            state,
            recorded,
            gathering,
            validate=validate,
            limit=limit,
            tuning=tuning,
            documents=documents,
        )


def _up_locked(
    spec_path: Path,
    console: Console,
    result: PlanResult,
    state: ClusterState,
    recorded: _Recorded,
    gathering: Gathering,
    *,
    validate: bool,
    limit: list[str] | None,
    tuning: Tuning,
    documents: Path | None,
) -> UpResult:
    spec = result.loaded.spec
    reporter: Reporter = recorded
    local.refuse_surplus(spec, str(spec_path))
    # Before the containers change: a run killed from here on shows as incomplete.
    record_started(state, limit or [n.name for n in local.local_nodes(spec)], tuning)
    with reporter.phase("node image") as notes:
        from myriad.provision.node_image import ensure_node_image, node_image_recipe

        notes.append(ensure_node_image(node_image_recipe())[:19])
    image_mode = resolved_mode(spec.bringup, len(local.local_nodes(spec))) == "image"
    images: dict[str, str] = {}
    if image_mode:
        # The image is built from the inventory's variables, before any node starts from it.
        inventory = render_state(result, state)
        built = build_images(result, inventory, state, reporter, tuning=tuning)
        profile_of = {n.name: n.profile for n in iter_nodes(spec)}
        images = {node: built[profile].manifest.tag for node, profile in profile_of.items()}
    with reporter.phase("containers") as notes:
        # In image mode a node on an older image keeps running until the roll below.
        outcome = local.converge(spec, images=images, recreate=not image_mode)
        counts: dict[str, int] = {}
        for what in outcome.values():
            counts[what] = counts.get(what, 0) + 1
        notes.extend(f"{n} {what}" for what, n in sorted(counts.items()))
    with reporter.phase("inventory") as notes:
        inventory = render_state(result, state)
        notes.append(str(state.inventory))
    stale = tuple(sorted(node for node, what in outcome.items() if what == "stale"))
    bringup: RunResult | None
    if image_mode:
        containers = {n.name: n.container for n in local.local_nodes(spec)}
        current = [n for n in (limit or inventory.hosts) if n not in stale]
        # Every node on an older image: nothing to converge before the roll.
        bringup = (
            None
            if not current
            else run_image_mode(
                inventory,
                state,
                console,
                reporter,
                docker_transport(containers),
                slurm=spec.software.orchestrator == "slurm",
                timeout_s=2 * spec.bringup.task_timeout_s,
                limit=current,
                tuning=tuning,
            )
        )
    else:
        bringup = run_site(result, inventory, state, console, reporter, limit=limit, tuning=tuning)

    def finish(
        *,
        advice: Sequence[str] = (),
        rollout: RollResult | None = None,
        unsettled: Sequence[str] = (),
        validation: ValidationReport | None = None,
        validation_seconds: float | None = None,
    ) -> UpResult:
        return UpResult(
            spec=spec_path,
            cluster=spec.metadata.name,
            phases=tuple(recorded.phases),
            health_documents=documents,
            bringup=bringup,
            advice=tuple(advice),
            stale=stale,
            rollout=rollout,
            unsettled=tuple(unsettled),
            validation=validation,
            validation_seconds=validation_seconds,
        )

    if bringup is not None and not bringup.ok:
        return finish(advice=unreachable_advice(result, state, bringup))
    rollout = None
    if stale:
        console.print(f"on an older image: {', '.join(stale)}; rolling them onto the new one")
        rollout = reimage(
            result, state, stale, lambda line: console.print(line, markup=False, highlight=False)
        )
        if not rollout.ok:
            return finish(rollout=rollout)
    if not validate:
        return finish(rollout=rollout)
    start = time.monotonic()
    unsettled = slurm_unsettled(result, state)
    report = validate_after_bringup(result, state, gathering)
    return finish(
        rollout=rollout,
        unsettled=unsettled,
        validation=report,
        validation_seconds=time.monotonic() - start,
    )


def slurm_unsettled(result: PlanResult, state: ClusterState) -> list[str]:
    """The compute nodes slurmctld has not heard from once the bounded wait is over (none
    off Slurm). A controller that does not answer at all goes to validation as it is: its
    Slurm checks say so, with why."""
    if result.loaded.spec.software.orchestrator != "slurm":
        return []
    inventory = resolve_cluster(result, images=image_records(result, state)).inventory
    try:
        return wait_settled(Slurm.of(inventory), compute_nodes(inventory))
    except OpsError:
        return []
