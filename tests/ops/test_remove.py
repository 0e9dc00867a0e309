"""`myriad remove` of nodes Slurm never knew: their containers go, nothing is drained.

A node whose bring-up never reached the slurm role (or a pool renamed before it did) has no
job to wait for, and `up` refuses to remove its container with the spec's count lowered:
remove must be the way out, on the local example and a recorded Slurm.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from myriad.errors import OpsInputError
from myriad.ops import remove as remove_module
from myriad.ops.roll_result import RollResult
from myriad.ops.slurm import Completed, Slurm
from myriad.provision import local

EXAMPLE = Path(__file__).resolve().parents[2] / "inventories" / "local" / "cluster.yaml"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path))


def run(
    monkeypatch: pytest.MonkeyPatch, nodes: list[str], containers: dict[str, tuple[str, str]]
) -> tuple[RollResult, list[tuple[str, ...]], list[tuple[str, ...]], list[str]]:
    slurm_commands: list[tuple[str, ...]] = []
    docker_calls: list[tuple[str, ...]] = []

    def answer(argv: Sequence[str]) -> Completed:
        slurm_commands.append(tuple(argv))
        out = "node01|idle|none\nnode02|idle|none\nnode03|idle|none\n" if argv[0] == "sinfo" else ""
        return Completed(0, out, "")

    def fake_docker(*args: str, **kwargs: Any) -> str:
        docker_calls.append(args)
        return ""

    monkeypatch.setattr(Slurm, "of", classmethod(lambda cls, inv: Slurm(["x"], answer)))
    monkeypatch.setattr(local, "container_states", lambda spec: containers)
    monkeypatch.setattr(local, "docker", fake_docker)
    lines: list[str] = []
    result = remove_module.remove(EXAMPLE, nodes, lines.append)
    return result, slurm_commands, docker_calls, lines


def test_a_node_slurm_never_knew_loses_only_its_container(monkeypatch: pytest.MonkeyPatch) -> None:
    containers = {"local-ctl01": ("running", ""), "local-node07": ("running", "")}
    result, slurm, docker, lines = run(monkeypatch, ["node07"], containers)
    assert result.ok and result.containers_only == ("node07",)
    assert result.nodes == () and result.log is None  # no roll ran: nothing to drain
    assert docker == [("rm", "--force", "local-node07")]
    assert [c[0] for c in slurm] == ["sinfo"]  # nothing drained, no slurm.conf rewritten
    assert lines == []


def test_a_node_neither_slurm_nor_docker_knows_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OpsInputError, match="node09: neither Slurm nor this cluster's"):
        run(monkeypatch, ["node09"], {"local-ctl01": ("running", "")})
