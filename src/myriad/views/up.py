"""`myriad up`'s outcome, once its phases have streamed by: why bring-up stopped and what to
do about each node that did not answer, or the validation report and its verdict."""

from __future__ import annotations

from rich.console import Console

from myriad.lifecycle.up import UpResult
from myriad.views.roll import print_roll
from myriad.views.validation import print_report


def print_up(console: Console, result: UpResult) -> None:
    if result.bringup is not None and result.bringup_failed:
        failed = ", ".join(result.bringup.failed_hosts()) or result.bringup.status
        console.print(
            f"[bold red]bring-up failed on {failed}[/bold red]: fix the cause, then "
            f"`myriad up {result.spec} --retry-failed`",
            highlight=False,
            # A command to copy: folded at the terminal's width, its path would break in two.
            soft_wrap=True,
        )
        for line in result.advice:
            console.print(line, markup=False, highlight=False)
        return
    if result.rollout is not None:
        print_roll(console, result.rollout)
    report = result.validation
    if report is None:
        return
    if result.unsettled:
        console.print(
            f"not answering slurmctld after {result.settle_timeout_s:.0f} s: "
            f"{', '.join(result.unsettled)}; validating as they are",
            markup=False,
        )
    print_report(console, report)
    mark, verdict = (
        ("[bold green]✓[/bold green]", "matches")
        if report.ok
        else ("[bold red]✗[/bold red]", "differs from")
    )
    took = result.validation_seconds or 0.0
    console.print(f"{mark} validation — the cluster {verdict} its spec ({took:.1f} s)")
