"""One source for the version: `__version__` in src/myriad/__init__.py.

pyproject.toml declares the version dynamic and reads that attribute; the installed
metadata, `myriad --version` and the package attribute must all say the same.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import myriad
from myriad.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_takes_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "the version is written in two places"
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "myriad.__version__"}


def test_the_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.dev\d+)?", myriad.__version__)


def test_installed_metadata_and_cli_agree(capsys: pytest.CaptureFixture[str]) -> None:
    # A stale editable install (metadata from an older __version__) fails here: reinstall.
    assert importlib.metadata.version("myriad-cluster") == myriad.__version__
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"myriad {myriad.__version__}"
