"""`myriad up`, `bringup`, `down` and `status`, each returning the process exit code."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from myriad.bringup.flow import (
    RUNNING,
    ClusterState,
    cluster_state,
    planned,
    record_started,
    render_state,
    retry_limit,
    run_site,
)
from myriad.bringup.images import build_images
from myriad.bringup.lock import hold_cluster_lock, is_locked, read_holder
from myriad.bringup.node_local import docker_transport, run_image_mode
from myriad.bringup.reporting import Reporter
from myriad.bringup.tags import check_tags
from myriad.errors import FlowError
from myriad.plan.nodes import iter_nodes
from myriad.plan.pipeline import PlanResult
from myriad.provision import local, local_image
from myriad.provision.resolve import resolve_cluster
from myriad.render.monitoring import prometheus_url
from myriad.render.writer import write_inventory
from myriad.runner import TUNED, RunResult, Tuning
from myriad.spec.bringup import resolved_mode

# Called after a successful bring-up: (plan, inventory dir, state, console) → exit code.
Validator = Callable[[PlanResult, ClusterState, Console], int]
# Image mode: rolls the nodes still on an older image onto their profile's current one
# (drained, jobs waited for, recreated, converged, validated, resumed): (plan, state, nodes,
# console) → exit code. The CLI hands in the day-2 roll's (myriad.ops.image_roll).
Reimager = Callable[[PlanResult, ClusterState, Sequence[str], Console], int]


# What does a local-only verb's job on the other providers.
_ELSEWHERE = {
    "up": "runs the local container cluster; this spec's provider is {kind}: create the "
    "machines with `pulumi up`, then run `myriad bringup`",
    "down": "removes the local container cluster; this spec's provider is {kind}: its machines "
    "are removed with `pulumi destroy` on the environment's stack "
    "(stacks/README.md, The real flow: Teardown)",
}


def _require_local(result: PlanResult, verb: str) -> None:
    kind = result.loaded.spec.provider.kind
    if kind != "local":
        raise FlowError(f"`myriad {verb}` " + _ELSEWHERE[verb].format(kind=kind))


def up(
    spec_path: Path,
    console: Console,
    *,
    reporter: Reporter,
    validate: Validator | None,
    reimage: Reimager | None = None,
    retry_failed: bool = False,
    tuning: Tuning = TUNED,
    wait_s: float = 0.0,
) -> int:
    with reporter.phase("plan") as notes:
        result = planned(spec_path)
        _require_local(result, "up")
        spec = result.loaded.spec
        notes.append(f"{result.plan.nodes if result.plan else 0} nodes")
    state = cluster_state(spec.metadata.name)
    # Damaged or unwritable state is found before anything changes on the nodes.
    state.check()
    limit = retry_limit(state) if retry_failed else None
    with hold_cluster_lock(state, "up", wait_s=wait_s):
        return _up_locked(
            spec_path, console, result, state, reporter, validate, limit, tuning, reimage
        )


def _up_locked(
    spec_path: Path,
    console: Console,
    result: PlanResult,
    state: ClusterState,
    reporter: Reporter,
    validate: Validator | None,
    limit: list[str] | None,
    tuning: Tuning,
    reimage: Reimager | None = None,
) -> int:
    spec = result.loaded.spec
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
    stale = sorted(node for node, what in outcome.items() if what == "stale")
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
    if bringup is not None and not bringup.ok:
        failed = ", ".join(bringup.failed_hosts()) or bringup.status
        console.print(
            f"[bold red]bring-up failed on {failed}[/bold red]: fix the cause, then "
            f"`myriad up {spec_path} --retry-failed`",
            highlight=False,
        )
        for line in unreachable_advice(result, state, bringup):
            console.print(line, markup=False, highlight=False)
        return 1
    if stale and reimage is not None:
        console.print(f"on an older image: {', '.join(stale)}; rolling them onto the new one")
        code = reimage(result, state, stale, console)
        if code != 0:
            return code
    if validate is None:
        return 0
    start = time.monotonic()
    code = validate(result, state, console)
    mark, verdict = (
        ("[bold green]✓[/bold green]", "matches")
        if code == 0
        else ("[bold red]✗[/bold red]", "differs from")
    )
    console.print(
        f"{mark} validation — the cluster {verdict} its spec ({time.monotonic() - start:.1f} s)"
    )
    return code


def bringup(
    spec_path: Path,
    console: Console,
    *,
    reporter: Reporter,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    limit: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    retry_failed: bool = False,
    tuning: Tuning = TUNED,
    check: bool = False,
    wait_s: float = 0.0,
) -> int:
    """The site playbook against any environment's inventory (rendered afresh from the spec).

    With `check`, Ansible's check mode with diffs: what a run would change, changing nothing.
    """
    check_tags(tags)
    cluster = resolve_cluster(spec_path, stack=stack, stack_outputs=stack_outputs)
    state = cluster_state(cluster.spec.metadata.name)
    state.check()
    if retry_failed:
        limit = retry_limit(state)
    with hold_cluster_lock(state, "bringup --check" if check else "bringup", wait_s=wait_s):
        write_inventory(cluster.inventory, state.inventory)
        outcome = run_site(
            cluster.result,
            cluster.inventory,
            state,
            console,
            reporter,
            limit=limit,
            tags=tags,
            tuning=tuning,
            check=check,
        )
    if check:
        changes = ", ".join(outcome.changed_hosts) or "no node"
        console.print(f"check mode: a run would change {changes}; nothing was changed")
    if not outcome.ok and cluster.spec.provider.kind == "local":
        for line in unreachable_advice(cluster.result, state, outcome):
            console.print(line, markup=False, highlight=False)
    return 0 if outcome.ok else 1


def unreachable_advice(result: PlanResult, state: ClusterState, outcome: RunResult) -> list[str]:
    """For each unreachable local node: that it did not answer, its container's state, and
    a command that works as printed."""
    spec = result.loaded.spec
    if spec.provider.kind != "local":
        return []
    down = sorted({f.host for f in outcome.failures if f.unreachable or f.timed_out})
    if not down:
        return []
    containers = {n.name: n for n in local.status(spec)}
    lines = []
    for host in down:
        node = containers.get(host)
        where = f"its container {node.container} is {node.state}" if node else "no container"
        hint = {
            "paused": f"docker unpause {node.container}" if node else "",
            "exited": f"docker start {node.container}" if node else "",
        }.get(node.state if node else "", "")
        lines.append(
            f"{host} did not answer: {where}"
            + (f"; resume it with `{hint}`" if hint else "")
            + f"; check it with `ansible -i {state.inventory / 'hosts.yml'} {host} -m "
            "ansible.builtin.ping`"
        )
    return lines


def down(spec_path: Path, console: Console, *, yes: bool) -> int:
    result = planned(spec_path)
    _require_local(result, "down")
    spec = result.loaded.spec
    if not yes:
        if not sys.stdin.isatty():
            console.print(
                "[bold red]refusing to remove the cluster without a terminal to confirm on;"
                " pass --yes[/bold red]"
            )
            return 2
        answer = console.input(
            f"This removes every container of cluster [bold]{spec.metadata.name}[/bold]. "
            "Type its name to confirm: "
        )
        if answer.strip() != spec.metadata.name:
            console.print("not confirmed; nothing removed")
            return 1
    state = cluster_state(spec.metadata.name)
    # Not from under a running bring-up: it would fail on every node for no reason it shows.
    with hold_cluster_lock(state, "down"):
        for leftover in local_image.leftover_builds(spec.metadata.name):
            local.docker("rm", "--force", leftover, check=False)
        removed = local.remove(spec)
        images = local_image.remove_images(spec.metadata.name)
        state.replace_status({"last_bringup": {}, "removed": True})
    console.print(
        f"removed {len(removed)} container(s) and network(s) of {spec.metadata.name}"
        + (f", and its {len(images)} baked image(s)" if images else "")
    )
    return 0


@dataclass(frozen=True, slots=True)
class NodeStatus:
    name: str
    state: str  # the container's state on the local provider, "-" elsewhere
    address: str
    last_bringup: str  # ok, failed, incomplete, or "-" before the first bring-up


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """`myriad status`: what the cluster's state folder and (locally) Docker say."""

    cluster: str
    nodes: tuple[NodeStatus, ...]
    last_bringup: Mapping[str, Any]
    summary: str
    prometheus: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "nodes": [asdict(node) for node in self.nodes],
            "last_bringup": dict(self.last_bringup),
            "summary": self.summary,
            "prometheus": self.prometheus,
        }


def status(spec_path: Path) -> ClusterStatus:
    result = planned(spec_path)
    spec = result.loaded.spec
    state = cluster_state(spec.metadata.name)
    last = state.read_status().get("last_bringup") or {}
    failed = set(last.get("failed_hosts", []))
    found = (
        [(n.name, n.state, n.address or "-") for n in local.status(spec)]
        if spec.provider.kind == "local"
        else [(name, "-", "-") for name in _inventory_hosts(state)]
    )
    unfinished = "incomplete" if last.get("status") in (RUNNING, "interrupted") else "failed"
    nodes = tuple(
        NodeStatus(
            name, state_text, address, "-" if not last else (unfinished if name in failed else "ok")
        )
        for name, state_text, address in found
    )
    return ClusterStatus(
        spec.metadata.name, nodes, last, describe_last(state, last), prometheus_url(spec)
    )


def describe_last(state: ClusterState, last: dict[str, object]) -> str:
    """The last bring-up in one line, saying so when it never finished."""
    if not last:
        return "no bring-up recorded yet"
    log = f"log: {last.get('run_dir')}"
    if last.get("status") == RUNNING:
        if is_locked(state):
            holder = read_holder(state)
            who = holder.describe() if holder else f"pid {last.get('pid')}"
            return f"bring-up running now: {who}; {log}"
        return (
            f"last bring-up incomplete: started at {last.get('started_at')} (pid "
            f"{last.get('pid')}) and never finished (killed?); `--retry-failed` re-runs "
            f"its nodes; {log}"
        )
    if last.get("status") == "interrupted":
        return (
            f"last bring-up interrupted at {last.get('finished_at')} during "
            f"{last.get('interrupted_during')}; {log}"
        )
    return (
        f"last bring-up: {last.get('status')} at {last.get('finished_at')} in "
        f"{last.get('seconds')} s ({last.get('tuning', 'tuned')}); {log}"
    )


def _inventory_hosts(state: ClusterState) -> list[str]:
    host_vars = state.inventory / "host_vars"
    return sorted(p.stem for p in host_vars.glob("*.json")) if host_vars.is_dir() else []
