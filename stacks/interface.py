"""The one interface between the program and a provider module, and the shape of `nodes`.

A provider is one module (`stacks/<kind>.py`) with a `build` function of the `ProviderBuild`
shape, registered by kind in `stacks.program`. It creates the machines of one stack's scope
and returns them as node records whose keys are `myriad.plan.machines.NODE_KEYS`,
the shape `myriad render --stack` reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pulumi

from myriad.errors import MyriadError
from myriad.plan.machines import NODE_KEYS
from myriad.plan.nodes import NodeRecord
from myriad.spec.models import Cluster

if TYPE_CHECKING:
    from stacks.settings import StackSettings
    from stacks.sharding import StackScope


class StackError(MyriadError):
    """The stack cannot be built from this spec and config; the message says what to change."""

    exit_code = 2


@dataclass(frozen=True)
class ProviderResult:
    """What a provider made: the node records, and any further stack outputs (by name)."""

    nodes: pulumi.Output[list[dict[str, Any]]]
    outputs: Mapping[str, pulumi.Input[Any]] = field(default_factory=dict)


class ProviderBuild(Protocol):
    def __call__(
        self, spec: Cluster, scope: StackScope, settings: StackSettings
    ) -> ProviderResult: ...


def node_record(
    node: NodeRecord,
    *,
    provider: str,
    address: pulumi.Input[str],
    ids: Mapping[str, pulumi.Input[str]],
    public_address: pulumi.Input[str] | None = None,
) -> dict[str, pulumi.Input[Any]]:
    """One entry of the `nodes` output; pool, role and island come from the spec's node list."""
    record: dict[str, pulumi.Input[Any]] = {
        "name": node.name,
        "address": address,
        "pool": node.pool,
        "role": node.role,
        "island": node.island,
        "provider": provider,
        "ids": dict(ids),
        "public_address": public_address,
    }
    assert tuple(record) == NODE_KEYS, "node_record and machines.NODE_KEYS disagree"
    return record


def all_records(records: Sequence[dict[str, pulumi.Input[Any]]]) -> pulumi.Output[list[Any]]:
    """The records as one output, resolved once every address and id is known."""
    return pulumi.Output.from_input(list(records))
