"""CHANGELOG.md names the package's version as its newest release."""

from __future__ import annotations

import re
from pathlib import Path

import myriad

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def test_the_newest_release_in_the_changelog_is_the_packages_version() -> None:
    headings = re.findall(r"^## (.+)$", CHANGELOG.read_text(encoding="utf-8"), re.MULTILINE)
    releases = [h for h in headings if h != "Unreleased"]
    assert releases, "CHANGELOG.md names no release"
    assert releases[0] == myriad.__version__, (
        f"CHANGELOG.md's newest release is {releases[0]}; src/myriad/__init__.py says "
        f"{myriad.__version__}: add a section for it"
    )
    assert headings[0] in ("Unreleased", myriad.__version__)
