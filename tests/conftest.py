"""Fixtures shared by the suites that need a real Docker daemon."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


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
    message = f"{reason}; run .ci/docker.sh as root to install and start Docker"
    # On CI a missing daemon is a broken runner, and a skip would hide that.
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)
