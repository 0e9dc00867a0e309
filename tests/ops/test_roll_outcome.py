"""A roll's outcome as the command shows it: `myriad roll`, `replace` and `remove` stream their
lines as they go, then draw the `RollResult` (or print it under `--json`), and exit 0 only when
every node was rolled. The loop itself is tested on its results in test_roll.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from myriad import JSON_FORMAT
from myriad.cli import main
from myriad.ops import remove as remove_module
from myriad.ops import replace as replace_module
from myriad.ops import roll as roll_module
from myriad.ops.roll_result import NodeOutcome, RollResult
from myriad.views.roll import print_roll

LINE = "2026-12-03T18:00:00.000Z node02 drained"


def outcome(
    *statuses: str, verb: str = "roll", log: Path | None = Path("/s/roll.log")
) -> RollResult:
    nodes = tuple(
        NodeOutcome(
            f"node0{i}",
            i,
            status,
            "validation: nccl.conf (expected defaults, found NCCL_DEBUG=INFO)"
            if status == "failed"
            else "",
            "",
            1000.0 if status != "pending" else None,
        )
        for i, status in enumerate(statuses, 1)
    )
    return RollResult(verb, "local", "finished", nodes, log, 42.0)


def faking(result: RollResult) -> Callable[..., RollResult]:
    def verb(spec: Path, *args: Any, **kwargs: Any) -> RollResult:
        progress = next(a for a in args if callable(a))
        progress(LINE)
        return result

    return verb


def test_a_failed_roll_is_drawn_with_why_and_what_was_not_rolled() -> None:
    console = Console(record=True, width=200)
    print_roll(console, outcome("done", "failed", "pending"))
    text = console.export_text()
    assert "node02 failed: validation: nccl.conf (expected defaults, found NCCL_DEBUG=INFO)" in text
    assert "not rolled: node03" in text
    assert "roll log: /s/roll.log" in text
    assert "node01" in text.split("roll log")[0]  # every node has its row


def test_a_remove_of_nodes_slurm_never_knew_says_only_that() -> None:
    console = Console(record=True, width=200)
    print_roll(
        console, RollResult("remove", "local", "finished", (), None, 0.0, (), False, ("node07",))
    )
    text = console.export_text()
    assert text == "node07: not a Slurm node (no job can run there); container removed\n"


@pytest.mark.parametrize(("statuses", "code"), [(("done", "done"), 0), (("done", "skipped"), 1),
                                                 (("done", "failed", "pending"), 1)])  # fmt: skip
def test_roll_streams_its_lines_then_the_outcome_and_exits_by_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    statuses: tuple[str, ...],
    code: int,
) -> None:
    monkeypatch.setattr(roll_module, "roll", faking(outcome(*statuses)))
    assert main(["roll", "cluster.yaml", "--reason", "probe 2.0"]) == code
    out = capsys.readouterr().out
    assert out.index(LINE) < out.index("roll log: /s/roll.log")


def test_roll_json_is_the_outcome_with_its_format_and_the_lines_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(roll_module, "roll", faking(outcome("done", "failed")))
    assert main(["roll", "cluster.yaml", "--resume", "--json"]) == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["format"] == JSON_FORMAT and document["verb"] == "roll"
    assert document["ok"] is False and document["seconds"] == 42.0
    assert [(n["node"], n["status"]) for n in document["nodes"]] == [
        ("node01", "done"), ("node02", "failed"),
    ]  # fmt: skip
    assert LINE in captured.err and "roll log" not in captured.err


@pytest.mark.parametrize("ok", [True, False])
def test_replace_and_remove_exit_by_their_outcome(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ok: bool
) -> None:
    status = "done" if ok else "failed"
    monkeypatch.setattr(replace_module, "replace", faking(outcome(status, verb="replace")))
    monkeypatch.setattr(remove_module, "remove", faking(outcome(status, verb="remove")))
    assert main(["replace", "cluster.yaml", "node01"]) == (0 if ok else 1)
    assert main(["remove", "cluster.yaml", "node01", "--json"]) == (0 if ok else 1)
    captured = capsys.readouterr()
    assert "roll log: /s/roll.log" in captured.out
    assert json.loads(captured.out[captured.out.index("{") :])["verb"] == "remove"
