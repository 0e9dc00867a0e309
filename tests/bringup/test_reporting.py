"""Bring-up reports through the Reporter protocol: what it tells, not how it looks.

`run_site` is driven here with the playbook run replaced (no Ansible, no Docker): the reporter
must get the playbook's events as they come and the recap at the end, and the console form
(`views.progress.Phases`) must draw the same run as one phase line per step and a recap.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from myriad.bringup import flow
from myriad.bringup.reporting import EventSink, Reporter
from myriad.plan.pipeline import plan_loaded
from myriad.runner import RunResult
from myriad.views.progress import Phases

from spec_builder import load_example

EVENTS = [
    {"event": "runner_on_start", "event_data": {"host": "node01", "task": "common : packages"}},
    {"event": "runner_on_ok", "event_data": {"host": "node01", "res": {"changed": True}}},
]


class Recorder:
    """A Reporter that writes down what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Any]] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[list[str]]:
        notes: list[str] = []
        yield notes
        self.told.append(("phase", (name, notes)))

    @contextmanager
    def playbook(self, title: str) -> Iterator[EventSink]:
        recorder = self

        class Sink:
            def on_event(self, event: Mapping[str, Any]) -> None:
                recorder.told.append(("event", event["event"]))

        self.told.append(("playbook", title))
        yield Sink()

    def recap(self, result: RunResult, hosts: Sequence[str]) -> None:
        self.told.append(("recap", (result.status, list(hosts))))


def _fake_run(run_dir_seen: list[Path]) -> Any:
    def run_playbook(playbook: Path, inventory: Path, run_dir: Path, **kwargs: Any) -> RunResult:
        assert playbook.name == "site.yml" and playbook.is_file()
        run_dir_seen.append(run_dir)
        for event in EVENTS:
            kwargs["on_event"](event)
        return RunResult(
            status="successful",
            rc=0,
            run_dir=run_dir,
            stats={"node01": {"ok": 1, "changed": 1}},
            failures=(),
            changed_hosts=("node01",),
            seconds=1.5,
        )

    return run_playbook


def _run_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reporter: Reporter) -> str:
    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path))
    seen: list[Path] = []
    monkeypatch.setattr(flow, "run_playbook", _fake_run(seen))
    result = plan_loaded(load_example("local"))
    state = flow.cluster_state("local")
    inventory = flow.render_state(result, state)
    out = io.StringIO()
    console = Console(file=out, width=160)
    outcome = flow.run_site(result, inventory, state, console, reporter, limit=["node01"])
    assert outcome.ok
    assert state.read_status()["last_bringup"]["run_dir"] == str(seen[0])
    return out.getvalue()


def test_the_reporter_hears_the_playbook_and_its_recap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    printed = _run_site(tmp_path, monkeypatch, recorder)
    assert recorder.told == [
        ("playbook", "bring-up (playbooks/site.yml)"),
        ("event", "runner_on_start"),
        ("event", "runner_on_ok"),
        ("recap", ("successful", ["node01"])),
    ]
    assert "Ansible's full event log" in printed


def test_the_console_reporter_draws_the_recap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = io.StringIO()
    phases = Phases(Console(file=drawn, width=160))
    with phases.phase("containers") as notes:
        notes.append("4 created")
    _run_site(tmp_path, monkeypatch, phases)
    text = drawn.getvalue()
    assert "✓ containers — 4 created" in text
    assert "Recap (successful, 1.5 s)" in text
    assert "node01" in text


def test_off_a_terminal_a_long_playbook_logs_its_plays_and_a_heartbeat() -> None:
    # A CI log used to show nothing for the whole Ansible phase (minutes).
    drawn = io.StringIO()
    now = [0.0]
    phases = Phases(Console(file=drawn, width=160), clock=lambda: now[0], heartbeat_s=30)
    play = {"event": "playbook_on_play_start", "event_data": {"play": "slurm"}}
    with phases.playbook("site.yml") as progress:
        progress.on_event(play)
        for second in range(1, 100):
            now[0] = float(second)
            progress.on_event(EVENTS[second % 2])
    lines = drawn.getvalue().splitlines()
    assert lines[0] == "… site.yml: play slurm"
    beats = lines[1:]
    # One line of totals per 30 s, not one per event.
    assert len(beats) == 3
    assert beats[0] == "… site.yml: 1 nodes, 15 ok, 15 changed, 0 failed (30 s)"


def test_on_a_terminal_the_live_table_follows_the_events() -> None:
    # The live table used to replace PlaybookProgress.on_event, which a slots dataclass
    # refuses: `myriad up` on a terminal stopped at its first playbook.
    drawn = io.StringIO()
    phases = Phases(Console(file=drawn, width=160, force_terminal=True))
    with phases.playbook("site.yml") as progress:
        for event in EVENTS:
            progress.on_event(event)
    assert progress.hosts["node01"].changed == 1
    assert "common : packages" in drawn.getvalue()


def test_the_site_play_finds_this_myriads_node_package_beside_the_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rdma role ships it ({{ inventory_dir }}/../myriad-node.pyz): written before the run.
    import yaml

    from myriad.node import artefact

    monkeypatch.setenv(flow.STATE_ENV, str(tmp_path))
    shipped: list[bytes] = []
    fake = _fake_run([])

    def run_playbook(playbook: Path, inventory: Path, run_dir: Path, **kwargs: Any) -> RunResult:
        shipped.append((inventory.parent.parent / artefact.NAME).read_bytes())
        result: RunResult = fake(playbook, inventory, run_dir, **kwargs)
        return result

    monkeypatch.setattr(flow, "run_playbook", run_playbook)
    result = plan_loaded(load_example("local"))
    state = flow.cluster_state("local")
    state.root.joinpath(artefact.NAME).write_bytes(b"an older Myriad's node code")
    inventory = flow.render_state(result, state)
    flow.run_site(result, inventory, state, Console(file=io.StringIO()), Recorder())
    assert shipped == [artefact.build()]
    defaults = Path(__file__).resolve().parents[2] / "roles/rdma/defaults/main.yml"
    default = yaml.safe_load(defaults.read_text(encoding="utf-8"))["rdma_node_artefact"]
    assert default == "{{ inventory_dir }}/../" + artefact.NAME
    assert state.node_artefact == state.inventory.parent / artefact.NAME
