"""What every node should look like: a pure function of spec + plan + inventory.

This is the controller's half of the check model: it builds a `Context` for each kind of
node (a pool, and its Slurm role) and for each node, and asks every check's `derive` for
its expectation. Hardware figures (GPU count and model, NIC rates, PCIe links) come from
the spec and the catalog; the state the roles produce (/etc/nccl.conf, bonds, QoS,
services) comes from the inventory variables the roles were given, completed by the roles'
own defaults, so that the expectation is what the roles were asked to do.

The expectations are plain data (myriad.node.checks.model): the same objects, or their
JSON, are what evaluation reads on the controller and on a node. Nodes of one kind share
one tuple; only checks declared `per_node` (host name, Slurm switch) are per node, so
12,500 nodes cost a few shared tuples, not half a million objects.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from myriad import paths
from myriad.node.checks import CHECKS, Check, Context, Expect, Expectation
from myriad.node.checks.model import ClusterExpectations, NodeExpectations
from myriad.plan.model import Plan
from myriad.plan.nodes import iter_nodes
from myriad.plan.nvlink import rack_domain_members
from myriad.plan.ports import ports
from myriad.render.inventory import Inventory
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster

# Roles whose defaults complete what the inventory says (a variable the renderer leaves out
# takes the role's default on the node, so the expectation must too).
DEFAULT_ROLES = (
    "common",
    "nvidia_driver",
    "rdma",
    "roce",
    "storage_net",
    "nccl",
    "container_runtime",
    "slurm",
)


@cache
def load_role_defaults(roles: Path | None = None) -> Mapping[str, Any]:
    """The roles' defaults/main.yml merged: what a node gets where the inventory is silent."""
    merged: dict[str, Any] = {}
    roles = paths.roles_dir() if roles is None else roles
    for role in DEFAULT_ROLES:
        path = roles / role / "defaults" / "main.yml"
        if path.is_file():
            merged.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return merged


def derive(check: Check, context: Context) -> Expectation:
    """One check's expectation for a context, as plain data."""
    made = check.derive(context)
    if isinstance(made, Expect):
        return Expectation(check.id, made.value, made.spec_field, made.fix)
    return Expectation(check.id, None, made.spec_field, applies=False, reason=made.reason)


def _switch_of(variables: Mapping[str, Any]) -> dict[str, str]:
    leaf: dict[str, str] = {}
    for switch in variables.get("slurm_topology_switches") or []:
        for member in switch.get("nodes") or []:
            leaf[member] = switch["name"]
    return leaf


def _group_scopes(inventory: Inventory) -> dict[str, list[str]]:
    """Node → the groups with variables it belongs to, most specific (alphabetically last,
    as Ansible merges groups of one depth) first; `all` is added by the caller."""
    member: dict[str, list[str]] = {}
    for group in sorted(inventory.group_vars, reverse=True):
        if group == "all":
            continue
        for host in inventory.groups.get(group, ()):
            member.setdefault(host, []).append(group)
    return member


def node_variables(
    inventory: Inventory, node: str, defaults: Mapping[str, Any]
) -> Mapping[str, Any]:
    """A node's variables as Ansible merges inventory ones: host, groups, all, role defaults;
    the cluster-wide tables (extra vars, named nowhere else) above role defaults."""
    scopes = _group_scopes(inventory).get(node, [])
    return ChainMap(
        dict(inventory.host_vars.get(node, {})),
        *(dict(inventory.group_vars[g]) for g in scopes),
        dict(inventory.group_vars.get("all", {})),
        dict(inventory.tables),
        dict(defaults),
    )


def expect(
    spec: Cluster,
    catalog: Catalog,
    plan: Plan,
    inventory: Inventory,
    defaults: Mapping[str, Any],
) -> ClusterExpectations:
    """Every node's expectations; linear in nodes, one derivation per kind of node."""
    scopes = _group_scopes(inventory)
    all_vars = inventory.group_vars.get("all", {})
    tables = inventory.tables
    switch_of = _switch_of(tables)
    domain_of = {
        tray: (name, tuple(trays))
        for name, trays in rack_domain_members(plan.nvlink, list(iter_nodes(spec))).items()
        for tray in trays
    }
    controllers = tuple(entry["name"] for entry in all_vars.get("slurm_controllers") or [])
    node_sets: list[Mapping[str, Any]] = tables.get("slurm_nodes") or []
    set_of = {name: i for i, node_set in enumerate(node_sets) for name in node_set.get("names", [])}
    shared_checks = [check for check in CHECKS if not check.per_node]
    own_checks = [check for check in CHECKS if check.per_node]
    fabric = spec.network.fabric
    nodes: list[NodeExpectations] = []
    for pool in spec.pools:
        names = pool.hostnames()
        profile = spec.profiles[pool.profile]
        pool_context = Context(
            spec=spec,
            catalog=catalog,
            plan=plan,
            pool=pool,
            profile=profile,
            variables=ChainMap(
                *(dict(inventory.group_vars[g]) for g in scopes.get(names[0], [])),
                dict(all_vars),
                dict(tables),
                dict(defaults),
            ),
            compute_ports=tuple(ports(profile, catalog, "compute", fabric)),
            storage_ports=tuple(ports(profile, catalog, "storage", fabric)),
        )
        kinds: dict[tuple[bool, int | None], tuple[Context, tuple[Expectation, ...]]] = {}
        for name in names:
            kind = (name in controllers, set_of.get(name))
            if kind not in kinds:
                context = replace(
                    pool_context,
                    slurm_controller=kind[0],
                    slurm_node_set=None if kind[1] is None else node_sets[kind[1]],
                )
                kinds[kind] = (context, tuple(derive(c, context) for c in shared_checks))
            context, shared = kinds[kind]
            # Per node, the node's own inventory variables come first (its rail addresses).
            host = dict(inventory.host_vars.get(name, {}))
            shared_vars = context.variables
            own = replace(
                context,
                node=name,
                switch=switch_of.get(name),
                nvlink_domain=domain_of.get(name),
                variables=shared_vars.new_child(host)
                if isinstance(shared_vars, ChainMap)
                else {**shared_vars, **host},
            )
            nodes.append(
                NodeExpectations(
                    name,
                    pool.name,
                    pool.profile,
                    pool.role,
                    shared,
                    tuple(derive(c, own) for c in own_checks),
                )
            )
    return ClusterExpectations(
        cluster=spec.metadata.name,
        provider=spec.provider.kind,
        orchestrator=spec.software.orchestrator,
        nodes=tuple(nodes),
        controllers=controllers or tuple(inventory.groups.get("controller", ())),
    )
