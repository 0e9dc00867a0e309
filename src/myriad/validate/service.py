"""`myriad validate`: gather facts, evaluate every check, return the report.

    validate_cluster(...)        → ValidationReport  (gather + evaluate; what a roll and tests call)
    evaluate_facts(...)          → ValidationReport  (pure: expectations vs facts)
    run_validate(...)            → ValidationReport  (the command: spec → inventory → report)
    validate_after_bringup(...)  → ValidationReport  (the last phase of `myriad up`)

The report says whether the cluster matches its spec (`ok`); the CLI turns that into the
exit code and `myriad.views.validation` draws it. Setup problems raise MyriadError and a
spec that does not load raises SpecError. While facts come back, the caller's `Gathering`
is told of every event (the views' status line; nothing by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from myriad.bringup.flow import ClusterState, cluster_state, image_records
from myriad.errors import ValidateError
from myriad.node.checks import cluster_view, evaluate
from myriad.node.facts import NodeFacts
from myriad.plan.pipeline import PlanResult, plan_spec
from myriad.provision.resolve import resolve_cluster
from myriad.render.inventory import Inventory
from myriad.render.writer import write_inventory
from myriad.runner import new_run_dir
from myriad.spec.loader import LoadedSpec
from myriad.validate import perf as perf_module
from myriad.validate.expectations import expect, load_role_defaults
from myriad.validate.gather import DEFAULT_PROBE_TIMEOUT_S, gather
from myriad.validate.report import ValidationReport, keep_last, merge, write_junit

EventHandler = Callable[[Mapping[str, Any]], None]


class Gathering(Protocol):
    """Who follows a gathering pass: told how many nodes it asks, then every event."""

    def gathering(self, nodes: int) -> AbstractContextManager[EventHandler]: ...


class Unwatched:
    """Nobody follows: the events are dropped."""

    @contextmanager
    def gathering(self, nodes: int) -> Iterator[EventHandler]:
        yield lambda event: None


UNWATCHED = Unwatched()


def _plan(plan_result: PlanResult) -> Any:
    if plan_result.plan is None or plan_result.has_errors:
        errors = "; ".join(f.message for f in plan_result.findings if f.severity == "error")
        raise ValidateError(f"the spec has lint errors (see `myriad plan`): {errors}")
    return plan_result.plan


def evaluate_facts(
    plan_result: PlanResult,
    inventory: Inventory,
    facts: Mapping[str, NodeFacts],
    *,
    unreachable: Mapping[str, str] | None = None,
    gather_failed: Mapping[str, str] | None = None,
    selected: Sequence[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> ValidationReport:
    """Expectations from spec + plan + inventory against gathered facts; no I/O but the
    roles' defaults (read once). `selected` narrows the nodes checked (--limit)."""
    loaded = plan_result.loaded
    plan = _plan(plan_result)
    started = time.perf_counter()
    expectations = expect(
        loaded.spec, loaded.catalog, plan, inventory, defaults or load_role_defaults()
    )
    if selected is not None:
        chosen = set(selected)
        expectations = replace(
            expectations, nodes=tuple(n for n in expectations.nodes if n.node in chosen)
        )
    down = dict(unreachable or {})
    results = evaluate(expectations, facts, down, gather_failed)
    view = cluster_view(expectations, facts, down)
    return ValidationReport(
        cluster=loaded.spec.metadata.name,
        spec=loaded.source.file,
        results=tuple(results),
        unreachable=down,
        gather_failed=dict(gather_failed or {}),
        evaluate_seconds=time.perf_counter() - started,
        view_source=view.source,
    )


def _selected(inventory: Inventory, limit: Sequence[str] | None) -> list[str]:
    """--limit names hosts or groups; the orchestrator's controllers always come along,
    because the Slurm / Kubernetes checks of any node read the controller's view."""
    if not limit:
        return list(inventory.hosts)
    chosen: dict[str, None] = {}
    for item in limit:
        if item in inventory.groups:
            chosen.update(dict.fromkeys(inventory.groups[item]))
        elif item in inventory.host_vars:
            chosen[item] = None
        else:
            raise ValidateError(f"--limit: {item} is neither a host nor a group of the inventory")
    return list(chosen)


def validate_cluster(
    loaded: LoadedSpec,
    plan_result: PlanResult,
    inventory_dir: Path,
    inventory: Inventory,
    state_dir: Path,
    *,
    limit: Sequence[str] | None = None,
    perf: bool = False,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    probe_timeout_s: int = DEFAULT_PROBE_TIMEOUT_S,
    jobs: bool = True,
) -> ValidationReport:
    """Gather facts from the inventory's nodes (all, or `limit`) and check them.

    `inventory_dir` is the rendered inventory on disk that Ansible reads; `inventory` the
    same inventory as data, from which the expectations come. The gathering run's log lands
    in a new folder under `state_dir/runs/`.
    """
    if plan_result.loaded is not loaded:
        raise ValidateError("plan_result was made from another spec than `loaded`")
    selected = _selected(inventory, limit)
    controllers = list(inventory.groups.get("controller", ()))
    to_gather = list(dict.fromkeys([*selected, *controllers]))
    run_dir = new_run_dir(state_dir, "validate")
    gathered = gather(
        inventory_dir,
        run_dir,
        to_gather,
        limit=to_gather if limit else None,
        on_event=on_event,
        probe_timeout_s=probe_timeout_s,
        job_nodes=job_nodes(loaded, inventory, selected) if jobs else (),
    )
    report = evaluate_facts(
        plan_result,
        inventory,
        gathered.facts,
        unreachable=gathered.unreachable,
        gather_failed=gathered.failed,
        selected=selected if limit else None,
    )
    chosen = set(selected)
    report = replace(
        report,
        # A controller gathered only for its view is reported on when it was selected.
        unreachable={h: m for h, m in report.unreachable.items() if h in chosen},
        gather_failed={h: m for h, m in report.gather_failed.items() if h in chosen},
        gather_seconds=gathered.seconds,
        run_dir=str(run_dir),
    )
    if perf:
        measured = _perf_report(loaded, plan_result, inventory, inventory_dir, run_dir, selected)
        report = merge([report, measured])
    return report


def job_nodes(loaded: LoadedSpec, inventory: Inventory, selected: Sequence[str]) -> list[str]:
    """The compute nodes the validation job runs across: Slurm's, among those validated."""
    if loaded.spec.software.orchestrator != "slurm":
        return []
    chosen = set(selected)
    return [node for node in inventory.groups.get("compute", ()) if node in chosen]


def _perf_report(
    loaded: LoadedSpec,
    plan_result: PlanResult,
    inventory: Inventory,
    inventory_dir: Path,
    run_dir: Path,
    selected: Sequence[str],
) -> ValidationReport:
    plan = _plan(plan_result)
    perf = perf_module.perf_plan(loaded, plan.bandwidth, inventory, selected)
    if perf is None:
        raise ValidateError("--perf needs at least two GPU compute nodes among the validated nodes")
    results = perf_module.run_perf(perf, inventory, inventory_dir, run_dir)
    return ValidationReport(loaded.spec.metadata.name, loaded.source.file, tuple(results))


def run_validate(
    spec_path: Path,
    *,
    inventory_dir: Path | None = None,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    junit: Path | None = None,
    perf: bool = False,
    limit: Sequence[str] | None = None,
    jobs: bool = True,
    progress: Gathering = UNWATCHED,
) -> ValidationReport:
    """`myriad validate SPEC [--inventory DIR] [--stack ENV | --stack-outputs FILE]
    [--junit FILE] [--perf] [--limit HOSTS] [--no-jobs]`: the report, kept as the cluster's
    last one (unless `limit`), and written as JUnit XML to `junit` when asked.

    Without --inventory the inventory is rendered from the spec (and the stack's machines)
    into the cluster's state folder, as `myriad bringup` does, so both use the same one.
    """
    planned_spec = plan_spec(spec_path)
    state = cluster_state(planned_spec.loaded.spec.metadata.name)
    cluster = resolve_cluster(
        planned_spec,
        stack=stack,
        stack_outputs=stack_outputs,
        images=image_records(planned_spec, state),
    )
    plan_result, loaded, inventory = cluster.result, cluster.loaded, cluster.inventory
    if inventory_dir is None:
        inventory_dir = state.inventory
        write_inventory(inventory, inventory_dir)
    elif not (inventory_dir / "hosts.yml").is_file():
        raise ValidateError(f"--inventory {inventory_dir}: no hosts.yml (see `myriad render`)")
    with progress.gathering(len(_selected(inventory, limit))) as on_event:
        report = validate_cluster(
            loaded,
            plan_result,
            inventory_dir,
            inventory,
            state.root,
            limit=limit,
            perf=perf,
            on_event=on_event,
            jobs=jobs,
        )
    if limit is None:
        # A --limit run sees part of the cluster: it does not replace the kept whole.
        keep_last(report, state.root)
    if junit is not None:
        write_junit(report, junit)
    return report


def validate_after_bringup(
    result: PlanResult, state: ClusterState, progress: Gathering = UNWATCHED
) -> ValidationReport:
    """The last phase of `myriad up`: validate the freshly brought-up cluster (kept as its
    last validation)."""
    inventory = resolve_cluster(result, images=image_records(result, state)).inventory
    with progress.gathering(len(inventory.hosts)) as on_event:
        report = validate_cluster(
            result.loaded, result, state.inventory, inventory, state.root, on_event=on_event
        )
    keep_last(report, state.root)
    return report
