"""Which compute nodes a roll takes out of service together: pure functions, no I/O.

A roll goes island by island (a job's island is never half-old, half-new), and inside an
island in batches of `--batch` nodes; `--max-unavailable` caps the nodes out of service at
once, counting those Slurm already has down or drained for other reasons. The failure
budget says how many nodes may fail validation before the roll stops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from myriad.errors import OpsInputError

_AMOUNT = re.compile(r"^(?P<value>[0-9]+)(?P<percent>%?)$")


@dataclass(frozen=True, slots=True)
class Amount:
    """A node count given as a number (`2`) or a share of the nodes rolled (`25%`)."""

    value: int
    percent: bool

    @classmethod
    def parse(cls, text: str, option: str, *, allow_zero: bool = False) -> Amount:
        found = _AMOUNT.match(text.strip())
        if found is None:
            raise OpsInputError(
                f"{option} {text!r}: expected a node count (2) or a percentage (25%)"
            )
        value, percent = int(found["value"]), bool(found["percent"])
        if percent and value > 100:
            raise OpsInputError(f"{option} {text}: a percentage is at most 100%")
        if value == 0 and not allow_zero:
            raise OpsInputError(f"{option} {text}: must be at least 1 (or 1%)")
        return cls(value, percent)

    def of(self, total: int) -> int:
        """The count for `total` nodes: a percentage rounds up, so 1% of 10 nodes is 1."""
        if not self.percent:
            return self.value
        return math.ceil(total * self.value / 100)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


@dataclass(frozen=True, slots=True)
class Batch:
    index: int
    island: int | None
    nodes: tuple[str, ...]


def batch_size(
    total: int, batch: Amount, max_unavailable: Amount | None, already_unavailable: int
) -> int:
    """Nodes per batch: `--batch`, but never more than `--max-unavailable` leaves room for
    beside the nodes already out of service. OpsInputError when it leaves none."""
    size = max(1, batch.of(total))
    if max_unavailable is None:
        return size
    cap = max_unavailable.of(total) - already_unavailable
    if cap < 1:
        raise OpsInputError(
            f"--max-unavailable {max_unavailable} allows {max_unavailable.of(total)} of "
            f"{total} nodes out of service, and {already_unavailable} already are "
            "(down or drained for another reason): nothing could be rolled"
        )
    return min(size, cap)


def plan_batches(
    nodes: Sequence[str],
    islands: Mapping[str, int | None],
    *,
    batch: Amount,
    max_unavailable: Amount | None = None,
    unavailable: Collection[str] = (),
) -> list[Batch]:
    """The batches in the order they are rolled: islands in ascending order (nodes of no
    island last), each island's nodes in the given order, no batch spanning two islands."""
    size = batch_size(len(nodes), batch, max_unavailable, len(set(unavailable)))
    by_island: dict[int | None, list[str]] = {}
    for node in nodes:
        by_island.setdefault(islands.get(node), []).append(node)
    order = sorted(by_island, key=lambda island: (island is None, island or 0))
    batches: list[Batch] = []
    for island in order:
        members = by_island[island]
        for start in range(0, len(members), size):
            batches.append(Batch(len(batches) + 1, island, tuple(members[start : start + size])))
    return batches


def budget_spent(failed: int, budget: Amount, total: int) -> bool:
    """True once more nodes failed than the budget allows (budget 0: the first failure)."""
    return failed > budget.of(total)
