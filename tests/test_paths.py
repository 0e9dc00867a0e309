"""Finding the roles and playbooks: $MYRIAD_HOME, else the checkout, else a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from myriad import paths
from myriad.cli import main
from myriad.errors import ProjectNotFound

ROOT = Path(__file__).resolve().parents[1]


def _project(folder: Path) -> Path:
    (folder / "roles").mkdir(parents=True)
    (folder / "playbooks").mkdir()
    return folder


def test_in_a_checkout_the_project_is_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.HOME_ENV, raising=False)
    assert paths.project_root() == ROOT
    assert paths.playbook("site.yml") == ROOT / "playbooks" / "site.yml"
    assert paths.playbook("site.yml").is_file()
    assert (paths.roles_dir() / "common" / "defaults" / "main.yml").is_file()
    assert paths.templates_dir() == ROOT / "templates"


def test_myriad_home_wins_over_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _project(tmp_path / "release")
    monkeypatch.setenv(paths.HOME_ENV, str(home))
    assert paths.project_root() == home
    assert paths.roles_dir() == home / "roles"


def test_a_myriad_home_without_roles_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "playbooks").mkdir()
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    with pytest.raises(ProjectNotFound, match=r"has no roles/; set it to the folder of a Myriad"):
        paths.project_root()


def test_outside_a_checkout_without_myriad_home_the_error_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(paths.HOME_ENV, raising=False)
    # Where an installed package sits: site-packages/myriad/, with no roles/ above it.
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(paths, "_PACKAGED", tmp_path / "site-packages" / "myriad" / "_project")
    with pytest.raises(ProjectNotFound, match=r"is not in a checkout; set \$MYRIAD_HOME"):
        paths.playbook("site.yml")


def test_the_command_reports_a_missing_project_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # --stack runs `pulumi stack output` in the project folder, so it needs the project first.
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "nowhere"))
    spec = ROOT / "inventories" / "starter-64" / "cluster.yaml"
    assert main(["render", str(spec), "--out", str(tmp_path / "inv"), "--stack", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: $MYRIAD_HOME is ")
    assert "Traceback" not in err


def test_nothing_is_looked_up_at_import_time(tmp_path: Path) -> None:
    """Every module imports, and a spec plans and renders, with no project to be found."""
    code = (
        "import pathlib, pkgutil, importlib, myriad\n"
        "for m in pkgutil.walk_packages(myriad.__path__, 'myriad.'):\n"
        "    importlib.import_module(m.name)\n"
        "from myriad.provision.resolve import render_spec\n"
        f"r = render_spec(pathlib.Path({str(ROOT / 'inventories/starter-64/cluster.yaml')!r}),"
        f" pathlib.Path({str(tmp_path / 'inv')!r}))\n"
        "print(r.hosts)\n"
    )
    env = {**os.environ, paths.HOME_ENV: str(tmp_path / "nowhere")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) > 0


def test_an_installed_wheel_finds_the_copy_setup_py_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wheel's build copies roles/, playbooks/ and templates/ into myriad/_project/
    (setup.py), so an installed package runs bringup without a checkout."""
    sys.path.insert(0, str(ROOT))
    try:
        from setup import copy_assets
    finally:
        sys.path.remove(str(ROOT))
    package = tmp_path / "site-packages" / "myriad"
    packaged = copy_assets(ROOT, package)
    monkeypatch.delenv(paths.HOME_ENV, raising=False)
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(paths, "_PACKAGED", packaged)
    assert paths.project_root() == packaged
    assert paths.playbook("site.yml").read_text() == (ROOT / "playbooks" / "site.yml").read_text()
    assert (paths.roles_dir() / "slurm" / "templates" / "slurm.conf.j2").is_file()
    assert (paths.templates_dir() / "pxe" / "user-data.j2").is_file()
    # The roles' Molecule scenarios are tests, not assets.
    assert not list(paths.roles_dir().glob("*/molecule"))
