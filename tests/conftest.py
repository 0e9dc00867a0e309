"""Fixtures shared by the suites that need a real Docker daemon."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tool_gate import unavailable


def docker_unavailable_reason() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        result = subprocess.run(
            ["docker", "info"], capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30s"
    if result.returncode != 0:
        return f"the Docker daemon does not answer ({result.stderr.strip()[-200:]})"
    return None


@pytest.fixture(scope="session")
def docker_available() -> None:
    reason = docker_unavailable_reason()
    if reason is None:
        return
    unavailable(f"{reason}; run .ci/docker.sh as root to install and start Docker")
