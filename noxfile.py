"""Test tiers: `nox -s lint`, `nox -s unit`, `nox -s roles`, `nox -s integration`.

The inner loop is `nox -s unit`: every test that needs no Docker daemon, without the
linters (under 3 minutes on a 2-core machine). `lint` runs ruff, mypy, yamllint and
ansible-lint; `roles` runs `molecule test` of every role scenario; `integration` the node
image, the local cluster end to end and validation against live containers. Plain
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
LINT_TESTS = ["tests/test_python_lint.py", "tests/roles/test_lint.py"]


def _env() -> dict[str, str]:
    # Molecule and ansible-runner start ansible-playbook from PATH: the venv's.
    return {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _pytest(session: nox.Session, *args: str) -> None:
    session.run(str(VENV_BIN / "pytest"), *args, *session.posargs, env=_env())


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format), mypy, yamllint and ansible-lint (production profile)."""
    tool = lambda name: str(VENV_BIN / name)  # noqa: E731
    session.run(tool("ruff"), "check", ".", env=_env())
    session.run(tool("ruff"), "format", "--check", ".", env=_env())
    session.run(tool("mypy"), env=_env())
    ansible = [p for p in ("roles", "playbooks") if (ROOT / p).is_dir()]
    session.run(tool("yamllint"), "--strict", ".config", *ansible, env=_env())
    session.run(tool("ansible-lint"), "--profile", "production", "--offline", *ansible, env=_env())


@nox.session
def unit(session: nox.Session) -> None:
    """Everything that needs no Docker daemon, linters excluded."""
    _pytest(
        session,
        "-m",
        "not docker",
        *(f"--ignore={path}" for path in LINT_TESTS),
        "-p",
        "no:cacheprovider",
    )


@nox.session
def roles(session: nox.Session) -> None:
    """`molecule test` of every role scenario (Docker and the node image)."""
    _pytest(session, "tests/roles/test_molecule.py", "-m", "docker")


@nox.session
def integration(session: nox.Session) -> None:
    """The node image, the local cluster end to end, validation on live containers."""
    _pytest(session, "tests/integration", "-m", "docker")
