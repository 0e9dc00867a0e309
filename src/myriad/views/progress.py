"""Progress a person can follow: phases, and per node what Ansible is doing right now.

On a terminal a live table shows each node's current task and counts; elsewhere (CI logs,
a pipe) a line per play as it starts, a line of totals at most every `HEARTBEAT_S` in
between, one line per finished phase and the recap, so a log shows a long Ansible phase
moving without drowning in it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from myriad.runner import RunResult


@dataclass(slots=True)
class HostProgress:
    task: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: bool = False


@dataclass(slots=True)
class PlaybookProgress:
    """Folds ansible-runner events into per-host progress."""

    hosts: dict[str, HostProgress] = field(default_factory=dict)
    play: str = ""
    # Told after each event is folded in: the live table redraws, the log writes a line.
    listener: Callable[[], None] | None = None

    def on_event(self, event: Mapping[str, Any]) -> None:
        self._fold(event)
        if self.listener is not None:
            self.listener()

    def _fold(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play") or "")
            return
        host = data.get("host")
        if not host:
            return
        progress = self.hosts.setdefault(host, HostProgress())
        if kind == "runner_on_start":
            progress.task = str(data.get("task") or "")
        elif kind == "runner_on_ok":
            progress.ok += 1
            if (data.get("res") or {}).get("changed"):
                progress.changed += 1
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            progress.failed += 1
        elif kind == "runner_on_unreachable":
            progress.unreachable = True

    def table(self, title: str) -> Table:
        table = Table(title=title, title_justify="left")
        for column in ("node", "ok", "changed", "failed", "now"):
            table.add_column(
                column, justify="right" if column in ("ok", "changed", "failed") else "left"
            )
        for host, progress in sorted(self.hosts.items()):
            style = "red" if progress.failed or progress.unreachable else ""
            table.add_row(
                host,
                str(progress.ok),
                str(progress.changed),
                str(progress.failed),
                "UNREACHABLE" if progress.unreachable else progress.task,
                style=style,
            )
        if self.play:
            table.caption = self.play
        return table


HEARTBEAT_S = 30.0


class Phases:
    """Phase lines: `✓ containers 4 nodes (3.2 s)`; the live part only on a terminal.

    The console form of bring-up's `Reporter` (myriad.bringup.reporting)."""

    def __init__(
        self,
        console: Console,
        clock: Callable[[], float] = time.monotonic,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.console = console
        self.clock, self.heartbeat_s = clock, heartbeat_s

    @contextmanager
    def phase(self, name: str) -> Iterator[list[str]]:
        notes: list[str] = []
        start = time.monotonic()
        if self.console.is_terminal:
            self.console.print(f"[bold]…[/bold] {escape(name)}")
        try:
            yield notes
        except BaseException:
            elapsed = time.monotonic() - start
            self.console.print(f"[bold red]✗[/bold red] {escape(name)} ({elapsed:.1f} s)")
            raise
        # Names and notes carry cluster names and paths: text, never markup.
        detail = escape(f" — {', '.join(notes)}") if notes else ""
        self.console.print(
            f"[bold green]✓[/bold green] {escape(name)}{detail} ({time.monotonic() - start:.1f} s)"
        )

    @contextmanager
    def playbook(self, title: str) -> Iterator[PlaybookProgress]:
        progress = PlaybookProgress()
        if not self.console.is_terminal:
            yield self._logged(progress, title)
            return
        with Live(progress.table(title), console=self.console, refresh_per_second=4) as live:
            progress.listener = lambda: live.update(progress.table(title))
            yield progress

    def _logged(self, progress: PlaybookProgress, title: str) -> PlaybookProgress:
        """Off a terminal: a line when a play starts, totals when a heartbeat has passed."""
        start = last = self.clock()
        play = progress.play

        def totals() -> str:
            hosts = progress.hosts.values()
            return (
                f"{len(progress.hosts)} nodes, {sum(h.ok for h in hosts)} ok, "
                f"{sum(h.changed for h in hosts)} changed, {sum(h.failed for h in hosts)} failed"
                f" ({self.clock() - start:.0f} s)"
            )

        def after_event() -> None:
            nonlocal last, play
            now = self.clock()
            if progress.play != play:
                play = progress.play
                self.console.print(f"… {title}: play {play}", markup=False)
                last = now
            elif now - last >= self.heartbeat_s:
                self.console.print(f"… {title}: {totals()}", markup=False)
                last = now

        progress.listener = after_event
        return progress

    def recap(self, result: RunResult, hosts: Sequence[str]) -> None:
        self.console.print(recap_table(result, hosts))


def recap_table(result: RunResult, hosts: Sequence[str]) -> Table:
    """Ansible's PLAY RECAP, one row per host, with the failing task where there is one."""
    table = Table(title=f"Recap ({result.status}, {result.seconds:.1f} s)", title_justify="left")
    for column in ("node", "ok", "changed", "failed", "unreachable", "failing task"):
        table.add_column(column, justify="left" if column in ("node", "failing task") else "right")
    failures = {f.host: f for f in result.failures}
    for host in hosts:
        stats = result.stats.get(host, {})
        failure = failures.get(host)
        detail = Text("")
        if failure is not None:
            detail = Text(f"{failure.task}: {failure.message}", style="red")
        table.add_row(
            host,
            str(stats.get("ok", 0)),
            str(stats.get("changed", 0)),
            str(stats.get("failures", 0)),
            str(stats.get("dark", 0)),
            detail,
        )
    return table
