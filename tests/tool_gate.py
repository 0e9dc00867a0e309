"""What a test does when a tool or machine it needs is missing."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(message: str) -> NoReturn:
    """Skip here; fail under CI=true, where .ci/run installs everything a test needs and a
    skip would hide a broken install."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)
