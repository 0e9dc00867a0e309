"""Test tiers: `nox -s lint`, `nox -s unit`, `nox -s roles`, `nox -s integration`.

The inner loop is `nox -s unit`: every test that needs neither a Docker daemon nor an
Ansible run (tests marked `slow`), without the linters. `lint` runs ruff, mypy, yamllint
and ansible-lint; `roles` the slow Ansible checks and `molecule test` of every role
scenario; `integration` the node image, the local cluster end to end and validation
against live containers. The four tiers together are the whole suite. Plain
`.venv/bin/pytest` still runs everything, as CI does.

Sessions use the project's virtual environment (scripts/bootstrap builds it) instead of
making their own: installing Ansible, Pulumi and Molecule per session would take longer
than the tests, and the tiers must test the same packages.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent

nox.options.default_venv_backend = "none"
nox.options.sessions = ["lint", "unit"]

# Tests that are linters; they belong to the lint session, not the unit tier.
LINT_TESTS = [
    "tests/test_python_lint.py",
    "tests/test_node_boundary.py",
    "tests/roles/test_lint.py",
]


def _env() -> dict[str, str]:
    # Molecule and ansible-runner start ansible-playbook from PATH: the venv's.
    return {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _pytest(session: nox.Session, *args: str) -> None:
    session.run(str(VENV_BIN / "pytest"), *args, *session.posargs, env=_env())


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format), mypy (and mypy for 3.10 over myriad.node), import-linter,
    yamllint and ansible-lint (production profile)."""
    tool = lambda name: str(VENV_BIN / name)  # noqa: E731
    session.run(tool("ruff"), "check", ".", env=_env())
    session.run(tool("ruff"), "format", "--check", ".", env=_env())
    session.run(tool("mypy"), env=_env())
    # What runs on the nodes: their Python (3.10) and the standard library alone.
    session.run(
        tool("mypy"), "--python-version", "3.10", "--follow-imports=silent", "src/myriad/node"
    )
    session.run(tool("lint-imports"), env=_env())
    ansible = [p for p in ("roles", "playbooks") if (ROOT / p).is_dir()]
    session.run(tool("yamllint"), "--strict", ".config", *ansible, env=_env())
    session.run(tool("ansible-lint"), "--profile", "production", "--offline", *ansible, env=_env())


@nox.session
def unit(session: nox.Session) -> None:
    """Everything that needs neither Docker nor an Ansible run, linters excluded: in parallel
    on every core (pytest-xdist, a test module per worker so module fixtures are built once),
    last run's failures first (pytest's cache)."""
    _pytest(
        session,
        "-m",
        "not docker and not slow",
        *(f"--ignore={path}" for path in LINT_TESTS),
        "-n",
        "auto",
        "--dist",
        "loadfile",
        "--failed-first",
    )


@nox.session
def roles(session: nox.Session) -> None:
    """What runs Ansible: the slow checks without Docker (the site playbook's layer groups,
    every role's preflight on every example and OS, the NCCL role's file, and the few other
    tests that take many seconds: every truncation of a capture, fifty emulated BMCs), then
    `molecule test` of every role scenario (Docker and the node image); the image phase runs
    for real in tests/integration/test_image_mode_local.py."""
    _pytest(session, "-m", "slow and not docker", *(f"--ignore={p}" for p in LINT_TESTS))
    _pytest(session, "tests/roles/test_molecule.py", "-m", "docker")


@nox.session
def integration(session: nox.Session) -> None:
    """The node image, the local cluster end to end, validation on live containers."""
    _pytest(session, "tests/integration", "-m", "docker")
