"""The cluster's nodes, one record each, in a stable order: the spine of every inventory.

Compute nodes are numbered across compute pools in pool order; that index decides the
node's island (index // island_nodes), the same rule the fabric plan uses to place NICs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from myriad.spec.models import Cluster, Role


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    pool: str
    profile: str
    role: Role
    index_in_pool: int
    compute_index: int | None
    island: int | None


def container_name(spec: Cluster, node: str) -> str:
    """The local cluster's container for a node: prefixed, so two clusters never collide."""
    return f"{spec.metadata.name}-{node}"


def island_size(spec: Cluster) -> int:
    compute_nodes = sum(pool.count for pool in spec.pools_with_role("compute"))
    return spec.network.topology.island_nodes or max(compute_nodes, 1)


def iter_nodes(spec: Cluster) -> Iterator[NodeRecord]:
    size = island_size(spec)
    compute_index = 0
    for pool in spec.pools:
        for index in range(1, pool.count + 1):
            if pool.role == "compute":
                record = NodeRecord(
                    pool.hostname(index),
                    pool.name,
                    pool.profile,
                    pool.role,
                    index,
                    compute_index,
                    compute_index // size,
                )
                compute_index += 1
            else:
                record = NodeRecord(
                    pool.hostname(index), pool.name, pool.profile, pool.role, index, None, None
                )
            yield record
