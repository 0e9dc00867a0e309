"""`myriad bringup`, `down` and `status`, and what `up` needs of bring-up (local only, advice).

`bringup` and `status` return results (the views draw them, the CLI picks the exit code);
`myriad up` composes these with validation and day-2 one layer up (`myriad.lifecycle`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from myriad.bringup.flow import (
    RUNNING,
    ClusterState,
    cluster_state,
    planned,
    retry_limit,
    run_site,
)
from myriad.bringup.lock import hold_cluster_lock, is_locked, read_holder
from myriad.bringup.reporting import Reporter
from myriad.bringup.tags import check_tags
from myriad.errors import FlowError
from myriad.plan.pipeline import PlanResult
from myriad.provision import local, local_image
from myriad.provision.resolve import resolve_cluster
from myriad.render.monitoring import prometheus_url
from myriad.render.writer import write_inventory
from myriad.runner import TUNED, RunResult, Tuning

# What does a local-only verb's job on the other providers.
_ELSEWHERE = {
    "up": "runs the local container cluster; this spec's provider is {kind}: create the "
    "machines with `pulumi up`, then run `myriad bringup`",
    "down": "removes the local container cluster; this spec's provider is {kind}: its machines "
    "are removed with `pulumi destroy` on the environment's stack "
    "(stacks/README.md, The real flow: Teardown)",
}


def require_local(result: PlanResult, verb: str) -> None:
    kind = result.loaded.spec.provider.kind
    if kind != "local":
        raise FlowError(f"`myriad {verb}` " + _ELSEWHERE[verb].format(kind=kind))


@dataclass(frozen=True, slots=True)
class BringupResult:
    """`myriad bringup`: the site playbook's outcome, and for the local provider's nodes that
    did not answer what to do about them."""

    outcome: RunResult
    check: bool
    advice: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.outcome.ok


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
) -> BringupResult:
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
    advice = () if outcome.ok else tuple(unreachable_advice(cluster.result, state, outcome))
    return BringupResult(outcome, check, advice)


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
    require_local(result, "down")
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
