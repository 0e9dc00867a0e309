"""The project's own Python linters are clean: ruff (lint, format), mypy --strict (src, stacks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / argv[0]), *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("ruff", "check", "--no-cache", "src", "tests", "benchmarks", "stacks"),
        ("ruff", "format", "--no-cache", "--check", "src", "tests", "benchmarks", "stacks"),
        ("mypy",),
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_python_linter_is_clean(argv: tuple[str, ...]) -> None:
    result = _run(*argv)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
