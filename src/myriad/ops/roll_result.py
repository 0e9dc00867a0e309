"""What a roll did, once it is over: `RollResult`, read from the roll's saved state.

`myriad roll`, `replace`, `remove` and image mode's rollout each return one; their lines as
they go are a stream (the caller's `Progress`), this is the outcome that `myriad.views.roll`
draws and from which the CLI picks the exit code. It is built from `roll.json`, the same
record `--resume` continues from, so what is shown is what is on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myriad.ops.roll_state import RollState

# A roll's lines as they happen (`<stamp> node02 drained`): the command prints them live.
Progress = Callable[[str], None]


def silent(line: str) -> None:
    """A `Progress` that shows nothing (the lines are in the roll log regardless)."""


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """One node at the end: `done` (changed, validated, resumed), `skipped` (given back
    untouched, or not the roll's to drain), `failed` (stays drained), or short of those when
    the roll stopped first (`pending` never drained; `drained`, `converged` part way)."""

    node: str
    batch: int
    status: str
    detail: str
    waited_for: str  # the job ids the node waited for, comma-separated; "" when none
    drained_at: float | None  # when the roll drained it (epoch seconds), as measured

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "batch": self.batch,
            "status": self.status,
            "detail": self.detail,
            "waited_for": self.waited_for,
            "drained_at": self.drained_at,
        }


@dataclass(frozen=True, slots=True)
class RollResult:
    """`verb` is what ran (`roll`, `replace`, `remove`, `image rollout`); `outcome` how the
    loop ended (`finished`, `stopped after batch 2: ...`); `log` the roll's log, None when no
    roll ran (a remove of nodes Slurm never knew, a rollout of controllers only); `notes`
    what the verb adds after the roll (controllers left on their image)."""

    verb: str
    cluster: str
    outcome: str
    nodes: tuple[NodeOutcome, ...]
    log: Path | None
    seconds: float
    notes: tuple[str, ...] = ()
    failed_notes: bool = False  # a note reports a failure (a controller not recreated)
    # remove: nodes Slurm never knew (no job could run there), whose container alone went.
    containers_only: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Every node rolled (done) and nothing the notes report failed."""
        return all(n.status == "done" for n in self.nodes) and not self.failed_notes

    def to_dict(self) -> dict[str, Any]:
        return {
            "verb": self.verb,
            "cluster": self.cluster,
            "ok": self.ok,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 3),
            "log": None if self.log is None else str(self.log),
            "nodes": [n.to_dict() for n in self.nodes],
            "notes": list(self.notes),
            "containers_only": list(self.containers_only),
        }


def result_of(state: RollState, verb: str, seconds: float) -> RollResult:
    nodes = tuple(
        NodeOutcome(
            node,
            int(record["batch"]),
            str(record["status"]),
            str(record["detail"]),
            str(record.get("waited_for") or ""),
            None if record.get("drained_at") is None else float(record["drained_at"]),
        )
        for node, record in state.data["nodes"].items()
    )
    return RollResult(
        verb,
        str(state.data["cluster"]),
        str(state.data.get("outcome") or ""),
        nodes,
        state.log_path,
        seconds,
    )


def nothing_rolled(
    verb: str,
    cluster: str,
    notes: Sequence[str] = (),
    *,
    failed: bool = False,
    containers_only: Sequence[str] = (),
) -> RollResult:
    """No roll ran (nothing to drain): what the verb did instead is in the notes."""
    return RollResult(
        verb, cluster, "finished", (), None, 0.0, tuple(notes), failed, tuple(containers_only)
    )
