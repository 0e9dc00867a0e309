"""The conditions a benchmark measured under, printed with its figures.

A timing means little without the machine and what else ran on it: the README's 26 s
no-change `up` measured 42 s at a load of 1.6. Every benchmark prints `conditions()` before
it starts and `load_after()` when it ends, and the README quotes both beside each table.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the README quotes: "conditions: 2 cores, 23.4 GiB, load 0.52/0.61/0.70, ..."
PATTERN = re.compile(
    r"conditions: (?P<cores>\d+) cores, (?P<memory_gib>[\d.]+) GiB, "
    r"load (?P<load>[\d.]+/[\d.]+/[\d.]+), Python [\d.]+, Linux \S+, "
    r"commit (?P<commit>[0-9a-f]{7,}\+?|unknown), \d{4}-\d\d-\d\dT\d\d:\d\dZ"
)


def _load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024**2
    return 0.0


def _commit() -> str:
    """The checkout's commit, `+` when the tree has changes beside it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    return commit + ("+" if git("status", "--porcelain", "--untracked-files=no") else "")


def conditions() -> str:
    """One line: cores, memory, load average (1/5/15 min), Python, kernel, commit, time."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")
    return (
        f"conditions: {os.cpu_count()} cores, {_memory_gib():.1f} GiB, load {_load()}, "
        f"Python {platform.python_version()}, Linux {platform.release()}, "
        f"commit {_commit()}, {now}"
    )


def load_after() -> str:
    """The load average when the benchmark ends: other work that came during it shows here."""
    return f"load after: {_load()}"


def measured(main: Callable[[], int | None]) -> int:
    """Run a benchmark's main between its conditions and the load it ended at."""
    print(conditions(), flush=True)
    code = main()
    print(load_after(), flush=True)
    return code or 0
