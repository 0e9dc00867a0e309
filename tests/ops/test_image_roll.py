"""Image mode's rollout returns what it did: compute nodes rolled one at a time (the roll's
result), and the controllers either recreated or, while jobs run or wait, left on their image
with a note saying how to finish. The Docker side is faked; the roll loop is the real one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from myriad.ops import image_roll
from myriad.ops.slurm import Job, NodeState, Slurm


class QueueSlurm(Slurm):
    def __init__(self, queued: int) -> None:
        super().__init__(["true"])
        self.queued = queued
        self.states = {"node01": NodeState("node01", "idle", "")}

    def nodes(self, names: Sequence[str] | None = None) -> dict[str, NodeState]:
        return {n: s for n, s in self.states.items() if not names or n in names}

    def jobs(self, names: Sequence[str] | None = None) -> list[Job]:
        if names:  # the roll asks about the nodes it drained: none holds them
            return []
        return [Job(str(i), ("node09",), "alice", "train") for i in range(self.queued)]

    def drain(self, names: Sequence[str], reason: str) -> None:
        for n in names:
            self.states[n] = NodeState(n, "drained", reason)

    def resume(self, names: Sequence[str]) -> None:
        for n in names:
            self.states[n] = NodeState(n, "idle", "")


def rollout(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    stale: Sequence[str],
    *,
    queued: int = 0,
    broken: Mapping[str, str] | None = None,
) -> tuple[Any, list[str]]:
    inventory = SimpleNamespace(
        groups={"compute": ["node01"], "pool_gpu": ["node01"], "pool_ctl": ["ctl01"]},
        group_vars={
            "pool_gpu": {"myriad_image": {"tag": "g:2"}},
            "pool_ctl": {"myriad_image": {"tag": "c:2"}},
        },
        host_vars={"node01": {"myriad_island": 0}, "ctl01": {}},
    )
    spec = SimpleNamespace(
        pools=[SimpleNamespace(name="gpu"), SimpleNamespace(name="ctl")],
        metadata=SimpleNamespace(name="local"),
    )
    cluster = SimpleNamespace(spec=spec, inventory=inventory)
    monkeypatch.setattr(image_roll, "image_records", lambda result, state: {})
    monkeypatch.setattr(image_roll, "resolve_cluster", lambda result, images: cluster)
    monkeypatch.setattr(Slurm, "of", classmethod(lambda cls, inv: QueueSlurm(queued)))
    made: list[str] = []

    def reimage(self: Any, nodes: Sequence[str]) -> dict[str, str]:
        made.extend(nodes)
        return {n: (broken or {})[n] for n in nodes if n in (broken or {})}

    monkeypatch.setattr(image_roll.ImageSteps, "reimage", reimage)
    monkeypatch.setattr(image_roll.ImageSteps, "validate", lambda self, nodes: {})
    result = SimpleNamespace(loaded=SimpleNamespace(spec=spec))
    state = SimpleNamespace(root=tmp_path)
    lines: list[str] = []
    rolled = image_roll.reimage(result, state, stale, lines.append)  # type: ignore[arg-type]
    return rolled, made + [f"line: {line}" for line in lines]


def test_compute_nodes_roll_and_controllers_follow_when_the_queue_is_empty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rolled, made = rollout(monkeypatch, tmp_path, ["ctl01", "node01"])
    assert rolled.ok and rolled.verb == "image rollout" and rolled.notes == ()
    assert [(n.node, n.status) for n in rolled.nodes] == [("node01", "done")]
    assert made[:2] == ["node01", "ctl01"]  # the compute node's roll first
    assert any(m.endswith(" node01 resumed") for m in made)


def test_controllers_stay_on_their_image_while_jobs_queue(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rolled, made = rollout(monkeypatch, tmp_path, ["ctl01", "node01"], queued=2)
    assert not rolled.ok and "ctl01" not in made
    assert [n.status for n in rolled.nodes] == ["done"]
    assert rolled.notes == (
        "ctl01 stay on their previous image: 2 job(s) are running or waiting, and recreating "
        "a controller would lose its queue. Run `myriad up` again when the queue is empty",
    )


def test_a_controller_not_recreated_fails_the_rollout_with_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = {"ctl01": "container not created (exited)"}
    rolled, made = rollout(monkeypatch, tmp_path, ["ctl01"], broken=broken)
    assert made == ["ctl01"]
    assert not rolled.ok and rolled.nodes == () and rolled.log is None
    assert rolled.notes == ("ctl01: container not created (exited)",)
