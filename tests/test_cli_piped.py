"""Piped output keeps every value whole: rich cut table cells to fit 80 columns off a
terminal ("A800-SX…", "control…") and folded a command's words mid-line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _piped(*args: str, columns: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    result = subprocess.run(
        [sys.executable, "-m", "myriad.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.stdout


def test_a_piped_plan_cuts_no_cell() -> None:
    out = _piped("plan", str(ROOT / "inventories" / "roce-10k" / "cluster.yaml"))
    assert "…" not in out
    assert "A800-SXM4-80GB" in out
    assert "controller" in out


def test_columns_still_sets_the_width() -> None:
    out = _piped("plan", str(ROOT / "inventories" / "roce-10k" / "cluster.yaml"), columns="60")
    assert max(len(line) for line in out.splitlines()) <= 60
