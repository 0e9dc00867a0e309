"""The Ansible inventory: the one contract between the spec and the roles.

`build_inventory` is pure: spec + plan (+ the machines and the file system a stack made) in,
groups and variables out. Groups: by role (`controller`, `login`, `compute`, `storage`), by pool
(`pool_<name>`) and by island (`island_<nn>`). Cluster-wide settings go to `all`, what a
server shape implies to its pool's group, and what differs per node (addresses, island,
leaf switches) to host_vars. Cluster-wide tables that grow with the node count (every host's
address, Slurm's node lines and topology) go to `tables`, which no host merges: the writer
puts them in `cluster_tables.yml` and playbook runs load that as extra vars (render.tables).
Every role variable carries its role's prefix and is documented in that role's
`meta/argument_specs.yml`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from myriad.plan.addresses import RailRange, host_addresses, rail_addresses
from myriad.plan.fabric import leaf_placement, rail_leaves
from myriad.plan.machines import StackNode, StackStorage
from myriad.plan.model import Plan
from myriad.plan.nodes import NodeRecord, container_name, iter_nodes
from myriad.render.monitoring import monitoring_files, monitoring_group_vars, monitoring_groups
from myriad.render.role_vars import (
    cluster_vars,
    host_role_vars,
    imex_domains,
    pool_vars,
    role_group_vars,
    slurm_blocks,
    slurm_topology,
)
from myriad.render.tables import FILE_MARKER, LOADED_MARKER, TABLE_VARIABLES, TABLES_FILE
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster

ROLE_GROUPS = ("controller", "login", "compute", "storage")
# How the controller reaches a node: an image build host or a node converging itself has its own.
CONNECTION_VARS = frozenset(
    {"ansible_connection", "ansible_host", "ansible_user", "ansible_port", "ansible_become",
     "ansible_python_interpreter"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Connection:
    """How Ansible reaches the nodes."""

    kind: str = "ssh"
    user: str | None = None


@dataclass(frozen=True, slots=True)
class Inventory:
    cluster: str
    groups: Mapping[str, Sequence[str]]
    group_vars: Mapping[str, Mapping[str, Any]]
    host_vars: Mapping[str, Mapping[str, Any]]
    # Files beside the variables, by path relative to the inventory (monitoring/...).
    files: Mapping[str, str] = field(default_factory=dict)
    # Cluster-wide tables, merged into no host: `cluster_tables.yml`, loaded as extra vars.
    tables: Mapping[str, Any] = field(default_factory=dict)

    @property
    def hosts(self) -> Sequence[str]:
        return list(self.host_vars)


def island_group(island: int) -> str:
    return f"island_{island:02d}"


def build_inventory(
    spec: Cluster,
    catalog: Catalog,
    plan: Plan,
    *,
    machines: Iterable[StackNode] = (),
    filesystem: StackStorage | None = None,
    connection: Connection = Connection(),
    images: Mapping[str, Mapping[str, str]] | None = None,
) -> Inventory:
    """`images`: profile → its current baked image (`tag`, `content_hash`), in image mode;
    each pool of that profile carries it as `myriad_image` (what validation compares with
    the image a node runs)."""
    nodes = list(iter_nodes(spec))
    addresses = _management_addresses(spec, nodes, {m.name: m for m in machines})
    storage = _optional_addresses(spec.network.addressing.storage, len(nodes), "storage")

    pool_vars_by_name = {pool.name: pool_vars(spec, catalog, pool) for pool in spec.pools}
    pool_hcas = {name: values.get("nccl_hcas", []) for name, values in pool_vars_by_name.items()}
    rails = _rail_addresses(spec, plan, nodes, pool_vars_by_name)
    imex = imex_domains(plan, nodes, addresses)
    groups: dict[str, list[str]] = {name: [] for name in ROLE_GROUPS}
    for pool in spec.pools:
        groups[f"pool_{pool.name}"] = []
    host_vars: dict[str, dict[str, Any]] = {}
    compute_position = 0
    for position, node in enumerate(nodes):
        groups[node.role].append(node.name)
        groups[f"pool_{node.pool}"].append(node.name)
        if node.island is not None:
            groups.setdefault(island_group(node.island), []).append(node.name)
        variables: dict[str, Any] = {
            "myriad_pool": node.pool,
            "myriad_role": node.role,
            "myriad_address": addresses[node.name],
        }
        variables.update(_connection_vars(spec, node, addresses[node.name], connection))
        if node.name in imex:
            # The IMEX daemon's nodes: every tray of this tray's NVLink domain (rack).
            variables["nvidia_driver_imex_nodes"] = imex[node.name]
        if node.island is not None:
            variables["myriad_island"] = node.island
            variables["myriad_leaves"] = _leaves(plan, compute_position, spec, node, catalog)
            nics = pool_vars_by_name[node.pool].get("roce_nics", [])
            if rails and nics:
                # The rail's IPv4 address gives its RDMA device a RoCEv2 GID.
                variables["roce_nics"] = [
                    _rail_nic(nic, rails[rail], compute_position) for rail, nic in enumerate(nics)
                ]
            compute_position += 1
            if spec.software.orchestrator == "kubernetes":
                variables["kubernetes_node_hcas"] = [
                    {"name": hca["name"], "rail": hca["rail"], "leaf": leaf}
                    for hca, leaf in zip(
                        pool_hcas[node.pool], variables["myriad_leaves"], strict=False
                    )
                ]
        variables.update(
            host_role_vars(
                spec,
                catalog,
                node,
                address=addresses[node.name],
                storage_address=None if storage is None else storage.with_prefix(position),
            )
        )
        host_vars[node.name] = variables

    group_vars: dict[str, dict[str, Any]] = {
        "all": cluster_vars(spec, catalog, plan, nodes, addresses, filesystem=filesystem)
    }
    blocks = slurm_blocks(spec, plan, nodes)
    group_vars["all"]["slurm_topology_blocks"] = blocks
    if blocks:
        # NVLink domains: Slurm places a job inside one with topology/block, not the tree.
        group_vars["all"]["slurm_topology_plugin"] = "topology/block"
        group_vars["all"]["slurm_topology_switches"] = []
    else:
        group_vars["all"]["slurm_topology_switches"] = slurm_topology(spec, plan, nodes)
    tables = _split_tables(group_vars["all"])
    group_vars.update(role_group_vars(spec, nodes, addresses))
    for name, values in pool_vars_by_name.items():
        group_vars[f"pool_{name}"] = values
    for pool in spec.pools:
        if images and pool.profile in images:
            group_vars[f"pool_{pool.name}"]["myriad_image"] = dict(images[pool.profile])
    groups.update(monitoring_groups(spec, nodes))
    for group, values in monitoring_group_vars(spec, nodes, addresses).items():
        group_vars.setdefault(group, {}).update(values)
    files = (
        {
            f"monitoring/{path}": text
            for path, text in monitoring_files(spec, catalog, plan, nodes, addresses).items()
        }
        if spec.monitoring.enabled
        else {}
    )
    return Inventory(
        cluster=spec.metadata.name,
        groups={name: hosts for name, hosts in groups.items()},
        group_vars=group_vars,
        host_vars=host_vars,
        files=files,
        tables=tables,
    )


def _split_tables(everything: dict[str, Any]) -> dict[str, Any]:
    """Take the cluster-wide tables out of `all`; `all` then names the file they are in."""
    tables = {name: everything.pop(name) for name in TABLE_VARIABLES if name in everything}
    if not tables:
        return {}
    everything[FILE_MARKER] = TABLES_FILE
    return {LOADED_MARKER: True, **tables}


def _management_addresses(
    spec: Cluster, nodes: Sequence[NodeRecord], machines: Mapping[str, StackNode]
) -> dict[str, str]:
    """Addresses the stack reported win; the rest follow the management network in order."""
    planned = host_addresses(spec.network.addressing.management, len(nodes), what="management")
    return {
        node.name: machines[node.name].address if node.name in machines else planned[i]
        for i, node in enumerate(nodes)
    }


def _rail_addresses(
    spec: Cluster,
    plan: Plan,
    nodes: Sequence[NodeRecord],
    pool_vars: Mapping[str, Mapping[str, Any]],
) -> list[RailRange]:
    """One address range per RoCE rail (network.addressing.compute cut per rail, and per leaf
    where the rail spans several and the spec does not stretch it), or none."""
    cidr = spec.network.addressing.compute
    rails = max((len(v.get("roce_nics", [])) for v in pool_vars.values()), default=0)
    if cidr is None or rails == 0:
        return []
    leaves = None
    if plan.fabric is not None and spec.network.addressing.rail_subnets == "per-leaf":
        leaves = rail_leaves(plan.fabric)
    return rail_addresses(cidr, rails, sum(1 for n in nodes if n.island is not None), leaves)


def _rail_nic(nic: Mapping[str, Any], rail: RailRange, position: int) -> dict[str, Any]:
    """A roce_nics entry with its address; behind a routed leaf, the leaf as its gateway to
    the rail's other leaves (the rail's whole network)."""
    entry = {**nic, "address": rail.with_prefix(position)}
    gateway = rail.gateway(position)
    if gateway is not None:
        entry["gateway"] = gateway
        entry["rail_network"] = rail.network
    return entry


def _optional_addresses(cidr: str | None, count: int, what: str) -> Any:
    return None if cidr is None else host_addresses(cidr, count, what=what)


def _connection_vars(
    spec: Cluster, node: NodeRecord, address: str, connection: Connection
) -> dict[str, Any]:
    if spec.provider.kind == "local":
        # Containers of the local cluster are reached through `docker exec`, no SSH keys. The
        # short name routes to community.docker.docker; Mitogen replaces only the short name.
        # The connection is root already: sudo would only start a second interpreter per node.
        return {
            "ansible_connection": "docker",
            "ansible_become": False,
            "ansible_host": container_name(spec, node.name),
            "ansible_python_interpreter": "/usr/bin/python3",
        }
    variables: dict[str, Any] = {"ansible_host": address}
    if connection.user:
        variables["ansible_user"] = connection.user
    return variables


def _leaves(
    plan: Plan, compute_position: int, spec: Cluster, node: NodeRecord, catalog: Catalog
) -> list[str]:
    fabric = plan.fabric
    if fabric is None:
        return []
    group = spec.profiles[node.profile].nics.compute
    ports = 1 if group is None else group.count * catalog.nics[group.model].ports
    return [
        leaf_placement(fabric, compute_position, nic).leaf
        for nic in range(min(ports, fabric.rails))
    ]
