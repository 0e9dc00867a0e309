"""The project's own Python linters are clean: ruff (lint, format), mypy --strict (src, stacks),
and mypy again over what runs on the nodes under their Python, 3.10."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
# The nodes run Ubuntu 22.04's Python 3.10 (src/myriad/node/__init__.py); no 3.10 interpreter
# is at hand, but typeshed knows which standard-library names each version has. The spec and
# plan modules a check's `derive` names for type checkers are read, not reported (silent).
NODE_MYPY = ("mypy", "--python-version", "3.10", "--follow-imports=silent", "src/myriad/node")


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
        NODE_MYPY,
    ],
    ids=["ruff-check", "ruff-format", "mypy", "mypy-node-py310"],
)
def test_python_linter_is_clean(argv: tuple[str, ...]) -> None:
    result = _run(*argv)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_the_node_mypy_run_refuses_what_3_10_lacks(tmp_path: Path) -> None:
    """The same mypy run over a node module that uses 3.11's standard library fails."""
    module = tmp_path / "src" / "myriad" / "node" / "clock.py"
    module.parent.mkdir(parents=True)
    for folder in (module.parent.parent, module.parent):
        (folder / "__init__.py").touch()
    module.write_text("from datetime import UTC\n\nZONE = UTC\n", encoding="utf-8")
    done = subprocess.run(
        [str(VENV_BIN / NODE_MYPY[0]), *NODE_MYPY[1:], "--strict", "--no-incremental"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout
    assert 'Module "datetime" has no attribute "UTC"' in done.stdout
