"""`myriad bringup`: node health's documents, then the site playbook (`bringup.verbs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from myriad.bringup import verbs
from myriad.bringup.reporting import Reporter
from myriad.health.render import prepare
from myriad.runner import TUNED, Tuning


@dataclass(frozen=True, slots=True)
class BringupRun:
    """Where the health role found its documents (None without a health section), and the run."""

    health_documents: Path | None
    run: verbs.BringupResult


def bringup(
    spec_path: Path,
    console: Console,
    *,
    reporter: Reporter,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    limit: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    retry_failed: bool = False,
    tuning: Tuning = TUNED,
    check: bool = False,
    wait_s: float = 0.0,
) -> BringupRun:
    # Before the roles run: the health role copies each node its document.
    documents = prepare(spec_path, stack=stack, stack_outputs=stack_outputs)
    run = verbs.bringup(
        spec_path,
        console,
        reporter=reporter,
        stack=stack,
        stack_outputs=stack_outputs,
        limit=limit,
        tags=tags,
        retry_failed=retry_failed,
        tuning=tuning,
        check=check,
        wait_s=wait_s,
    )
    return BringupRun(documents, run)
