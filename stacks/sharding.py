"""Which of the spec's nodes one stack holds.

By default one stack holds the whole cluster. A spec with `provider.stack_per_island: true`
is split so that no state file grows with the cluster: the stack without `myriad:island`
holds what is shared (the network, controllers, login and storage nodes), and each stack
with `myriad:island: N` holds the compute nodes of island N, numbered as `iter_nodes` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.spec.models import Cluster
from stacks.interface import StackError


@dataclass(frozen=True, slots=True)
class StackScope:
    per_island: bool
    island: int | None
    nodes: tuple[NodeRecord, ...]

    @property
    def holds_shared(self) -> bool:
        """Whether this stack owns the cluster-wide parts (network, non-compute nodes)."""
        return not self.per_island or self.island is None

    @property
    def label(self) -> str:
        if not self.per_island:
            return "cluster"
        return "shared" if self.island is None else f"island-{self.island}"


def islands(spec: Cluster) -> list[int]:
    """The island numbers of the spec's compute nodes, in order."""
    return sorted({n.island for n in iter_nodes(spec) if n.island is not None})


def scope_for(spec: Cluster, island: int | None) -> StackScope:
    per_island = spec.provider.stack_per_island
    nodes = list(iter_nodes(spec))
    if not per_island:
        if island is not None:
            raise StackError(
                f"myriad:island is {island}, but the spec keeps the cluster in one stack; set "
                "provider.stack_per_island: true in the spec, or remove myriad:island"
            )
        return StackScope(False, None, tuple(nodes))
    if island is None:
        return StackScope(True, None, tuple(n for n in nodes if n.island is None))
    known = islands(spec)
    if island not in known:
        raise StackError(
            f"myriad:island is {island}, but the spec's compute nodes form islands "
            f"0 to {known[-1] if known else 0}"
        )
    return StackScope(True, island, tuple(n for n in nodes if n.island == island))
