"""Every role passes `molecule test`: converge, idempotence and a verify step that asserts
real state, in systemd containers built from the local node image."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(
    p.parent.parent.parent.name for p in ROOT.glob("roles/*/molecule/default/molecule.yml")
)
MOLECULE_TIMEOUT_S = 1800


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_role_passes_molecule(role: str, docker_available: None) -> None:
    venv_bin = Path(os.sys.executable).parent
    env = {
        **os.environ,
        # Molecule runs ansible-playbook and ansible-config from PATH: the venv's.
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "MYRIAD_MOLECULE_NODE": f"molecule-{role.replace('_', '-')}",
        "ANSIBLE_NOCOLOR": "1",
        "PY_COLORS": "0",
    }
    result = subprocess.run(
        [str(venv_bin / "molecule"), "test"],
        cwd=ROOT / "roles" / role,
        env=env,
        capture_output=True,
        text=True,
        timeout=MOLECULE_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"molecule test failed for {role}:\n{result.stdout[-12000:]}\n{result.stderr[-4000:]}"
    )


def test_every_role_has_a_molecule_scenario() -> None:
    roles = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
    assert roles == ROLES
