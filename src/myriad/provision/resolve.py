"""spec → plan → machines → inventory: the one sequence every command starts with.

`resolve_cluster` loads and plans the spec (or takes a plan already made), refuses a plan
with lint errors, reads the machines a Pulumi stack made (from the stack itself or from a
saved `pulumi stack output --json`), checks them against the spec, and builds the Ansible
inventory from all three. `myriad render`, `bringup`, `up` and `validate` all call it, so
they can never disagree on the inventory of a cluster. Writing the inventory to disk is the
caller's choice (`write_inventory`): `render` writes where asked, the others into the
cluster's state folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from myriad import paths
from myriad.errors import StackOutputsError
from myriad.plan.machines import StackNode, StackStorage
from myriad.plan.model import Plan
from myriad.plan.pipeline import PlanResult, plan_spec
from myriad.provision.stack_outputs import (
    StackOutputs,
    load_saved_outputs,
    match_spec,
    match_storage,
    read_stack_outputs,
)
from myriad.render.inventory import Connection, Inventory, build_inventory
from myriad.render.writer import write_inventory
from myriad.spec.catalog_models import Catalog
from myriad.spec.loader import LoadedSpec
from myriad.spec.models import Cluster


@dataclass(frozen=True, slots=True)
class ResolvedCluster:
    """A spec with everything derived from it: its plan, its machines and its inventory."""

    result: PlanResult
    plan: Plan
    machines: tuple[StackNode, ...]
    inventory: Inventory
    storage: StackStorage | None = None

    @property
    def loaded(self) -> LoadedSpec:
        return self.result.loaded

    @property
    def spec(self) -> Cluster:
        return self.result.loaded.spec

    @property
    def catalog(self) -> Catalog:
        return self.result.loaded.catalog


def read_outputs(stack: str | None, stack_outputs: Path | None) -> StackOutputs:
    """The machines of a Pulumi stack (run in the project folder), of a saved copy of its
    outputs, or none (then every address is planned from the spec: the local cluster); with
    the file system the stack made (its `storage` output), if any."""
    if stack is not None:
        return read_stack_outputs(stack, cwd=paths.project_root())
    if stack_outputs is not None:
        return load_saved_outputs(stack_outputs)
    return StackOutputs([])


def _check_storage(
    result: PlanResult, outputs: StackOutputs, stack: str | None, stack_outputs: Path | None
) -> None:
    """The stack's file system against the spec; FSx for Lustre needs the stack's address."""
    source = f"stack {stack}" if stack is not None else str(stack_outputs)
    spec = result.loaded.spec
    match_storage(spec, outputs.storage, source)
    if spec.storage.kind != "fsx-lustre" or outputs.storage is not None:
        return
    if stack is None and stack_outputs is None:
        why = "no stack was given"
        hint = (
            "render after `pulumi up`, with --stack ENV or --stack-outputs FILE (a saved "
            "`pulumi stack output --json`)"
        )
    else:
        why = f"{source} has no `storage` output"
        hint = (
            "pass the stack that holds the cluster's shared resources (the VPC and the file "
            "system), or run `pulumi up` for it"
        )
    problem = result.loaded.source.problem(
        ("storage", "kind"),
        "fsx-lustre is made by the aws stack, and the nodes mount it at the address the stack "
        f"exports (<dns_name>@tcp:/<mount_name>); {why}",
        hint,
    )
    raise StackOutputsError(problem.render())


def resolve_cluster(
    source: Path | PlanResult,
    *,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    connection: Connection | None = None,
    images: Mapping[str, Mapping[str, str]] | None = None,
) -> ResolvedCluster:
    """`source` is a spec file, or the plan of one already made (`up` plans before it
    creates containers). PlanError when the plan has lint errors; StackOutputsError when
    the machines or the file system disagree with the spec (a partial set is fine: island
    stacks come one by one), or when the spec's FSx for Lustre has no stack to give its
    address."""
    result = source if isinstance(source, PlanResult) else plan_spec(source)
    plan = result.usable_plan()
    outputs = read_outputs(stack, stack_outputs)
    machines = outputs.nodes
    if machines:
        match_spec(result.loaded.spec, machines, require_all=False)
    _check_storage(result, outputs, stack, stack_outputs)
    inventory = build_inventory(
        result.loaded.spec,
        result.loaded.catalog,
        plan,
        machines=machines,
        filesystem=outputs.storage,
        connection=connection or Connection(),
        images=images,
    )
    return ResolvedCluster(result, plan, tuple(machines), inventory, outputs.storage)


@dataclass(frozen=True, slots=True)
class RenderResult:
    cluster: str
    path: Path
    hosts: int
    groups: int
    inventory: Inventory


def render_spec(
    spec_path: Path,
    out: Path,
    *,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    ssh_user: str | None = None,
) -> RenderResult:
    """What `myriad render` does: resolve the cluster and write its inventory to `out`."""
    cluster = resolve_cluster(
        spec_path, stack=stack, stack_outputs=stack_outputs, connection=Connection(user=ssh_user)
    )
    inventory = cluster.inventory
    path = write_inventory(inventory, out)
    groups = sum(1 for hosts in inventory.groups.values() if hosts)
    hosts = len(inventory.host_vars)
    return RenderResult(cluster.spec.metadata.name, path, hosts, groups, inventory)
