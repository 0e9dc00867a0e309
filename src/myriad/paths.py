"""Where Myriad's assets are: the Ansible roles, playbooks and templates it runs.

They are not Python modules, so they do not travel inside the package: they live at the top
of the project (`roles/`, `playbooks/`, `templates/`, beside `Pulumi.yaml`). The project is

1. `$MYRIAD_HOME`, when it is set (a checkout or an unpacked release of the project);
2. else the checkout this package sits in (`<project>/src/myriad/paths.py`);
3. else the copy an installed wheel carries (`myriad/_project/`, made by setup.py);
4. else there is none, and asking for an asset raises a MyriadError that says what to set.

Nothing is looked up at import time, so the package imports (and plans, renders, reads
stack outputs) anywhere; only the steps that run Ansible or Pulumi need the project.
"""

from __future__ import annotations

import os
from pathlib import Path

from myriad.errors import ProjectNotFound

HOME_ENV = "MYRIAD_HOME"
# What makes a folder a Myriad project: the playbooks and the roles they apply.
_MARKERS = ("roles", "playbooks")
_CHECKOUT = Path(__file__).resolve().parents[2]
_PACKAGED = Path(__file__).resolve().parent / "_project"


def _is_project(folder: Path) -> bool:
    return all((folder / name).is_dir() for name in _MARKERS)


def project_root() -> Path:
    """The project folder holding roles/, playbooks/ and templates/ (see the module doc)."""
    home = os.environ.get(HOME_ENV)
    if home:
        folder = Path(home).expanduser().resolve()
        if not _is_project(folder):
            missing = ", ".join(f"{n}/" for n in _MARKERS if not (folder / n).is_dir())
            raise ProjectNotFound(
                f"${HOME_ENV} is {home}, which has no {missing}; set it to the folder of a "
                "Myriad checkout (the one with roles/ and playbooks/)"
            )
        return folder
    if _is_project(_CHECKOUT):
        return _CHECKOUT
    if _is_project(_PACKAGED):
        return _PACKAGED
    raise ProjectNotFound(
        f"cannot find Myriad's roles/ and playbooks/: this package ({_CHECKOUT}) is not in a "
        f"checkout; set ${HOME_ENV} to the folder of a Myriad checkout"
    )


def roles_dir() -> Path:
    return project_root() / "roles"


def playbook(name: str) -> Path:
    """A playbook of the project by file name, e.g. `site.yml`."""
    return project_root() / "playbooks" / name


def templates_dir() -> Path:
    return project_root() / "templates"
