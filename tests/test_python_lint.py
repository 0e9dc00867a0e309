"""The project's own Python linters are clean: ruff (lint, format), mypy --strict (src, stacks),
mypy again over what runs on the nodes under their Python, 3.10, and vulture (dead code)."""

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


# Vulture's findings that are judged: code nothing calls. Unused variables and attributes are
# not: here they are data (dataclass, NamedTuple and pydantic fields read by serialisation,
# the check declarations the registry collects by type), which only a reader of the data uses.
DEAD_KINDS = ("function", "method", "class", "property", "import")


def dead_code(output: str) -> list[str]:
    return [
        line
        for line in output.splitlines()
        if any(f": unused {kind} " in line for kind in DEAD_KINDS) or "unreachable code" in line
    ]


def test_nothing_is_dead_code() -> None:
    """vulture over src, stacks, tests and benchmarks ([tool.vulture] in pyproject.toml)."""
    result = _run("vulture")
    assert result.returncode in (0, 3), result.stderr  # 3: vulture found something
    found = dead_code(result.stdout)
    assert not found, "delete it, or use it:\n" + "\n".join(found)


def test_the_dead_code_check_finds_an_uncalled_function(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text(
        "def used() -> int:\n    return 1\n\n\ndef forgotten() -> int:\n    return 2\n\n\n"
        "VALUE = used()\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [str(VENV_BIN / "vulture"), "--min-confidence", "60", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = dead_code(result.stdout)
    assert len(found) == 1 and "unused function 'forgotten'" in found[0], result.stdout
