"""Build hook: the wheel carries the roles, playbooks and templates Myriad runs.

pyproject.toml holds the project; this only extends `build_py` so an installed package
finds its assets in `myriad/_project/` (myriad.paths) and runs `bringup` without a
checkout. An editable install reads them from the checkout instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
ASSETS = ("roles", "playbooks", "templates")
# Molecule scenarios and caches are the project's tests, not what a node is configured with.
LEFT_OUT = ("molecule", "__pycache__", "*.pyc", ".ansible")


def copy_assets(source: Path, package_dir: Path) -> Path:
    """Copy the assets into `<package_dir>/_project`; returns that folder."""
    target = package_dir / "_project"
    shutil.rmtree(target, ignore_errors=True)
    for name in ASSETS:
        shutil.copytree(source / name, target / name, ignore=shutil.ignore_patterns(*LEFT_OUT))
    return target


class BuildWithAssets(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            copy_assets(ROOT, Path(self.build_lib) / "myriad")


# setuptools' build backend runs this file as __main__; tests import copy_assets alone.
if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildWithAssets})
