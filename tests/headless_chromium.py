"""Headless Chromium for the tests that look at what Myriad draws: the command line to run
it, or a skip where it is not installed (a failure under CI, whose bootstrap installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def headless_chromium(profile: Path) -> list[str]:
    """Chromium's argv, headless, with its own profile folder under the test's tmp_path."""
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: scripts/bootstrap installs it")
        pytest.skip("chromium is not installed (scripts/bootstrap installs it)")
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]


def screenshot(chromium: list[str], page: Path, shot: Path, width: int, height: int) -> int:
    """Render `page` to the PNG `shot` at width x height; its size in bytes (a blank
    picture compresses to a few kB, one with boxes and text to tens)."""
    subprocess.run(
        [*chromium, f"--screenshot={shot}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return shot.stat().st_size
